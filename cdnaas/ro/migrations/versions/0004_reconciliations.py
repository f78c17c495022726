"""Reconciliations of what runs with the deployment records, owed after a restore.

Revision ID: ro_0004
Revises: ro_0003
"""
import sqlalchemy as sa
from alembic import op

revision = "ro_0004"
down_revision = "ro_0003"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "ro_reconciliations",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("cause", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("actions", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("claimed_by", sa.String(128), nullable=True),
        sa.Column("claim_expires", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_ro_reconciliations_status", "ro_reconciliations", ["status"])


def downgrade():
    op.drop_index("ix_ro_reconciliations_status", table_name="ro_reconciliations")
    op.drop_table("ro_reconciliations")
