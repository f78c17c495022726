"""The web portal: a single page served by the customer API, talking to ``/api/v1``.

Content providers paste their API token, browse flavors and regions, quote a
vCDN, lease it and follow its operation; change its demand, regions, origin and
lease end; give it custom names and a certificate; set its cache rules, purge and
prefetch; watch its load, QoE, power and traffic; read its usage and bill, export
its access log; and end it after confirming. Every change sends the ETag the page
read (``If-Match``). Operators (``GET /api/v1/whoami``) get the operator console instead:
regions and hosts with their power, template versions, tenants with quotas and monthly
statements, calibrations with their curves, the quality board and decisions. The page holds no state of its own: everything it shows comes
from the API with the caller's token.
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
