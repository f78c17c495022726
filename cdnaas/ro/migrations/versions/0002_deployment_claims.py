"""Deployments claimed by the RO replica working on them, with a lease.

Revision ID: ro_0002
Revises: ro_0001
"""
import sqlalchemy as sa
from alembic import op

revision = "ro_0002"
down_revision = "ro_0001"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("ro_deployments") as batch:
        batch.add_column(sa.Column("claimed_by", sa.String(128)))
        batch.add_column(sa.Column("claim_expires", sa.DateTime(timezone=True)))


def downgrade():
    with op.batch_alter_table("ro_deployments") as batch:
        batch.drop_column("claim_expires")
        batch.drop_column("claimed_by")
