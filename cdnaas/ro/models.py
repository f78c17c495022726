"""Tables of the Resource Orchestrator: one row per deployment of a SIG."""
import datetime

from sqlalchemy import JSON, DateTime, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# a deployment's statuses (:mod:`cdnaas.common.states`), as RO's code names them here
from cdnaas.common.states import (ACTIVE, BUSY, DELETED, DELETING,  # noqa: F401,E402
                                  DEPLOYING, ERROR, UPDATING)


def utcnow():
    """The current time, timezone-aware, in UTC."""
    return datetime.datetime.now(datetime.timezone.utc)


class Base(DeclarativeBase):
    """Declarative base of the RO's own tables."""


class DeploymentRecord(Base):
    """A SIG deployed (or being deployed, changed, removed) through the VIM driver.

    ``id`` is the vCDN id. ``sig`` is the SIG that serves (an update only
    replaces it once it succeeded); ``deployment`` is the driver's
    :class:`~cdnaas.ro.vim.base.Deployment` as a dict, null while nothing runs.
    ``steps`` is the progress of the latest action, ``error`` the failure of the
    latest action (null when it succeeded or is still running). While it is BUSY,
    ``claimed_by`` names the RO replica doing the work, whose lease runs to
    ``claim_expires``.
    """

    __tablename__ = "ro_deployments"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    driver: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), index=True)
    sig: Mapped[dict] = mapped_column(JSON)
    deployment: Mapped[dict | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    steps: Mapped[list] = mapped_column(JSON, default=list)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # the RO replica working on it while BUSY and until when (cdnaas.db.leases.Claims)
    claimed_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    claim_expires: Mapped[datetime.datetime | None] = mapped_column(DateTime(timezone=True),
                                                                    nullable=True)

    def mark(self, status, **changes):
        """Set ``status`` (and any other columns given), stamping ``updated_at``."""
        self.status = status
        for name, value in changes.items():
            setattr(self, name, value)
        self.updated_at = utcnow()


class SecretRecord(Base):
    """A tenant's certificate and key, kept for the vCDN ``owner`` (:mod:`cdnaas.ro.secrets`).

    ``id`` is the reference SO keeps (in its instance and the SIG). ``backend`` says
    where the material is: ``fernet``: ``ciphertext`` here, encrypted with RO's secret
    key file; ``barbican``: ``external_ref``, Barbican's certificate container (what an
    Octavia listener takes). ``fingerprint_sha256`` is the server certificate's, public.
    """

    __tablename__ = "ro_secrets"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(64), index=True)
    backend: Mapped[str] = mapped_column(String(32))
    fingerprint_sha256: Mapped[str] = mapped_column(String(64))
    ciphertext: Mapped[str | None] = mapped_column(Text, nullable=True)
    external_ref: Mapped[str | None] = mapped_column(String(512), nullable=True)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


#: statuses of a :class:`ReconciliationRecord`
PENDING = "PENDING"
RUNNING = "RUNNING"
DONE = "DONE"
FAILED = "FAILED"


class ReconciliationRecord(Base):
    """A reconciliation of what runs with the deployment records, owed after a restore of
    the databases (:mod:`cdnaas.ro.reconciliation`).

    ``cause`` says what made it owed (the restore of which backup). It is ``PENDING``
    until an RO starts, ``RUNNING`` while that RO (``claimed_by``, until
    ``claim_expires``) brings every ACTIVE deployment back to its record, then ``DONE``,
    or ``FAILED`` with ``error`` naming the deployments that could not be. ``actions``
    lists what it did to each VNF: ``{deployment, vnf, role, action, detail}`` with
    ``action`` ``adopt``, ``rebuild`` or ``remove``.
    """

    __tablename__ = "ro_reconciliations"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    cause: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), index=True)
    actions: Mapped[list] = mapped_column(JSON, default=list)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime.datetime | None] = mapped_column(DateTime(timezone=True),
                                                                  nullable=True)
    claimed_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    claim_expires: Mapped[datetime.datetime | None] = mapped_column(DateTime(timezone=True),
                                                                    nullable=True)
