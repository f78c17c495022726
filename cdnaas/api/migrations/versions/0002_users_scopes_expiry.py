"""Named users per tenant; each token belongs to a user and has a scope and an expiry.

Every tenant gets the user ``default``, which takes the tokens issued before users
existed, with the scope ``full`` and no expiry: they keep working as they did.

Revision ID: api_0002
Revises: api_0001
"""
import sqlalchemy as sa
from alembic import op

revision = "api_0002"
down_revision = "api_0001"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "api_users",
        sa.Column("tenant_name", sa.String(63),
                  sa.ForeignKey("api_tenants.name", ondelete="CASCADE"), primary_key=True),
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.execute("INSERT INTO api_users (tenant_name, name, created_at) "
               "SELECT name, 'default', created_at FROM api_tenants")
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("user_name", sa.String(63), nullable=False,
                                   server_default="default"))
        batch.add_column(sa.Column("scope", sa.String(16), nullable=False, server_default="full"))
        batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True)))
        batch.create_foreign_key("fk_api_tokens_user", "api_users", ["tenant_name", "user_name"],
                                 ["tenant_name", "name"], ondelete="CASCADE")
    with op.batch_alter_table("api_tokens") as batch:  # the defaults only filled the old rows
        batch.alter_column("user_name", server_default=None)
        batch.alter_column("scope", server_default=None)


def downgrade():
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_constraint("fk_api_tokens_user", type_="foreignkey")
        batch.drop_column("expires_at")
        batch.drop_column("scope")
        batch.drop_column("user_name")
    op.drop_table("api_users")
