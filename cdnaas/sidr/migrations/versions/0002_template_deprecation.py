"""A template version may be deprecated: kept for the vCDNs that use it, offered no more.

Revision ID: sidr_0002
"""
import sqlalchemy as sa
from alembic import op

revision = "sidr_0002"
down_revision = "sidr_0001"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("sidr_templates") as batch:
        batch.add_column(sa.Column("deprecated_at", sa.DateTime(timezone=True), nullable=True))


def downgrade():
    with op.batch_alter_table("sidr_templates") as batch:
        batch.drop_column("deprecated_at")
