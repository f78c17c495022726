"""Time series, host marks, and decisions about regions and hosts.

Revision ID: im_0002
"""
import sqlalchemy as sa
from alembic import op

revision = "im_0002"
down_revision = "im_0001"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("im_actions") as table:
        table.alter_column("instance_id", existing_type=sa.String(36), nullable=True)
        table.add_column(sa.Column("region", sa.String(63), nullable=True))
        table.add_column(sa.Column("host", sa.String(63), nullable=True))
    op.create_table(
        "im_samples",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False, index=True),
        sa.Column("scope", sa.String(8), nullable=False),
        sa.Column("vcdn_id", sa.String(36), nullable=True),
        sa.Column("key", sa.String(63), nullable=False),
        sa.Column("viewers", sa.Float, nullable=True),
        sa.Column("requests_per_second", sa.Float, nullable=True),
        sa.Column("mos", sa.Float, nullable=True),
        sa.Column("cpu", sa.Float, nullable=True),
        sa.Column("vcpus", sa.Integer, nullable=True),
        sa.Column("watts", sa.Float, nullable=True),
        sa.Column("energy_wh", sa.Float, nullable=True),
        sa.Column("source", sa.String(8), nullable=True),
        sa.Column("healthy", sa.Boolean, nullable=True),
        sa.Column("requests_total", sa.BigInteger, nullable=True),
        sa.Column("cpu_seconds_total", sa.Float, nullable=True),
        sa.Column("read_at", sa.Float, nullable=True),
    )
    op.create_index("ix_im_samples_series", "im_samples", ["vcdn_id", "scope", "key", "at"])
    op.create_table(
        "im_hosts",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("region", sa.String(63), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade():
    op.drop_table("im_hosts")
    op.drop_index("ix_im_samples_series", table_name="im_samples")
    op.drop_table("im_samples")
    with op.batch_alter_table("im_actions") as table:
        table.drop_column("host")
        table.drop_column("region")
        table.alter_column("instance_id", existing_type=sa.String(36), nullable=False)
