"""Operations claimed by the SO replica running them, with a lease.

Revision ID: so_0002
"""
import sqlalchemy as sa
from alembic import op

revision = "so_0002"
down_revision = "so_0001"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("so_operations") as batch:
        batch.add_column(sa.Column("claimed_by", sa.String(128)))
        batch.add_column(sa.Column("claim_expires", sa.DateTime(timezone=True)))


def downgrade():
    with op.batch_alter_table("so_operations") as batch:
        batch.drop_column("claim_expires")
        batch.drop_column("claimed_by")
