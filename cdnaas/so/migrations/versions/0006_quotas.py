"""Quotas: a tenant's limits, and the operator's defaults (tenant ``*``).

Revision ID: so_0006
"""
import sqlalchemy as sa
from alembic import op

revision = "so_0006"
down_revision = "so_0005"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "so_quotas",
        sa.Column("tenant", sa.String(63), primary_key=True),
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("limit", sa.Integer, nullable=False))


def downgrade():
    op.drop_table("so_quotas")
