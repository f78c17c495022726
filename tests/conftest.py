"""Shared fixtures: a database URL on each backend (SQLite and real PostgreSQL), and a
sample origin on this machine."""
import pytest

from cdnaas.origin.server import serve_in_thread
from tests.openstack.fixtures import *  # noqa: F401,F403 (the mini cloud's fixtures)
from tests.support import postgres


@pytest.fixture(scope="session")
def postgres_admin_url():
    """Admin URL of a real PostgreSQL server (the machine's, or a throwaway one)."""
    with postgres.server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    """An empty database on each backend; tests using it run once per backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'cdnaas.db'}"
    else:
        admin = request.getfixturevalue("postgres_admin_url")
        with postgres.fresh_database(admin) as url:
            yield url


@pytest.fixture(scope="module")
def origin():
    """The sample origin listening on all addresses (the local driver's caches reach this
    machine at their bridge's gateway); ``origin.stats()`` counts fetches per path."""
    server, _thread = serve_in_thread("0.0.0.0", 0)
    yield server
    server.shutdown()
    server.server_close()
