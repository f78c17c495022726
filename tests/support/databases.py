"""A service's database for tests: migrated to head, disposed after."""
import contextlib

from cdnaas.db import migrate
from cdnaas.db.engine import Database


@contextlib.contextmanager
def migrated(service, database_url):
    """Yield the :class:`Database` of ``service`` at ``database_url``, migrated first;
    disposed on leaving."""
    migrate.upgrade(service, database_url)
    database = Database(database_url)
    try:
        yield database
    finally:
        database.dispose()
