"""Customer API application factory."""
from cdnaas.api import auth, tokens
from cdnaas.api.calibration_views import blueprint as calibration_blueprint
from cdnaas.api.views import blueprint
from cdnaas.common.app import make_app
from cdnaas.db import engine
from cdnaas.portal import blueprint as portal


def create_app(database=None):
    """The northbound API; every request is authenticated before it is validated."""
    database = database or engine.for_service("api")
    app = make_app("api", [blueprint, calibration_blueprint, portal])
    app.extensions["db"] = database
    # authenticated first; then the token's scope (until oslo.policy's rules replace it)
    app.before_request_funcs.setdefault(None, [])[0:0] = [auth.authenticate, tokens.enforce_scope]
    return app
