"""Customer API application factory."""
from cdnaas.api import auth
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
    app.before_request_funcs.setdefault(None, []).insert(0, auth.authenticate)
    return app
