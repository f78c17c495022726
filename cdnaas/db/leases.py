"""Replicas on one database: row claims with leases, and one leader per service.

Every service may run as N copies on one PostgreSQL. Two tools keep them from doing
the same work twice:

- :class:`Claims`: a row (an SO operation, an RO deployment) is worked on by the
  replica whose name is in its ``claimed_by`` column until ``claim_expires``. A replica
  takes a row only while holding its row lock (``SELECT ... FOR UPDATE``, ``SKIP
  LOCKED`` when scanning) and only if the row is free, its lease has expired, or it is
  already its own; a thread renews the leases of the rows it holds every third of
  ``CDNAAS_LEASE_SECONDS``. A replica that dies stops renewing, and once its leases
  expire its peers take its rows over. Every write of a worker checks the claim is
  still its own (:meth:`Claims.mine`), so a replica that stalled past its lease and
  lost a row never writes over the one that took it.
- :class:`Leadership`: the replica holding a PostgreSQL advisory lock on a connection
  of its own is the leader (the IM's reconcile pass runs only there); the lock goes
  with the connection when the leader dies, and the next replica to try takes it.
  ``exclusive()`` is a second advisory lock held around one piece of work, so work
  asked of a follower (``POST /im/v1/reconcile``) never overlaps the leader's.

On SQLite (the embedded default: one process per service) the same code paths run:
``SKIP LOCKED`` is ignored and ``BEGIN IMMEDIATE`` serialises writers, the lease
columns still guard, a process starting takes every claim (no other process can hold
one), and the one process is always the leader.

A replica is named ``CDNAAS_REPLICA_NAME`` (default: host name and the port the
service listens on, unique per machine); its claims are ``<name>#<random>``, so a
replica restarted under the same name takes its predecessor's claims at once instead
of waiting for their leases to expire. Leases use the real clock (never
``CDNAAS_CLOCK_FILE``): replicas on several machines need clocks kept in step (NTP),
well within a lease.
"""
import contextlib
import datetime as dt
import hashlib
import logging
import secrets
import socket
import threading
import time

from sqlalchemy import and_, false, or_, select, text, true, update

from cdnaas.common import config
from cdnaas.common.timeutil import aware, utcnow

LOG = logging.getLogger(__name__)

NAME_LENGTH = 100  # of a replica name: with "#" and 8 hex digits it fits claimed_by (128)


def replica_name(service):
    """This replica's name: ``CDNAAS_REPLICA_NAME``, or ``<host name>:<port>`` of ``service``."""
    name = config.setting("CDNAAS_REPLICA_NAME")
    if not name:
        name = f"{socket.gethostname()}:{config.bind_address(service)[1]}"
    return name[:NAME_LENGTH]


def name_of(owner):
    """The replica name in a ``claimed_by`` value."""
    return (owner or "").rpartition("#")[0]


def lease_seconds():
    return config.setting("CDNAAS_LEASE_SECONDS")


class LostClaim(Exception):
    """Another replica took over a row this replica was working on (its lease expired)."""


