"""``POST /ro/v1/hosts/{host}/power``: the Instance Manager's power actions, carried out by RO
(the only part that reaches infrastructure) through the host power driver
(:mod:`cdnaas.ro.power`); ``GET /ro/v1/power`` names that driver and whether it only records."""
from flask import Blueprint, current_app, request

from cdnaas.ro.power.service import HostPower

blueprint = Blueprint("ro_power", __name__, url_prefix="/ro/v1")


def _power():
    app = current_app
    if "ro_power" not in app.extensions:
        app.extensions["ro_power"] = HostPower(app.extensions["ro"])
    return app.extensions["ro_power"]


@blueprint.get("/power")
def get_power_driver():
    driver = _power().driver
    return {"driver": driver.name, "records_only": driver.records_only}


@blueprint.post("/hosts/<host>/power")
def set_host_power(host):
    body = request.get_json()
    return _power().act(host, body["action"], body.get("reason", ""))
