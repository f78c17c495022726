"""The services' PostgreSQL pool across a connection the server dropped.

A pooled connection idle for :data:`cdnaas.db.engine.PING_IDLE_SECONDS` is pinged
before use, so one the server dropped meanwhile (a restart, a failover, a firewall's
idle timeout) is replaced unseen; one used within that window is not pinged (the
round trips of an IM pass), so a drop then fails that one statement, after which the
pool connects again.
"""
import psycopg
import pytest
from sqlalchemy import exc, text

from cdnaas.db import engine
from cdnaas.db.engine import Database
from tests.support import postgres


@pytest.fixture
def database(postgres_admin_url):
    with postgres.fresh_database(postgres_admin_url) as url:
        found = Database(url)
        yield found
        found.dispose()


def backend(database):
    with database.sessions() as session:
        return session.scalar(text("SELECT pg_backend_pid()"))


def kill(admin_url, pid):
    """What a server restart does to one connection."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        assert conn.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]


def test_an_idle_connection_the_server_dropped_is_replaced_unseen(
        database, postgres_admin_url, monkeypatch):
    monkeypatch.setattr(engine, "PING_IDLE_SECONDS", 0.0)
    dropped = backend(database)
    kill(postgres_admin_url, dropped)
    replacement = backend(database)  # no error: the ping found it gone
    assert replacement != dropped


def test_a_connection_dropped_while_in_use_fails_one_statement_then_the_pool_reconnects(
        database, postgres_admin_url, monkeypatch):
    monkeypatch.setattr(engine, "PING_IDLE_SECONDS", 3600.0)
    dropped = backend(database)
    kill(postgres_admin_url, dropped)
    with pytest.raises(exc.OperationalError):
        backend(database)
    assert backend(database) != dropped
