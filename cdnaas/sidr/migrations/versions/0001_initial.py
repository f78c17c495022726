"""SIDR's initial tables: sidr_templates.

Revision ID: sidr_0001
Revises:
"""
import sqlalchemy as sa
from alembic import op

revision = "sidr_0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "sidr_templates",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("flavor", sa.String(63), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("plugin", sa.String(63), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("flavor", "version", name="uq_sidr_templates_flavor_version"),
    )


def downgrade():
    op.drop_table("sidr_templates")
