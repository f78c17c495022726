"""Tables of the Instance Manager: what each reconcile pass saw, decided and marked."""
import datetime as dt

from sqlalchemy import (JSON, BigInteger, Boolean, DateTime, Float, Index, Integer, String, Text,
                        UniqueConstraint)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from cdnaas.common.timeutil import utcnow


class Base(DeclarativeBase):
    """Metadata of the Instance Manager's own tables."""


class Action(Base):
    """One decision of the Instance Manager, with the figures that led to it.

    ``instance_id`` is the vCDN acted on (None for a host mark); ``region`` and
    ``host`` name what the decision is about, where it is about one.
    """

    __tablename__ = "im_actions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    instance_id: Mapped[str | None] = mapped_column(String(36), index=True, nullable=True)
    kind: Mapped[str] = mapped_column(String(32))
    outcome: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)
    details: Mapped[dict] = mapped_column(JSON, default=dict)
    region: Mapped[str | None] = mapped_column(String(63), nullable=True)
    host: Mapped[str | None] = mapped_column(String(63), nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow,
                                                    index=True)


class Sample(Base):
    """One point of a time series: a cache, other VNF (``vnf``: balancer, DNS), region
    or vCDN (``vcdn_id`` set), or a host.

    Figures a scope has no value for are null; a host's ``cpu`` counts its VNFs'
    technology overhead (``cpu / vcpus`` is its utilisation). ``energy_wh`` is cumulative since
    the series began; ``requests_total``, ``cpu_seconds_total`` and ``read_at``
    are a cache's raw counters (the next pass takes rates against them).
    """

    __tablename__ = "im_samples"
    __table_args__ = (Index("ix_im_samples_series", "vcdn_id", "scope", "key", "at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), index=True)
    scope: Mapped[str] = mapped_column(String(8))  # cache | vnf | region | vcdn | host
    vcdn_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    key: Mapped[str] = mapped_column(String(63))   # cache, region or host name; "" for a vCDN
    viewers: Mapped[float | None] = mapped_column(Float, nullable=True)
    requests_per_second: Mapped[float | None] = mapped_column(Float, nullable=True)
    mos: Mapped[float | None] = mapped_column(Float, nullable=True)
    cpu: Mapped[float | None] = mapped_column(Float, nullable=True)  # cores kept busy
    vcpus: Mapped[int | None] = mapped_column(Integer, nullable=True)
    watts: Mapped[float | None] = mapped_column(Float, nullable=True)
    energy_wh: Mapped[float | None] = mapped_column(Float, nullable=True)
    source: Mapped[str | None] = mapped_column(String(8), nullable=True)  # rapl | model
    healthy: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    requests_total: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    cpu_seconds_total: Mapped[float | None] = mapped_column(Float, nullable=True)
    read_at: Mapped[float | None] = mapped_column(Float, nullable=True)

    #: a sample is one pass (a :class:`History` point holds many)
    passes = 1


class History(Base):
    """The mean of a series over one step of ``HISTORY_STEP`` seconds (see
    :mod:`cdnaas.im.series`), made of its points as they leave the retention period.

    Levels (viewers, requests/s, MOS, CPU, watts) are means over the step's
    ``passes``; ``vcpus`` and ``energy_wh`` are the most of the step.
    """

    __tablename__ = "im_history"
    __table_args__ = (Index("ix_im_history_series", "vcdn_id", "scope", "key", "at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), index=True)  # step start
    scope: Mapped[str] = mapped_column(String(8))
    vcdn_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    key: Mapped[str] = mapped_column(String(63))
    passes: Mapped[int] = mapped_column(Integer)
    viewers: Mapped[float | None] = mapped_column(Float, nullable=True)
    requests_per_second: Mapped[float | None] = mapped_column(Float, nullable=True)
    mos: Mapped[float | None] = mapped_column(Float, nullable=True)
    cpu: Mapped[float | None] = mapped_column(Float, nullable=True)
    vcpus: Mapped[int | None] = mapped_column(Integer, nullable=True)
    watts: Mapped[float | None] = mapped_column(Float, nullable=True)
    energy_wh: Mapped[float | None] = mapped_column(Float, nullable=True)


class HostMark(Base):
    """Whether a host may be powered down (``power_down``) or must stay on (``on``)."""

    __tablename__ = "im_hosts"

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    region: Mapped[str] = mapped_column(String(63))
    state: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)
    changed_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class Usage(Base):
    """What one vCDN used in one region during one minute (the bills' rows).

    Traffic figures add up the requests its balancer logged that ended in the minute
    (read through RO, :mod:`cdnaas.im.usage`); ``bytes_out`` counts what viewers
    received, headers included. ``viewer_seconds``, ``vcpu_seconds`` and ``energy_wh``
    integrate, over the minute's share of the time between two passes, the region's
    viewers (its balancer's open connections), its VNFs' vCPUs and their watts.
    """

    __tablename__ = "im_usage"
    __table_args__ = (UniqueConstraint("vcdn_id", "region", "minute",
                                       name="uq_im_usage_minute"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    vcdn_id: Mapped[str] = mapped_column(String(36))
    region: Mapped[str] = mapped_column(String(63))
    minute: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), index=True)
    requests: Mapped[int] = mapped_column(BigInteger, default=0)
    bytes_out: Mapped[int] = mapped_column(BigInteger, default=0)
    hits: Mapped[int] = mapped_column(BigInteger, default=0)
    misses: Mapped[int] = mapped_column(BigInteger, default=0)
    status_2xx: Mapped[int] = mapped_column(BigInteger, default=0)
    status_3xx: Mapped[int] = mapped_column(BigInteger, default=0)
    status_4xx: Mapped[int] = mapped_column(BigInteger, default=0)
    status_5xx: Mapped[int] = mapped_column(BigInteger, default=0)
    viewer_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    vcpu_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    energy_wh: Mapped[float] = mapped_column(Float, default=0.0)


class UsageCursor(Base):
    """Where the Instance Manager stands in a vCDN's balancer logs (RO's opaque cursor),
    written in the transaction that stores the figures read up to it."""

    __tablename__ = "im_usage_cursors"

    vcdn_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    cursor: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class Share(Base):
    """One of the :data:`cdnaas.im.shares.SHARES` parts of the vCDNs (a vCDN's part is a
    hash of its id), observed by the IM replica that claims it (``claimed_by``) until
    ``claim_expires`` (:class:`cdnaas.db.leases.Claims`)."""

    __tablename__ = "im_shares"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    claimed_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    claim_expires: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True),
                                                              nullable=True)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Replica(Base):
    """An IM replica that lives until ``expires_at`` (each pass pushes it on), and what its
    latest pass (``at``) saw of hosts and regions: the leader's host decisions add up
    every replica's ``summary`` (:mod:`cdnaas.im.shares`)."""

    __tablename__ = "im_replicas"

    owner: Mapped[str] = mapped_column(String(128), primary_key=True)
    expires_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    summary: Mapped[dict] = mapped_column(JSON, default=dict)
