"""What every service's ``create_app()`` shares: validation, errors, health, metrics."""
import logging
import time

from flask import Flask, Response, current_app, g, jsonify, request
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest
from sqlalchemy.exc import OperationalError
from werkzeug.exceptions import HTTPException

from cdnaas.common import bodies, config, errors, service_auth
from cdnaas.common.openapi import validator_for

LOG = logging.getLogger(__name__)

REQUESTS = Counter("cdnaas_http_requests_total", "HTTP requests answered",
                   ["service", "method", "route", "status"])
LATENCY = Histogram("cdnaas_http_request_seconds", "Time to answer an HTTP request",
                    ["service", "route"])


#: services reached only by other services and operator tools holding the service key


def make_app(service, blueprints):
    """A Flask app for ``service`` whose requests are checked against its OpenAPI document.

    :param service: short name (``api``, ``so``, ``sidr``, ``ro``, ``im``).
    :param blueprints: the service's blueprints (its thin views).
    """
    app = Flask(f"cdnaas.{service}")
    app.json.sort_keys = False
    app.config["SERVICE"] = service
    validator = validator_for(config.api_spec_path(service))
    app.extensions["openapi"] = validator
    app.before_request(_start_timer)
    if service in config.INTERNAL_SERVICES:
        app.before_request(_authenticate_service)
    app.before_request(bodies.install(app))  # size, UTF-8, depth, numbers (cdnaas.common.bodies)
    app.before_request(validator.validate_current_request)
    app.after_request(_record_metrics)
    app.register_error_handler(errors.CdnaasError, _cdnaas_error)
    app.register_error_handler(OperationalError, _database_unreachable)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _unexpected_error)
    app.add_url_rule("/healthz", "healthz", lambda: {"service": service, "status": "ok"})
    app.add_url_rule("/metrics", "metrics", _metrics)
    for blueprint in blueprints:
        app.register_blueprint(blueprint)
    return app


def _start_timer():
    g.started = time.perf_counter()


def _authenticate_service():
    """``before_request`` hook of internal services: every route but ``/healthz`` needs a
    valid service token (:mod:`cdnaas.common.service_auth`); ``metrics`` tokens read only
    ``/metrics``.

    :raises Unauthorized: no token, or one that is malformed, expired or wrongly signed.
    """
    if request.endpoint == "healthz":
        return
    caller = service_auth.verify(service_auth.bearer(request.headers.get("Authorization")))
    if caller == service_auth.METRICS_CALLER and request.endpoint != "metrics":
        raise errors.Unauthorized("a metrics token reads /metrics only")
    g.service_caller = caller


def _record_metrics(response):
    route = request.url_rule.rule if request.url_rule else "unmatched"
    name = current_app.config["SERVICE"]
    REQUESTS.labels(name, request.method, route, response.status_code).inc()
    if "started" in g:
        LATENCY.labels(name, route).observe(time.perf_counter() - g.started)
    return response


def _metrics():
    return Response(generate_latest(), mimetype=CONTENT_TYPE_LATEST)


def _cdnaas_error(exc):
    if exc.status >= 500:
        LOG.warning("%s %s failed: %s", request.method, request.path, exc.message)
    headers = {"WWW-Authenticate": 'Bearer realm="cdnaas"'} if exc.status == 401 else \
        {"Retry-After": str(errors.Unavailable.retry_after_seconds)} if exc.status == 503 else {}
    return jsonify(exc.to_dict()), exc.status, headers


def _database_unreachable(exc):
    """The database went away under a request (restarting, unreachable, SQLite locked
    past its timeout): 503 and a Retry-After, not an internal error. A transaction that
    did not commit changed nothing; a commit cut off is answered the same, its outcome
    unknown to the service too."""
    return _cdnaas_error(errors.Unavailable(
        f"the {current_app.config['SERVICE']} service cannot reach its database right now "
        f"({errors.outage_words(exc)}); try again in a few seconds"))


def _http_error(exc):
    body = {"error": {"code": exc.code, "title": exc.name, "message": exc.description}}
    return jsonify(body), exc.code


def _unexpected_error(exc):
    LOG.exception("unexpected error answering %s %s", request.method, request.path)
    body = {"error": {"code": 500, "title": "Internal error",
                      "message": f"{type(exc).__name__}: {exc}"}}
    return jsonify(body), 500
