"""Tables of the Service Orchestrator: capacity (regions, hosts, reservations),
vCDN instances and their operations."""
import datetime as dt

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from cdnaas.common.timeutil import utcnow


class Base(DeclarativeBase):
    """Metadata of the Service Orchestrator's own tables."""


class Region(Base):
    __tablename__ = "so_regions"

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    description: Mapped[str] = mapped_column(String(300), default="")
    client_prefixes: Mapped[list] = mapped_column(JSON, default=list)
    vim_region: Mapped[str | None] = mapped_column(String(64), nullable=True)
    zone: Mapped[str | None] = mapped_column(String(64), nullable=True)
    is_default: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Host(Base):
    __tablename__ = "so_hosts"

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    region_name: Mapped[str] = mapped_column(ForeignKey("so_regions.name"), index=True)
    vcpus: Mapped[int] = mapped_column(Integer)
    ram_mb: Mapped[int] = mapped_column(Integer)
    idle_watts: Mapped[float] = mapped_column(Float, default=115.0)
    peak_watts: Mapped[float] = mapped_column(Float, default=269.0)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)


class Instance(Base):
    """A tenant's vCDN as the SO plans and tracks it."""

    __tablename__ = "so_instances"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(63), index=True)
    name: Mapped[str] = mapped_column(String(63))
    flavor: Mapped[str] = mapped_column(String(63))
    template_version: Mapped[int] = mapped_column(Integer)
    origin: Mapped[str] = mapped_column(String(300))
    regions: Mapped[list] = mapped_column(JSON)  # [{name, demand, quality}] as requested
    lease_start: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    lease_end: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), index=True)
    state: Mapped[str] = mapped_column(String(16), index=True)
    state_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    sig: Mapped[dict] = mapped_column(JSON)
    entry_point: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    region_endpoints: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    #: the customer's service options as accepted (cache rules, hostnames, TLS without keys)
    service: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    #: bumped by every accepted change; the API's ETag
    revision: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow,
                                                    onupdate=utcnow)


class Reservation(Base):
    """vCPUs and RAM of one host held by one instance over its lease window."""

    __tablename__ = "so_reservations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    instance_id: Mapped[str] = mapped_column(ForeignKey("so_instances.id"), index=True)
    host_name: Mapped[str] = mapped_column(ForeignKey("so_hosts.name"), index=True)
    vcpus: Mapped[int] = mapped_column(Integer)
    ram_mb: Mapped[int] = mapped_column(Integer)
    starts_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    ends_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class Operation(Base):
    """A long action on an instance, with its steps and outcome, claimed by the SO replica
    that runs it."""

    __tablename__ = "so_operations"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    instance_id: Mapped[str] = mapped_column(ForeignKey("so_instances.id"), index=True)
    type: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16), index=True)
    steps: Mapped[list] = mapped_column(JSON, default=list)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    reason: Mapped[str | None] = mapped_column(String(200), nullable=True)
    previous_sig: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    #: an UPDATE's previous lease end (the one thing of the vCDN its previous SIG lacks)
    previous_lease_end: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True),
                                                                   nullable=True)
    #: what an INVALIDATE or PREFETCH was asked: ``{"paths", "prefixes"}`` as checked
    request: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    # the SO replica running it and until when (cdnaas.db.leases.Claims); null when none
    claimed_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    claim_expires: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True),
                                                              nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow,
                                                    onupdate=utcnow)


class Quota(Base):
    """One limit of one tenant (``*``: the operator's default), :mod:`cdnaas.so.quotas`."""

    __tablename__ = "so_quotas"

    tenant: Mapped[str] = mapped_column(String(63), primary_key=True)
    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    limit: Mapped[int] = mapped_column(Integer)
