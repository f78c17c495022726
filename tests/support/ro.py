"""RO apps for tests: over a migrated database, each stopped (workers, database) after."""
import contextlib

from cdnaas.db import migrate
from cdnaas.db.engine import Database
from cdnaas.ro.app import create_app


@contextlib.contextmanager
def ro_apps(database_url):
    """Yield ``make(driver)``, which makes an RO app over ``database_url`` (migrated first)
    whose VIM driver is ``driver``; every app made is stopped on leaving."""
    migrate.upgrade("ro", database_url)
    apps = []

    def make(driver):
        apps.append(create_app(Database(database_url), driver=driver))
        return apps[-1]
    try:
        yield make
    finally:
        for app in apps:
            app.extensions["ro"].shutdown()
            app.extensions["ro"].database.dispose()
