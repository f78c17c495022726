"""An INVALIDATE or PREFETCH operation records what it was asked (paths, prefixes), so a
restarted SO carries it out.

Revision ID: so_0005
"""
import sqlalchemy as sa
from alembic import op

revision = "so_0005"
down_revision = "so_0004"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("so_operations") as batch:
        batch.add_column(sa.Column("request", sa.JSON))


def downgrade():
    with op.batch_alter_table("so_operations") as batch:
        batch.drop_column("request")
