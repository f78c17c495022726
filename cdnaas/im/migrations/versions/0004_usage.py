"""Usage per vCDN, region and minute (traffic from the balancers' logs, viewer-, vCPU-
seconds, energy) and where the IM stands in each vCDN's logs.

Revision ID: im_0004
"""
import sqlalchemy as sa
from alembic import op

revision = "im_0004"
down_revision = "im_0003"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "im_usage",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("vcdn_id", sa.String(36), nullable=False),
        sa.Column("region", sa.String(63), nullable=False),
        sa.Column("minute", sa.DateTime(timezone=True), nullable=False, index=True),
        *[sa.Column(name, sa.BigInteger, nullable=False, server_default="0")
          for name in ("requests", "bytes_out", "hits", "misses", "status_2xx", "status_3xx",
                       "status_4xx", "status_5xx")],
        *[sa.Column(name, sa.Float, nullable=False, server_default="0")
          for name in ("viewer_seconds", "vcpu_seconds", "energy_wh")],
        sa.UniqueConstraint("vcdn_id", "region", "minute", name="uq_im_usage_minute"),
    )
    op.create_table(
        "im_usage_cursors",
        sa.Column("vcdn_id", sa.String(36), primary_key=True),
        sa.Column("cursor", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade():
    op.drop_table("im_usage_cursors")
    op.drop_table("im_usage")
