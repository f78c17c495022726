"""SIDR's tables: service templates, one row per flavor and version."""
import datetime

from sqlalchemy import JSON, DateTime, Integer, String, Text, TypeDecorator, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow():
    """The current time, timezone-aware in UTC."""
    return datetime.datetime.now(datetime.timezone.utc)


class UtcDateTime(TypeDecorator):
    """A timestamp stored in UTC and always read back timezone-aware.

    SQLite keeps no time zone, so naive values read from it are marked UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return value.astimezone(datetime.timezone.utc) if value is not None else None

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=datetime.timezone.utc)
        return value.astimezone(datetime.timezone.utc)


class Base(DeclarativeBase):
    """SIDR's own declarative base, so its metadata holds only SIDR's tables."""


class Template(Base):
    """A validated service template; ``document`` is the whole template as registered."""

    __tablename__ = "sidr_templates"
    __table_args__ = (UniqueConstraint("flavor", "version", name="uq_sidr_templates_flavor_version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    flavor: Mapped[str] = mapped_column(String(63), nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    description: Mapped[str] = mapped_column(Text, nullable=False)
    plugin: Mapped[str] = mapped_column(String(63), nullable=False)
    document: Mapped[dict] = mapped_column(JSON, nullable=False)
    created_at: Mapped[datetime.datetime] = mapped_column(UtcDateTime, nullable=False, default=utcnow)
    #: when the operator deprecated this version (None: offered): a deprecated version
    #: serves the vCDNs made of it and no new one
    deprecated_at: Mapped[datetime.datetime | None] = mapped_column(UtcDateTime, nullable=True)

    def to_dict(self):
        """The template's API representation (see ``Template`` in ``api-spec/sidr.yaml``)."""
        return {"flavor": self.flavor, "version": self.version, "description": self.description,
                "plugin": self.plugin, "technology": self.document["technology"],
                "created_at": self.created_at.isoformat(),
                "deprecated": self.deprecated_at is not None,
                "deprecated_at": self.deprecated_at.isoformat() if self.deprecated_at else None,
                "document": self.document}
