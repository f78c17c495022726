"""SIDR's HTTP routes (thin: decode the request, call :mod:`cdnaas.sidr.service`)."""
from flask import Blueprint, current_app, request

from cdnaas.common import bodies
from cdnaas.common.clients import SoClient
from cdnaas.sidr import service

blueprint = Blueprint("sidr", __name__, url_prefix="/sidr/v1")


def _database():
    return current_app.extensions["db"]


@blueprint.post("/templates")
def register_template():
    document = bodies.current_document()
    template = service.register(_database(), document)
    location = f"{blueprint.url_prefix}/templates/{template['flavor']}/{template['version']}"
    return template, 201, {"Location": location}


@blueprint.get("/templates")
def list_templates():
    return {"templates": service.list_templates(_database(), request.args.get("flavor"))}


@blueprint.get("/templates/<flavor>")
def get_latest_template(flavor):
    return service.get_template(_database(), flavor)


@blueprint.get("/templates/<flavor>/<version>")
def get_template(flavor, version):
    # the OpenAPI document has already checked that version is an integer
    return service.get_template(_database(), flavor, int(version))


@blueprint.patch("/templates/<flavor>/<version>")
def update_template(flavor, version):
    return service.set_deprecated(_database(), flavor, int(version),
                                  request.get_json()["deprecated"])


@blueprint.delete("/templates/<flavor>/<version>")
def delete_template(flavor, version):
    service.delete(_database(), flavor, int(version), SoClient().template_users)
    return "", 204
