"""An UPDATE records the lease end it replaces, so a failed change keeps the previous one.

Revision ID: so_0004
"""
import sqlalchemy as sa
from alembic import op

revision = "so_0004"
down_revision = "so_0003"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("so_operations") as batch:
        batch.add_column(sa.Column("previous_lease_end", sa.DateTime(timezone=True)))


def downgrade():
    with op.batch_alter_table("so_operations") as batch:
        batch.drop_column("previous_lease_end")
