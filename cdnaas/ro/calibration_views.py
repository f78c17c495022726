"""Operator-only RO calls that measure the VIM: calibration campaigns (``cdnaas calibrate``).

RO runs them since it alone reaches infrastructure; the API starts them for operators
(:mod:`cdnaas.api.calibration_views`). The logic is :mod:`cdnaas.ro.calibration_jobs`.
"""
from flask import Blueprint, current_app, request

from cdnaas.ro.calibration_jobs import Jobs

blueprint = Blueprint("ro_calibration", __name__, url_prefix="/ro/v1")


def _jobs():
    app = current_app
    if "ro_calibration" not in app.extensions:
        app.extensions["ro_calibration"] = Jobs(app.extensions["ro"].driver)
    return app.extensions["ro_calibration"]


@blueprint.post("/calibrations")
def start_calibration():
    return _jobs().start(request.get_json()), 202


@blueprint.get("/calibrations")
def list_calibrations():
    return {"calibrations": _jobs().list()}


@blueprint.get("/calibrations/<job_id>")
def get_calibration(job_id):
    return _jobs().get(job_id)
