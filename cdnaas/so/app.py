"""Service Orchestrator application factory."""
from cdnaas.common.app import make_app
from cdnaas.db import engine
from cdnaas.so.acme import Renewer
from cdnaas.so.operations import OperationRunner
from cdnaas.so.views import blueprint


def create_app(database=None, runner=None, background=True):
    """The SO app; with ``background`` it resumes interrupted operations and
    starts the lease scheduler and the managed certificates' pass (:mod:`cdnaas.so.acme`)."""
    database = database or engine.for_service("so")
    runner = runner or OperationRunner(database)
    app = make_app("so", [blueprint])
    app.extensions["db"] = database
    app.extensions["runner"] = runner
    if background:
        runner.recover()
        runner.start_scheduler()
        app.extensions["acme"] = Renewer(database, runner.submit)
        app.extensions["acme"].start()
    return app
