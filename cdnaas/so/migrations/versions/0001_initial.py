"""Regions, hosts, instances, reservations and operations.

Revision ID: so_0001
"""
import sqlalchemy as sa
from alembic import op

revision = "so_0001"
down_revision = None
branch_labels = None
depends_on = None


def _timestamp(name, **kwargs):
    return sa.Column(name, sa.DateTime(timezone=True), **kwargs)


def upgrade():
    op.create_table(
        "so_regions",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("description", sa.String(300), nullable=False),
        sa.Column("client_prefixes", sa.JSON, nullable=False),
        sa.Column("vim_region", sa.String(64)),
        sa.Column("zone", sa.String(64)),
        sa.Column("is_default", sa.Boolean, nullable=False),
        _timestamp("created_at", nullable=False),
    )
    op.create_table(
        "so_hosts",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("region_name", sa.String(63), sa.ForeignKey("so_regions.name"),
                  nullable=False, index=True),
        sa.Column("vcpus", sa.Integer, nullable=False),
        sa.Column("ram_mb", sa.Integer, nullable=False),
        sa.Column("idle_watts", sa.Float, nullable=False),
        sa.Column("peak_watts", sa.Float, nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
    )
    op.create_table(
        "so_instances",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("tenant", sa.String(63), nullable=False, index=True),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("flavor", sa.String(63), nullable=False),
        sa.Column("template_version", sa.Integer, nullable=False),
        sa.Column("origin", sa.String(300), nullable=False),
        sa.Column("regions", sa.JSON, nullable=False),
        _timestamp("lease_start", nullable=False),
        _timestamp("lease_end", nullable=False, index=True),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("state_reason", sa.Text),
        sa.Column("sig", sa.JSON, nullable=False),
        sa.Column("entry_point", sa.JSON),
        sa.Column("region_endpoints", sa.JSON),
        _timestamp("created_at", nullable=False),
        _timestamp("updated_at", nullable=False),
    )
    op.create_table(
        "so_reservations",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("instance_id", sa.String(36), sa.ForeignKey("so_instances.id"),
                  nullable=False, index=True),
        sa.Column("host_name", sa.String(63), sa.ForeignKey("so_hosts.name"),
                  nullable=False, index=True),
        sa.Column("vcpus", sa.Integer, nullable=False),
        sa.Column("ram_mb", sa.Integer, nullable=False),
        _timestamp("starts_at", nullable=False),
        _timestamp("ends_at", nullable=False),
    )
    op.create_table(
        "so_operations",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("instance_id", sa.String(36), sa.ForeignKey("so_instances.id"),
                  nullable=False, index=True),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("steps", sa.JSON, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("reason", sa.String(200)),
        sa.Column("previous_sig", sa.JSON),
        _timestamp("created_at", nullable=False),
        _timestamp("updated_at", nullable=False),
    )


def downgrade():
    for table in ("so_operations", "so_reservations", "so_instances", "so_hosts", "so_regions"):
        op.drop_table(table)