class Claims:
    """The rows of ``model`` this replica works on, their leases renewed by a thread.

    :param database: the service's :class:`~cdnaas.db.engine.Database`.
    :param model: a mapped class with ``id``, ``claimed_by`` and ``claim_expires``.
    :param service: the service's name (for :func:`replica_name`).
    :param owner: this replica's claim value (default ``<replica name>#<random>``).
    """

    def __init__(self, database, model, service, owner=None):
        self.database = database
        self.model = model
        self.name = replica_name(service)
        self.owner = owner or f"{self.name}#{secrets.token_hex(4)}"
        self._held = set()
        self._lost = set()
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    # -- taking and giving back ------------------------------------------------------------

    @property
    def sqlite(self):
        return self.database.dialect == "sqlite"

    def free(self, record, startup=False, now=None):
        """Whether this replica may claim ``record`` (whose row the caller has locked).

        :param startup: at a replica's start, its predecessor's claims (same name) count
            as free, and on SQLite every claim does (no other process can hold one).
        """
        owner = record.claimed_by
        if owner is None or owner == self.owner:
            return True
        if startup and (self.sqlite or name_of(owner) == self.name):
            return True
        expires = aware(record.claim_expires)
        return expires is None or expires < (now or utcnow())

    def claimable(self, startup=False, now=None):
        """A SQL condition: the rows of others :meth:`free` would let this replica take,
        and its own whose work ended here without writing its end (the database away at
        that moment): their claim ran out, as none held is renewed. Rows this process
        holds are never taken: their work runs.

        Unclaimed rows count at start-up, and later only once unchanged for a lease (a
        peer that just wrote one claims it in the same transaction; older unclaimed busy
        rows were left by a process that died or predates claims).
        """
        now = now or utcnow()
        column, expired = self.model.claimed_by, self.model.claim_expires < now
        unclaimed = column.is_(None) if startup else and_(
            column.is_(None),
            self.model.updated_at < now - dt.timedelta(seconds=lease_seconds()))
        predecessor = (true() if self.sqlite else column.startswith(f"{self.name}#",
                                                                     autoescape=True)) \
            if startup else false()
        orphaned = and_(column == self.owner, expired, self.model.id.not_in(self.held()))
        return or_(unclaimed, and_(column != self.owner, or_(expired, predecessor)), orphaned)

    def take(self, record):
        """Claim ``record`` (its row locked by the caller) and hold it from now on."""
        record.claimed_by = self.owner
        record.claim_expires = utcnow() + dt.timedelta(seconds=lease_seconds())
        self.hold(record.id)

    def give_back(self, record):
        """Drop the claim on ``record`` (its row locked by the caller) if it is ours."""
        if record.claimed_by == self.owner:
            record.claimed_by = None
            record.claim_expires = None
        self.drop(record.id)

    def mine(self, record):
        """Whether ``record``'s claim is this replica's."""
        return record.claimed_by == self.owner

    def check(self, record):
        """:raises LostClaim: ``record`` is no longer claimed by this replica."""
        if not self.mine(record):
            self.drop(record.id)
            raise LostClaim(f"{self.model.__name__} {record.id} is now claimed by "
                            f"{record.claimed_by or 'nobody'}, not {self.owner}")

    # -- leases --------------------------------------------------------------------------

    def hold(self, row_id):
        with self._guard:
            self._held.add(row_id)
            self._lost.discard(row_id)
        self.start()

    def drop(self, row_id):
        with self._guard:
            self._held.discard(row_id)

    def lost(self, row_id):
        """Whether renewing ``row_id``'s lease found it claimed by another replica."""
        with self._guard:
            return row_id in self._lost

    def held(self):
        with self._guard:
            return set(self._held)

    def renew(self):
        """Push the lease of every held row a lease further; return the ids found lost:
        claimed by another replica. A held row still unclaimed, or not there, is not lost:
        its claim is being taken in a transaction not committed yet (:meth:`take` holds
        the row at once), and a lease that then runs short is renewed on the next turn."""
        held = self.held()
        if not held:
            return set()
        model = self.model
        with self.database.transaction() as session:
            session.execute(update(model).where(model.claimed_by == self.owner,
                                                model.id.in_(held))
                            .values(claim_expires=utcnow() + dt.timedelta(
                                seconds=lease_seconds())))
            lost = set(session.scalars(select(model.id).where(
                model.id.in_(held), model.claimed_by.is_not(None),
                model.claimed_by != self.owner)))
        with self._guard:
            lost &= self._held  # dropped meanwhile: ended, not lost
            self._held -= lost
            self._lost |= lost
        for row_id in lost:
            LOG.warning("%s %s: another replica took it over; leaving it", model.__name__, row_id)
        return lost

    def start(self):
        """Start the renewing thread (once)."""
        with self._guard:
            if self._thread is not None or self._stop.is_set():
                return
            self._thread = threading.Thread(target=self._renew_loop, daemon=True,
                                            name=f"lease-{self.model.__tablename__}")
        self._thread.start()

    def _renew_loop(self):
        while not self._stop.wait(lease_seconds() / 3):
            try:
                self.renew()
            except Exception:  # the database may be away a moment; the lease outlasts it
                LOG.exception("renewing the leases of %s failed", self.model.__tablename__)

    def stop(self):
        self._stop.set()


