"""Actions of the Instance Manager.

Revision ID: im_0001
"""
import sqlalchemy as sa
from alembic import op

revision = "im_0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "im_actions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("instance_id", sa.String(36), nullable=False, index=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("details", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, index=True),
    )


def downgrade():
    op.drop_table("im_actions")
