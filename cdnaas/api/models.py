"""Tables of the customer API: tenants, their named users and the users' API tokens
(hashes only)."""
import datetime as dt

from sqlalchemy import DateTime, ForeignKey, ForeignKeyConstraint, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from cdnaas.common.timeutil import utcnow

#: the roles of a tenant: an operator's tokens run with system scope
OPERATOR, TENANT = "operator", "tenant"
#: the user every tenant starts with, who owns tokens issued without naming a user
DEFAULT_USER = "default"


class Base(DeclarativeBase):
    """Metadata of the customer API's own tables."""


class Tenant(Base):
    __tablename__ = "api_tenants"

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    role: Mapped[str] = mapped_column(String(16), default=TENANT)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    users: Mapped[list["User"]] = relationship(back_populates="tenant", cascade="all, delete-orphan")
    tokens: Mapped[list["Token"]] = relationship(back_populates="tenant", viewonly=True)


class User(Base):
    """A named user of a tenant; deleting it revokes (deletes) its tokens."""

    __tablename__ = "api_users"

    tenant_name: Mapped[str] = mapped_column(ForeignKey("api_tenants.name", ondelete="CASCADE"),
                                             primary_key=True)
    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    tenant: Mapped[Tenant] = relationship(back_populates="users")
    tokens: Mapped[list["Token"]] = relationship(back_populates="user", cascade="all, delete-orphan")


class Token(Base):
    """A user's API token: ``scope`` (``read-only``, ``purge-only``, ``full``) and, unless
    it never expires, ``expires_at``."""

    __tablename__ = "api_tokens"
    __table_args__ = (ForeignKeyConstraint(["tenant_name", "user_name"],
                                           ["api_users.tenant_name", "api_users.name"],
                                           name="fk_api_tokens_user", ondelete="CASCADE"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant_name: Mapped[str] = mapped_column(ForeignKey("api_tenants.name", ondelete="CASCADE"), index=True)
    user_name: Mapped[str] = mapped_column(String(63))
    scope: Mapped[str] = mapped_column(String(16))
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    tenant: Mapped[Tenant] = relationship(back_populates="tokens", viewonly=True)
    user: Mapped[User] = relationship(back_populates="tokens")
