"""HTTP views of the customer API (thin: see tenancy.py, vcdns.py, auth.py)."""
from flask import Blueprint, current_app, g, request

from cdnaas.api import quality, statements, tenancy, usage, vcdns
from cdnaas.api.auth import require_operator
from cdnaas.common import errors
from cdnaas.common.clients import ImClient, SidrClient, SoClient

blueprint = Blueprint("api", __name__, url_prefix="/api/v1")

CATALOGUE_FIELDS = ("name", "description", "default")


def _db():
    return current_app.extensions["db"]


@blueprint.get("/whoami")
def whoami():
    """Who the credential is: tenant, user, roles, scope (the portal shows operators their console)."""
    caller = g.caller
    return {"tenant": caller.tenant, "user": caller.user, "roles": sorted(caller.roles),
            "system": caller.system, "operator": caller.is_operator}


@blueprint.get("/flavors")
def list_flavors():
    return SoClient().flavors()


@blueprint.get("/regions")
def list_regions():
    regions = SoClient().regions()
    if not g.caller.is_operator:
        regions = [{k: r[k] for k in CATALOGUE_FIELDS} for r in regions]
    return {"regions": regions}


@blueprint.post("/regions")
def create_region():
    require_operator()
    return SoClient().create_region(request.get_json()), 201


@blueprint.get("/regions/<region>")
def get_region(region):
    found = SoClient().region(region)
    return found if g.caller.is_operator else {k: found[k] for k in CATALOGUE_FIELDS}


@blueprint.patch("/regions/<region>")
def update_region(region):
    require_operator()
    return SoClient().update_region(region, request.get_json())


@blueprint.get("/regions/<region>/hosts")
def list_hosts(region):
    require_operator()
    return {"hosts": SoClient().hosts(region)}


@blueprint.post("/regions/<region>/hosts")
def create_host(region):
    require_operator()
    return SoClient().create_host(region, request.get_json()), 201


@blueprint.patch("/regions/<region>/hosts/<host>")
def update_host(region, host):
    require_operator()
    return SoClient().update_host(region, host, request.get_json())


@blueprint.get("/hosts/power")
def hosts_power():
    require_operator()
    return ImClient().hosts()


@blueprint.get("/quality")
def quality_overview():
    require_operator()
    return quality.overview()


@blueprint.get("/templates")
def list_templates():
    require_operator()
    return {"templates": SidrClient().list_templates(request.args.get("flavor"))}


@blueprint.post("/templates")
def register_template():
    """Operators register templates here; SIDR itself answers only services."""
    require_operator()
    return SidrClient().register_raw(request.get_data(), request.content_type), 201


@blueprint.patch("/templates/<flavor>/<version>")
def update_template(flavor, version):
    """Deprecate a template version (or offer it again)."""
    require_operator()
    # the OpenAPI document has already checked that version is an integer
    return SidrClient().set_deprecated(flavor, int(version), request.get_json()["deprecated"])


@blueprint.delete("/templates/<flavor>/<version>")
def delete_template(flavor, version):
    """Delete a template version no vCDN uses (SIDR asks SO)."""
    require_operator()
    SidrClient().delete_template(flavor, int(version))
    return "", 204


@blueprint.get("/tenants")
def list_tenants():
    require_operator()
    with _db().sessions() as session:
        return {"tenants": tenancy.list_tenants(session)}


@blueprint.post("/tenants")
def create_tenant():
    require_operator()
    with _db().transaction() as session:
        return tenancy.create_tenant(session, request.get_json()), 201


@blueprint.get("/tenants/<tenant>/users")
def list_users(tenant):
    with _db().sessions() as session:
        return {"users": tenancy.list_users(session, g.caller, tenant)}


@blueprint.post("/tenants/<tenant>/users")
def create_user(tenant):
    with _db().transaction() as session:
        return tenancy.create_user(session, g.caller, tenant, request.get_json()), 201


@blueprint.delete("/tenants/<tenant>/users/<user>")
def delete_user(tenant, user):
    """Delete a user of the tenant, revoking its tokens."""
    with _db().transaction() as session:
        tenancy.delete_user(session, g.caller, tenant, user)
    return "", 204


@blueprint.get("/tenants/<tenant>/tokens")
def list_tokens(tenant):
    with _db().sessions() as session:
        return {"tokens": tenancy.list_tokens(session, g.caller, tenant, request.args.get("user"))}


@blueprint.post("/tenants/<tenant>/tokens")
def create_token(tenant):
    with _db().transaction() as session:
        return tenancy.create_token(session, g.caller, tenant,
                                    request.get_json(silent=True) or {}), 201


@blueprint.delete("/tenants/<tenant>/tokens/<token_id>")
def revoke_token(tenant, token_id):
    with _db().transaction() as session:
        tenancy.revoke_token(session, g.caller, tenant, token_id)
    return "", 204


@blueprint.get("/quotas")
def own_quotas():
    """The caller's quotas and use (an operator names the tenant: ``?tenant=``)."""
    tenant = request.args.get("tenant") if g.caller.is_operator else g.caller.tenant
    if not tenant:
        raise errors.BadRequest("name the tenant whose quotas to show: ?tenant=NAME",
                                field="tenant")
    return SoClient().quotas(tenant)


