"""Deployments of SIGs through the VIM driver.

Revision ID: ro_0001
Revises:
"""
import sqlalchemy as sa
from alembic import op

revision = "ro_0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "ro_deployments",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("driver", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("sig", sa.JSON(), nullable=False),
        sa.Column("deployment", sa.JSON(), nullable=True),
        sa.Column("steps", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_ro_deployments_status", "ro_deployments", ["status"])


def downgrade():
    op.drop_index("ix_ro_deployments_status", table_name="ro_deployments")
    op.drop_table("ro_deployments")
