"""Customer API application factory."""
from cdnaas.api import auth, keystone, policy, tokens
from cdnaas.api.token_cache import ValidatedTokens
from cdnaas.api.calibration_views import blueprint as calibration_blueprint
from cdnaas.api.views import blueprint
from cdnaas.common import errors, settings
from cdnaas.common.app import make_app
from cdnaas.db import engine
from cdnaas.portal import blueprint as portal

#: CDNAAS_AUTH_STRATEGY -> who a request comes from (:class:`cdnaas.api.auth.Caller`)
STRATEGIES = {"local": tokens.local_caller, "keystone": keystone.caller}


def create_app(database=None):
    """The northbound API; every request is authenticated and authorized (its route's
    policy rule) before it is validated.

    The authentication strategy is read here, once: ``keystone`` puts keystonemiddleware's
    ``auth_token`` in front of the app (:func:`cdnaas.api.keystone.install`).

    :raises cdnaas.common.errors.CdnaasError: (500) an unknown strategy, or a policy file
        named that cannot be read.
    """
    strategy = settings.get("CDNAAS_AUTH_STRATEGY")
    if strategy not in STRATEGIES:
        raise errors.CdnaasError(f"CDNAAS_AUTH_STRATEGY={strategy!r}: one of "
                                 f"{', '.join(STRATEGIES)}")
    database = database or engine.for_service("api")
    app = make_app("api", [blueprint, calibration_blueprint, portal])
    app.extensions["db"] = database
    app.extensions["caller_of"] = STRATEGIES[strategy]
    app.extensions["validated_tokens"] = ValidatedTokens(settings.get("CDNAAS_TOKEN_CACHE_SECONDS"))
    hooks = app.before_request_funcs.setdefault(None, [])
    hooks[:0] = [auth.authenticate, policy.authorize_request]
    if strategy == "keystone":
        keystone.install(app)
    policy.enforcer()  # a policy file that cannot be read stops the start
    return app