@blueprint.get("/quotas/defaults")
def quota_defaults():
    require_operator()
    return SoClient().quota_defaults()


@blueprint.put("/quotas/defaults")
def set_quota_defaults():
    require_operator()
    return SoClient().set_quota_defaults(request.get_json())


@blueprint.get("/tenants/<tenant>/quotas")
def tenant_quotas(tenant):
    with _db().sessions() as session:
        tenancy.visible_tenant(session, g.caller, tenant)
    return SoClient().quotas(tenant)


@blueprint.put("/tenants/<tenant>/quotas")
def set_tenant_quotas(tenant):
    require_operator()
    with _db().sessions() as session:
        tenancy.visible_tenant(session, g.caller, tenant)
    return SoClient().set_quotas(tenant, request.get_json())


@blueprint.get("/tenants/<tenant>/statements/<month>")
def tenant_statement(tenant, month):
    """A tenant's usage and price per vCDN over a calendar month (``YYYY-MM``, UTC)."""
    require_operator()
    with _db().sessions() as session:
        tenancy.visible_tenant(session, g.caller, tenant)
    return statements.statement(tenant, month)


@blueprint.get("/vcdns")
def list_vcdns():
    return vcdns.list_(g.caller, request.args)


@blueprint.post("/vcdns")
def create_vcdn():
    return vcdns.create(g.caller, request.get_json())


@blueprint.post("/quotes")
def create_quote():
    return vcdns.quote(g.caller, request.get_json())


@blueprint.get("/vcdns/<vcdn_id>")
def get_vcdn(vcdn_id):
    return vcdns.shown(vcdns.owned(g.caller, vcdn_id))


@blueprint.patch("/vcdns/<vcdn_id>")
def update_vcdn(vcdn_id):
    return vcdns.change(g.caller, vcdn_id, request.get_json(),
                        if_match=request.headers.get("If-Match"))


@blueprint.delete("/vcdns/<vcdn_id>")
def delete_vcdn(vcdn_id):
    return vcdns.delete(g.caller, vcdn_id, if_match=request.headers.get("If-Match"))


@blueprint.post("/vcdns/<vcdn_id>/invalidations")
def invalidate_vcdn(vcdn_id):
    return vcdns.invalidate(g.caller, vcdn_id, request.get_json())


@blueprint.post("/vcdns/<vcdn_id>/signed-urls")
def sign_vcdn_url(vcdn_id):
    return vcdns.sign_url(g.caller, vcdn_id, request.get_json())


@blueprint.post("/vcdns/<vcdn_id>/prefetches")
def prefetch_vcdn(vcdn_id):
    return vcdns.prefetch(g.caller, vcdn_id, request.get_json())


@blueprint.get("/vcdns/<vcdn_id>/operations")
def list_operations(vcdn_id):
    return vcdns.operations(g.caller, vcdn_id, request.args)


@blueprint.get("/vcdns/<vcdn_id>/metrics")
def vcdn_metrics(vcdn_id):
    return vcdns.metrics(g.caller, vcdn_id, request.args)


@blueprint.get("/vcdns/<vcdn_id>/decisions")
def vcdn_decisions(vcdn_id):
    return vcdns.decisions(g.caller, vcdn_id, request.args)


@blueprint.get("/vcdns/<vcdn_id>/usage")
def vcdn_usage(vcdn_id):
    return usage.usage(g.caller, vcdn_id, request.args)


@blueprint.get("/vcdns/<vcdn_id>/traffic")
def vcdn_traffic(vcdn_id):
    return usage.traffic(g.caller, vcdn_id, request.args)


@blueprint.get("/vcdns/<vcdn_id>/access-log")
def vcdn_access_log(vcdn_id):
    return usage.access_log(g.caller, vcdn_id, request.args)


@blueprint.get("/vcdns/<vcdn_id>/log-streams")
def vcdn_log_streams(vcdn_id):
    return usage.log_streams(g.caller, vcdn_id)


@blueprint.get("/operations/<operation_id>")
def get_operation(operation_id):
    return vcdns.operation(g.caller, operation_id)


def _tenant_filter():
    """The tenant whose webhooks the caller sees (None: an operator sees every one)."""
    return None if g.caller.is_operator else g.caller.tenant


@blueprint.get("/webhooks")
def list_webhooks():
    return {"webhooks": SoClient().webhooks(_tenant_filter())}


@blueprint.post("/webhooks")
def create_webhook():
    return SoClient().create_webhook(g.caller.tenant, request.get_json()), 201


@blueprint.get("/webhooks/<webhook_id>")
def get_webhook(webhook_id):
    return SoClient().webhook(webhook_id, _tenant_filter())


@blueprint.delete("/webhooks/<webhook_id>")
def delete_webhook(webhook_id):
    SoClient().delete_webhook(webhook_id, _tenant_filter())
    return "", 204


@blueprint.get("/webhooks/<webhook_id>/deliveries")
def webhook_deliveries(webhook_id):
    return {"deliveries": SoClient().webhook_deliveries(
        webhook_id, _tenant_filter(), request.args.get("limit", type=int))}
