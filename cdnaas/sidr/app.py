"""Factory of the SIDR app (Service Instance Descriptor Repository)."""
from cdnaas.common.app import make_app
from cdnaas.db import engine
from cdnaas.sidr.views import blueprint


def create_app(database=None):
    """The SIDR Flask app, storing templates in ``database``.

    :param database: a :class:`cdnaas.db.engine.Database`; SIDR's configured one
        (``CDNAAS_DATABASE_URL`` or its embedded SQLite file) when omitted.
        Its tables must already be migrated (``cdnaas.db.migrate.upgrade("sidr")``).
    """
    database = database or engine.for_service("sidr")
    app = make_app("sidr", [blueprint])
    app.extensions["db"] = database
    return app
