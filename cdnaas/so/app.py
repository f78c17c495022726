"""Service Orchestrator application factory."""
from cdnaas.common.app import make_app
from cdnaas.db import engine
from cdnaas.so import webhooks
from cdnaas.so.acme import Renewer
from cdnaas.so.hostname_verifier import Verifier
from cdnaas.so.operations import OperationRunner
from cdnaas.so.views import blueprint
from cdnaas.so.webhook_delivery import Dispatcher


def create_app(database=None, runner=None, background=True):
    """The SO app; with ``background`` it resumes interrupted operations, starts the
    lease scheduler, the webhook dispatcher and the managed certificates' pass
    (:mod:`cdnaas.so.acme`)."""
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
        app.extensions["acme"] = Renewer(database, runner.submit)
        app.extensions["acme"].start()
        app.extensions["hostnames"] = Verifier(database, runner.submit)
        app.extensions["hostnames"].start()
    return app
