"""History: the time series in 10-minute steps, kept past the retention of raw points.

Revision ID: im_0003
"""
import sqlalchemy as sa
from alembic import op

revision = "im_0003"
down_revision = "im_0002"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "im_history",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False, index=True),
        sa.Column("scope", sa.String(8), nullable=False),
        sa.Column("vcdn_id", sa.String(36), nullable=True),
        sa.Column("key", sa.String(63), nullable=False),
        sa.Column("passes", sa.Integer, nullable=False),
        sa.Column("viewers", sa.Float, nullable=True),
        sa.Column("requests_per_second", sa.Float, nullable=True),
        sa.Column("mos", sa.Float, nullable=True),
        sa.Column("cpu", sa.Float, nullable=True),
        sa.Column("vcpus", sa.Integer, nullable=True),
        sa.Column("watts", sa.Float, nullable=True),
        sa.Column("energy_wh", sa.Float, nullable=True),
    )
    op.create_index("ix_im_history_series", "im_history", ["vcdn_id", "scope", "key", "at"])


def downgrade():
    op.drop_index("ix_im_history_series", table_name="im_history")
    op.drop_table("im_history")
