"""Service Orchestrator application factory."""
from cdnaas.common.app import make_app
from cdnaas.db import engine
from cdnaas.so import webhooks
from cdnaas.so.operations import OperationRunner
from cdnaas.so.views import blueprint
from cdnaas.so.webhook_delivery import Dispatcher


def create_app(database=None, runner=None, background=True):
    """The SO app; with ``background`` it resumes interrupted operations, starts the
    lease scheduler and the webhook dispatcher."""
    database = database or engine.for_service("so")
    runner = runner or OperationRunner(database)
    app = make_app("so", [blueprint])
    app.extensions["db"] = database
    app.extensions["runner"] = runner
    webhooks.ensure_key()
    if background:
        runner.recover()
        runner.start_scheduler()
        dispatcher = Dispatcher(database)
        dispatcher.start()
        app.extensions["webhooks"] = dispatcher
    return app
