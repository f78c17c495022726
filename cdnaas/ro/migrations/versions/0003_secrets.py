"""Tenants' certificates and keys, encrypted at rest (or referenced in Barbican).

Revision ID: ro_0003
Revises: ro_0002
"""
import sqlalchemy as sa
from alembic import op

revision = "ro_0003"
down_revision = "ro_0002"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "ro_secrets",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("backend", sa.String(32), nullable=False),
        sa.Column("fingerprint_sha256", sa.String(64), nullable=False),
        sa.Column("ciphertext", sa.Text(), nullable=True),
        sa.Column("external_ref", sa.String(512), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_ro_secrets_owner", "ro_secrets", ["owner"])


def downgrade():
    op.drop_index("ix_ro_secrets_owner", table_name="ro_secrets")
    op.drop_table("ro_secrets")