def advisory_key(name):
    """A 64-bit key for ``pg_advisory_lock`` from ``name``."""
    return int.from_bytes(hashlib.sha256(f"cdnaas:{name}".encode()).digest()[:8], "big",
                          signed=True)


class Leadership:
    """Which replica of a service leads: the one holding advisory lock ``name``.

    On PostgreSQL the lock is held on a connection of its own, kept open while this
    replica lives, with server-side TCP keepalives so that the server drops the
    connection of a leader whose machine vanished within about 15 s (a killed process
    closes its connection at once). On SQLite this process always leads.

    :param database: the service's :class:`~cdnaas.db.engine.Database`.
    :param name: the role led, e.g. ``"im-reconcile"``.
    """

    POLL = 0.1  # seconds between two tries of :meth:`exclusive`

    def __init__(self, database, name):
        self.database = database
        self.name = name
        self.key = advisory_key(name)
        self.work_key = advisory_key(f"{name}:work")
        self._connection = None
        self._leading = False
        self._guard = threading.RLock()

    @property
    def sqlite(self):
        return self.database.dialect != "postgresql"

    def lead(self):
        """Whether this replica leads now: keeps the lock if held, tries to take it if not.

        Never raises: a database error means not leading (the connection is dropped and
        the next call tries again).
        """
        if self.sqlite:
            return True
        with self._guard:
            try:
                connection = self._connect()
                if self._leading:
                    held = connection.execute(text(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                        "AND pid = pg_backend_pid() AND objsubid = 1 "
                        "AND objid::bigint = (:key & 4294967295) "
                        "AND classid::bigint = ((:key >> 32) & 4294967295)"), {"key": self.key}).scalar()
                    if not held:
                        LOG.warning("lost the %s lock", self.name)
                        self._leading = False
                if not self._leading:
                    self._leading = bool(connection.execute(
                        text("SELECT pg_try_advisory_lock(:key)"), {"key": self.key}).scalar())
                    if self._leading:
                        LOG.info("this replica now leads %s", self.name)
                return self._leading
            except Exception as exc:  # pylint: disable=broad-except
                LOG.warning("cannot tell whether this replica leads %s: %s", self.name, exc)
                self._drop()
                return False

    def _connect(self):
        if self._connection is None:
            connection = self.database.engine.connect().execution_options(
                isolation_level="AUTOCOMMIT")
            for setting, value in (("tcp_keepalives_idle", 5), ("tcp_keepalives_interval", 2),
                                   ("tcp_keepalives_count", 3)):
                connection.execute(text(f"SET {setting} = {int(value)}"))
            self._connection = connection
        return self._connection

    def _drop(self):
        self._leading = False
        if self._connection is not None:
            with contextlib.suppress(Exception):
                self._connection.invalidate()
                self._connection.close()
            self._connection = None

    @contextlib.contextmanager
    def exclusive(self, timeout):
        """Hold the work lock of ``name`` across every replica for the block.

        :raises TimeoutError: another replica held it for ``timeout`` seconds.
        """
        if self.sqlite:
            yield
            return
        engine = self.database.engine
        deadline = time.monotonic() + timeout
        with engine.connect() as connection:
            connection = connection.execution_options(isolation_level="AUTOCOMMIT")
            while not connection.execute(text("SELECT pg_try_advisory_lock(:key)"),
                                         {"key": self.work_key}).scalar():
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"another replica held {self.name} for {timeout} s")
                time.sleep(self.POLL)
            try:
                yield
            finally:
                connection.execute(text("SELECT pg_advisory_unlock(:key)"),
                                   {"key": self.work_key})

    def resign(self):
        """Give the lead up (closing its connection frees the lock)."""
        with self._guard:
            self._drop()
