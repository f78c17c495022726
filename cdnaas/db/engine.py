"""Engines and sessions: one :class:`Database` per service process."""
import contextlib
import math
import time

import orjson
from psycopg.types import json as psycopg_json
from sqlalchemy import create_engine, event
from sqlalchemy import exc as exc_module
from sqlalchemy.orm import sessionmaker

from cdnaas.common import config

# JSON columns read from PostgreSQL decoded by orjson (every deployment record, SIG and
# instance a pass reads: the standard decoder was RO's first cost in an IM pass)
psycopg_json.set_json_loads(orjson.loads)


class Database:
    """A service's connection to its own tables.

    :param url: SQLAlchemy URL; SQLite gets WAL, a busy timeout and foreign keys.
    """

    def __init__(self, url):
        self.url = url
        is_sqlite = url.startswith("sqlite")
        kwargs = {"connect_args": {"timeout": 30, "check_same_thread": False}} if is_sqlite \
            else {"pool_size": 10, "max_overflow": 10}
        self.engine = create_engine(url, **kwargs)
        if is_sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas)
            event.listen(self.engine, "begin", _sqlite_begin_immediate)
        else:
            dialect = self.engine.dialect
            event.listen(self.engine, "checkout",
                         lambda dbapi_connection, record, _proxy: _ping_if_idle(
                             dialect, dbapi_connection, record))
            event.listen(self.engine, "checkin", _note_checkin)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def dialect(self):
        return self.engine.dialect.name

    @contextlib.contextmanager
    def transaction(self):
        """A session whose work commits at the end of the block, or rolls back."""
        with self.sessions() as session, session.begin():
            yield session

    def dispose(self):
        self.engine.dispose()


def for_service(service):
    """The :class:`Database` of ``service`` as configured right now."""
    return Database(config.database_url(service))


#: a pooled connection idle longer than this is pinged before use (a server restarted or a
#: firewall that dropped it while idle is found then, and the pool connects again); one in
#: use within it is not: ``pool_pre_ping`` pinged every checkout, half of RO's wall time
#: reading a deployment record in an IM pass over 1,000 vCDNs
PING_IDLE_SECONDS = 5.0


def _note_checkin(_dbapi_connection, record):
    record.info["checked_in"] = time.monotonic()


def _ping_if_idle(dialect, dbapi_connection, record):
    """Pessimistic disconnect handling (SQLAlchemy's checkout event, the dialect's own
    ping) for idle connections only: a failed ping is a ``DisconnectionError``, on which
    the pool connects again."""
    if time.monotonic() - record.info.get("checked_in", -math.inf) < PING_IDLE_SECONDS:
        return
    try:
        dialect.do_ping(dbapi_connection)
    except Exception as exc:
        raise exc_module.DisconnectionError(f"pooled connection is gone: {exc}") from exc


def _sqlite_pragmas(dbapi_connection, _record):
    # Let pysqlite leave transaction control to SQLAlchemy's "begin" event.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _sqlite_begin_immediate(connection):
    # Writers take the lock at BEGIN, so two read-then-write transactions
    # serialise instead of failing half-way (the SQLite analogue of FOR UPDATE).
    connection.exec_driver_sql("BEGIN IMMEDIATE")
