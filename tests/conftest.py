"""Shared fixtures: a database URL on each backend (SQLite and real PostgreSQL)."""
import pytest

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
