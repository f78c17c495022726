"""The web portal: a single page served by the customer API, talking to ``/api/v1``.

Content providers paste their API token, browse flavors and regions, quote a
vCDN, lease it, follow its operation and end it. The page holds no state of
its own: everything it shows comes from the API with the caller's token.
"""
from pathlib import Path

from flask import Blueprint, redirect, send_from_directory

STATIC = Path(__file__).resolve().parent / "static"

blueprint = Blueprint("portal", __name__)


@blueprint.get("/portal/")
def index():
    return send_from_directory(STATIC, "index.html")


@blueprint.get("/portal/<asset>")
def asset(asset):
    return send_from_directory(STATIC, asset)


@blueprint.get("/")
def root():
    return redirect("/portal/")
