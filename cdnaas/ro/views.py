"""HTTP views of the Resource Orchestrator (thin: the logic is in :mod:`cdnaas.ro.service`)."""
from flask import Blueprint, current_app, request

blueprint = Blueprint("ro", __name__, url_prefix="/ro/v1")


def _service():
    return current_app.extensions["ro"]


@blueprint.put("/deployments/<deployment_id>")
def put_deployment(deployment_id):
    return _service().put(deployment_id, request.get_json()["sig"]), 202


@blueprint.get("/deployments")
def list_deployments():
    return {"deployments": _service().list(live=request.args.get("live") == "true")}


@blueprint.get("/deployments/<deployment_id>")
def get_deployment(deployment_id):
    return _service().get(deployment_id, wait=request.args.get("wait", 0.0, type=float))


@blueprint.delete("/deployments/<deployment_id>")
def delete_deployment(deployment_id):
    return _service().delete(deployment_id)


@blueprint.get("/deployments/<deployment_id>/health")
def deployment_health(deployment_id):
    return _service().health(deployment_id)


@blueprint.get("/deployments/<deployment_id>/metrics")
def deployment_metrics(deployment_id):
    return _service().metrics(deployment_id)
