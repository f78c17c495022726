"""Tenants and API tokens.

Revision ID: api_0001
"""
import sqlalchemy as sa
from alembic import op

revision = "api_0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "api_tenants",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("tenant_name", sa.String(63),
                  sa.ForeignKey("api_tenants.name", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("description", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade():
    op.drop_table("api_tokens")
    op.drop_table("api_tenants")
