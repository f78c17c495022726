"""Instance Manager application factory."""
from cdnaas.common.app import make_app
from cdnaas.db import engine
from cdnaas.im.reconcile import ReconcileLoop
from cdnaas.im.views import blueprint


def create_app(database=None, background=True):
    """The IM app; with ``background`` its reconcile loop runs in a thread."""
    database = database or engine.for_service("im")
    app = make_app("im", [blueprint])
    loop = ReconcileLoop(database)
    app.extensions["db"] = database
    app.extensions["loop"] = loop
    if background:
        loop.start()
    return app
