"""vCDN service options (cache rules, custom hostnames, TLS) and a revision for ETags.

Revision ID: so_0003
"""
import sqlalchemy as sa
from alembic import op

revision = "so_0003"
down_revision = "so_0002"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("so_instances") as batch:
        batch.add_column(sa.Column("service", sa.JSON))
        batch.add_column(sa.Column("revision", sa.Integer, nullable=False, server_default="1"))


def downgrade():
    with op.batch_alter_table("so_instances") as batch:
        batch.drop_column("revision")
        batch.drop_column("service")
