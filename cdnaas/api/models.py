"""Tables of the customer API: tenants and their API tokens (hashes only)."""
import datetime as dt

from sqlalchemy import DateTime, ForeignKey, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from cdnaas.common.timeutil import utcnow


class Base(DeclarativeBase):
    """Metadata of the customer API's own tables."""


class Tenant(Base):
    __tablename__ = "api_tenants"

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    role: Mapped[str] = mapped_column(String(16), default="tenant")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    tokens: Mapped[list["Token"]] = relationship(back_populates="tenant", cascade="all, delete-orphan")


class Token(Base):
    __tablename__ = "api_tokens"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant_name: Mapped[str] = mapped_column(ForeignKey("api_tenants.name", ondelete="CASCADE"), index=True)
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    tenant: Mapped[Tenant] = relationship(back_populates="tokens")
