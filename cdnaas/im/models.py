"""Tables of the Instance Manager: what each reconcile pass saw and did."""
import datetime as dt

from sqlalchemy import JSON, DateTime, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from cdnaas.common.timeutil import utcnow


class Base(DeclarativeBase):
    """Metadata of the Instance Manager's own tables."""


class Action(Base):
    """One decision of the Instance Manager, with the figures that led to it."""

    __tablename__ = "im_actions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    instance_id: Mapped[str] = mapped_column(String(36), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    outcome: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)
    details: Mapped[dict] = mapped_column(JSON, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow,
                                                    index=True)
