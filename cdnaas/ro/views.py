"""HTTP views of the Resource Orchestrator (thin: the logic is in :mod:`cdnaas.ro.service`)."""
from flask import Blueprint, Response, current_app, request

from cdnaas.common import clock, windows
from cdnaas.ro import reconciliation, traffic

blueprint = Blueprint("ro", __name__, url_prefix="/ro/v1")


def _service():
    return current_app.extensions["ro"]


@blueprint.put("/deployments/<deployment_id>")
def put_deployment(deployment_id):
    return _service().put(deployment_id, request.get_json()["sig"]), 202


@blueprint.get("/deployments")
def list_deployments():
    return {"deployments": _service().list(live=request.args.get("live") == "true")}


@blueprint.get("/placement")
def placement():
    return {"hosts": _service().placement()}


@blueprint.get("/deployments/<deployment_id>")
def get_deployment(deployment_id):
    return _service().get(deployment_id, wait=request.args.get("wait", 0.0, type=float))


@blueprint.delete("/deployments/<deployment_id>")
def delete_deployment(deployment_id):
    return _service().delete(deployment_id)


@blueprint.get("/reconciliations")
def list_reconciliations():
    return {"reconciliations": reconciliation.listing(_service().database)}


@blueprint.get("/deployments/<deployment_id>/health")
def deployment_health(deployment_id):
    return _service().health(deployment_id)


@blueprint.get("/deployments/<deployment_id>/metrics")
def deployment_metrics(deployment_id):
    return _service().metrics(deployment_id)


@blueprint.post("/deployments/<deployment_id>/invalidations")
def deployment_invalidation(deployment_id):
    return _service().invalidate(deployment_id, request.get_json())


@blueprint.put("/deployments/<deployment_id>/acme-challenges")
def deployment_acme_challenges(deployment_id):
    return _service().check_challenges(deployment_id, request.get_json())


@blueprint.post("/deployments/<deployment_id>/prefetches")
def deployment_prefetch(deployment_id):
    return _service().prefetch(deployment_id, request.get_json())


@blueprint.get("/deployments/<deployment_id>/traffic")
def deployment_traffic(deployment_id):
    return _service().traffic(deployment_id, request.args.get("cursor"))


@blueprint.get("/deployments/<deployment_id>/readings")
def deployment_readings(deployment_id):
    return _service().readings(deployment_id, request.args.get("cursor"))


@blueprint.post("/readings")
def many_readings():
    return {"readings": _service().readings_many(request.get_json()["deployments"])}


@blueprint.get("/deployments/<deployment_id>/access-log")
def deployment_access_log(deployment_id):
    since, until = windows.window(request.args, "since", "until", clock.now(),
                                  lambda end: end - traffic.EXPORT_DEFAULT,
                                  traffic.EXPORT_LONGEST)
    lines = _service().access_log(deployment_id, since.timestamp(), until.timestamp(),
                                  request.args.get("limit", traffic.EXPORT_LIMIT, type=int))
    return Response(lines, mimetype="application/x-ndjson")


@blueprint.get("/deployments/<deployment_id>/log-streams")
def deployment_log_streams(deployment_id):
    return _service().log_streams(deployment_id)


def _secrets():
    return current_app.extensions["secrets"]


@blueprint.post("/secrets")
def create_secret():
    body = request.get_json()
    return _secrets().store(body["owner"], body["certificate"], body["private_key"]), 201


@blueprint.get("/secrets")
def list_secrets():
    return {"secrets": _secrets().list(request.args.get("owner"))}


@blueprint.delete("/secrets/<ref>")
def delete_secret(ref):
    _secrets().delete(ref)
    return "", 204
