"""Webhooks: tenants' endpoints, the outbox of deliveries and each attempt's record.

Revision ID: so_0007
"""
import sqlalchemy as sa
from alembic import op

revision = "so_0007"
down_revision = "so_0006"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "so_webhooks",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("tenant", sa.String(63), nullable=False, index=True),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("events", sa.JSON, nullable=False),
        sa.Column("description", sa.String(200), nullable=False),
        sa.Column("secret", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "so_webhook_deliveries",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("webhook_id", sa.String(36),
                  sa.ForeignKey("so_webhooks.id", ondelete="CASCADE"), nullable=False,
                  index=True),
        sa.Column("event_id", sa.String(36), nullable=False, index=True),
        sa.Column("type", sa.String(40), nullable=False),
        sa.Column("body", sa.JSON, nullable=False),
        sa.Column("dedupe_key", sa.String(200)),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), index=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("webhook_id", "dedupe_key", name="uq_so_webhook_dedupe"),
    )
    op.create_table(
        "so_webhook_attempts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("delivery_id", sa.String(36),
                  sa.ForeignKey("so_webhook_deliveries.id", ondelete="CASCADE"),
                  nullable=False, index=True),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status_code", sa.Integer),
        sa.Column("error", sa.String(500)),
        sa.Column("duration_ms", sa.Float, nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True)),
    )


def downgrade():
    op.drop_table("so_webhook_attempts")
    op.drop_table("so_webhook_deliveries")
    op.drop_table("so_webhooks")
