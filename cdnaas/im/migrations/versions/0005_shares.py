"""The vCDNs in shares claimed by IM replicas, and the replicas with their latest summary.

Revision ID: im_0005
"""
import datetime as dt

import sqlalchemy as sa
from alembic import op

revision = "im_0005"
down_revision = "im_0004"
branch_labels = None
depends_on = None

#: as :data:`cdnaas.im.shares.SHARES` when written (a migration does not follow the code)
SHARES = 64


def upgrade():
    op.create_table(
        "im_shares",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("claimed_by", sa.String(128)),
        sa.Column("claim_expires", sa.DateTime(timezone=True)),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    shares = sa.table("im_shares", sa.column("id", sa.Integer),
                      sa.column("updated_at", sa.DateTime(timezone=True)))
    op.bulk_insert(shares, [{"id": number, "updated_at": dt.datetime.now(dt.timezone.utc)}
                            for number in range(SHARES)])
    op.create_table(
        "im_replicas",
        sa.Column("owner", sa.String(128), primary_key=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True)),
        sa.Column("summary", sa.JSON, nullable=False),
    )


def downgrade():
    op.drop_table("im_replicas")
    op.drop_table("im_shares")
