"""HTTP views of the customer API (thin: see tenancy.py, vcdns.py, auth.py)."""
from flask import Blueprint, current_app, g, request

from cdnaas.api import quality, statements, tenancy, tokens, usage, vcdns
from cdnaas.api.policy import (ADMIN, ADMIN_READER, ANYONE, MEMBER, PROJECT_MEMBER, PROJECT_READER,
                               PURGE_FOLLOWER, PURGER, READER, Routes)
from cdnaas.common import errors
from cdnaas.common.clients import ImClient, SidrClient, SoClient

blueprint = Blueprint("api", __name__, url_prefix="/api/v1")
routes = Routes(blueprint)  # each route with its policy rule (cdnaas.api.policy)

CATALOGUE_FIELDS = ("name", "description", "default")


def _db():
    return current_app.extensions["db"]


def _visible_tenant(tenant):
    """404 unless the caller may see ``tenant`` (itself, or an operator) and, with local
    tokens, it exists; under Keystone a tenant is a project id this API keeps no row of."""
    if current_app.extensions["caller_of"] is tokens.local_caller:
        with _db().sessions() as session:
            tenancy.visible_tenant(session, g.caller, tenant)
    elif not g.caller.sees(tenant):
        raise errors.NotFound(f"no tenant {tenant}", field="tenant")


@routes.get("/whoami", "cdn:caller:get", ANYONE,
            "Who the credential is (any authenticated caller).")
def whoami():
    """Who the credential is: tenant, user, roles, scope (the portal shows operators their console)."""
    caller = g.caller
    return {"tenant": caller.tenant, "user": caller.user, "roles": sorted(caller.roles),
            "system": caller.system, "operator": caller.is_operator}


@routes.get("/flavors", "cdn:flavor:get_all", READER, "List the flavors.")
def list_flavors():
    return SoClient().flavors()


@routes.get("/regions", "cdn:region:get_all", READER,
            "List the regions (an operator's with their figures).")
def list_regions():
    regions = SoClient().regions()
    if not g.caller.is_operator:
        return {"regions": [{k: getattr(r, k) for k in CATALOGUE_FIELDS} for r in regions]}
    return {"regions": [r.body for r in regions]}


@routes.post("/regions", "cdn:region:create", ADMIN, "Register a region (operator).")
def create_region():
    return SoClient().create_region(request.get_json()), 201


@routes.get("/regions/<region>", "cdn:region:get_one", READER,
            "Show a region (an operator's with its figures).")
def get_region(region):
    found = SoClient().region(region)
    return found if g.caller.is_operator else {k: found[k] for k in CATALOGUE_FIELDS}


@routes.patch("/regions/<region>", "cdn:region:update", ADMIN, "Change a region (operator).")
def update_region(region):
    return SoClient().update_region(region, request.get_json())


@routes.get("/regions/<region>/hosts", "cdn:host:get_all", ADMIN_READER,
            "List a region's hosts (operator).")
def list_hosts(region):
    return {"hosts": [host.body for host in SoClient().hosts(region)]}


@routes.post("/regions/<region>/hosts", "cdn:host:create", ADMIN, "Register a host (operator).")
def create_host(region):
    return SoClient().create_host(region, request.get_json()), 201


@routes.patch("/regions/<region>/hosts/<host>", "cdn:host:update", ADMIN,
              "Change a host (operator).")
def update_host(region, host):
    return SoClient().update_host(region, host, request.get_json())


@routes.get("/hosts/power", "cdn:host:get_power", ADMIN_READER,
            "Show the hosts' power (operator).")
def hosts_power():
    return ImClient().hosts()


@routes.get("/quality", "cdn:quality:get", ADMIN_READER,
            "Show every tenant's vCDNs' quality (operator).")
def quality_overview():
    return quality.overview()


@routes.get("/templates", "cdn:template:get_all", ADMIN_READER,
            "List the service templates (operator).")
def list_templates():
    return {"templates": [t.body for t in SidrClient().list_templates(request.args.get("flavor"))]}


@routes.post("/templates", "cdn:template:create", ADMIN, "Register a service template (operator).")
def register_template():
    """Operators register templates here; SIDR itself answers only services."""
    return SidrClient().register_raw(request.get_data(), request.content_type), 201


@routes.patch("/templates/<flavor>/<version>", "cdn:template:update", ADMIN,
              "Deprecate a template version or offer it again (operator).")
def update_template(flavor, version):
    """Deprecate a template version (or offer it again)."""
    # the OpenAPI document has already checked that version is an integer
    return SidrClient().set_deprecated(flavor, int(version), request.get_json()["deprecated"])


@routes.delete("/templates/<flavor>/<version>", "cdn:template:delete", ADMIN,
               "Delete a template version (operator).")
def delete_template(flavor, version):
    """Delete a template version no vCDN uses (SIDR asks SO)."""
    SidrClient().delete_template(flavor, int(version))
    return "", 204


@routes.get("/tenants", "cdn:tenant:get_all", ADMIN_READER, "List the local tenants (operator).")
def list_tenants():
    with _db().sessions() as session:
        return {"tenants": tenancy.list_tenants(session)}


@routes.post("/tenants", "cdn:tenant:create", ADMIN, "Create a local tenant (operator).")
def create_tenant():
    with _db().transaction() as session:
        return tenancy.create_tenant(session, request.get_json()), 201


@routes.get("/tenants/<tenant>/users", "cdn:user:get_all", MEMBER,
            "List a local tenant's users (operator, or the tenant itself).")
def list_users(tenant):
    with _db().sessions() as session:
        return {"users": tenancy.list_users(session, g.caller, tenant)}


@routes.post("/tenants/<tenant>/users", "cdn:user:create", MEMBER,
             "Create a user of a local tenant (operator, or the tenant itself).")
def create_user(tenant):
    with _db().transaction() as session:
        return tenancy.create_user(session, g.caller, tenant, request.get_json()), 201


@routes.delete("/tenants/<tenant>/users/<user>", "cdn:user:delete", MEMBER,
               "Delete a user of a local tenant, revoking its tokens (operator, or the tenant itself).")
def delete_user(tenant, user):
    """Delete a user of the tenant, revoking its tokens."""
    with _db().transaction() as session:
        tenancy.delete_user(session, g.caller, tenant, user)
    tokens.forget_validated_tokens()
    return "", 204


@routes.get("/tenants/<tenant>/tokens", "cdn:token:get_all", MEMBER,
            "List a local tenant's tokens (operator, or the tenant itself).")
def list_tokens(tenant):
    with _db().sessions() as session:
        return {"tokens": tenancy.list_tokens(session, g.caller, tenant, request.args.get("user"))}


@routes.post("/tenants/<tenant>/tokens", "cdn:token:create", MEMBER,
             "Issue a local token (operator, or the tenant itself).")
def create_token(tenant):
    with _db().transaction() as session:
        return tenancy.create_token(session, g.caller, tenant,
                                    request.get_json(silent=True) or {}), 201


@routes.delete("/tenants/<tenant>/tokens/<token_id>", "cdn:token:delete", MEMBER,
               "Revoke a local token (operator, or the tenant itself).")
def revoke_token(tenant, token_id):
    with _db().transaction() as session:
        tenancy.revoke_token(session, g.caller, tenant, token_id)
    tokens.forget_validated_tokens()
    return "", 204


@routes.get("/quotas", "cdn:quota:get", READER,
            "Show the caller's quotas and use (an operator names the tenant).")
def own_quotas():
    """The caller's quotas and use (an operator names the tenant: ``?tenant=``)."""
    tenant = request.args.get("tenant") if g.caller.is_operator else g.caller.tenant
    if not tenant:
        raise errors.BadRequest("name the tenant whose quotas to show: ?tenant=NAME",
                                field="tenant")
    return SoClient().quotas(tenant)


@routes.get("/quotas/defaults", "cdn:quota:get_defaults", ADMIN_READER,
            "Show the default quotas (operator).")
def quota_defaults():
    return SoClient().quota_defaults()


@routes.put("/quotas/defaults", "cdn:quota:update_defaults", ADMIN,
            "Set the default quotas (operator).")
def set_quota_defaults():
    return SoClient().set_quota_defaults(request.get_json())


@routes.get("/tenants/<tenant>/quotas", "cdn:quota:get_tenant", READER,
            "Show a tenant's quotas and use (operator, or the tenant itself).")
def tenant_quotas(tenant):
    _visible_tenant(tenant)
    return SoClient().quotas(tenant)


@routes.put("/tenants/<tenant>/quotas", "cdn:quota:update_tenant", ADMIN,
            "Set a tenant's quotas (operator).")
def set_tenant_quotas(tenant):
    _visible_tenant(tenant)
    return SoClient().set_quotas(tenant, request.get_json())


@routes.get("/tenants/<tenant>/statements/<month>", "cdn:statement:get", ADMIN_READER,
            "A tenant's usage and price over a month (operator).")
def tenant_statement(tenant, month):
    """A tenant's usage and price per vCDN over a calendar month (``YYYY-MM``, UTC)."""
    _visible_tenant(tenant)
    return statements.statement(tenant, month)


@routes.get("/vcdns", "cdn:vcdn:get_all", READER,
            "List the project's vCDNs (an operator's: every project's).")
def list_vcdns():
    return vcdns.list_(g.caller, request.args)


@routes.post("/vcdns", "cdn:vcdn:create", PROJECT_MEMBER, "Lease a vCDN for the caller's project.")
def create_vcdn():
    return vcdns.create(g.caller, request.get_json())


@routes.post("/quotes", "cdn:quote:create", PROJECT_READER,
             "Price a vCDN for the caller's project.")
def create_quote():
    return vcdns.quote(g.caller, request.get_json())


@routes.get("/vcdns/<vcdn_id>", "cdn:vcdn:get_one", PURGE_FOLLOWER, "Show a vCDN.")
def get_vcdn(vcdn_id):
    return vcdns.shown(vcdns.owned(g.caller, vcdn_id))


@routes.patch("/vcdns/<vcdn_id>", "cdn:vcdn:update", MEMBER, "Change a vCDN.")
def update_vcdn(vcdn_id):
    return vcdns.change(g.caller, vcdn_id, request.get_json(),
                        if_match=request.headers.get("If-Match"))


@routes.delete("/vcdns/<vcdn_id>", "cdn:vcdn:delete", MEMBER, "End a vCDN.")
def delete_vcdn(vcdn_id):
    return vcdns.delete(g.caller, vcdn_id, if_match=request.headers.get("If-Match"))


@routes.post("/vcdns/<vcdn_id>/invalidations", "cdn:vcdn:purge", PURGER,
             "Purge paths from a vCDN's caches.")
def invalidate_vcdn(vcdn_id):
    return vcdns.invalidate(g.caller, vcdn_id, request.get_json())


@routes.post("/vcdns/<vcdn_id>/signed-urls", "cdn:vcdn:sign_url", MEMBER, "Sign a URL of a vCDN.")
def sign_vcdn_url(vcdn_id):
    return vcdns.sign_url(g.caller, vcdn_id, request.get_json())


@routes.post("/vcdns/<vcdn_id>/prefetches", "cdn:vcdn:prefetch", MEMBER,
             "Have a vCDN's caches fetch paths.")
def prefetch_vcdn(vcdn_id):
    return vcdns.prefetch(g.caller, vcdn_id, request.get_json())


@routes.get("/vcdns/<vcdn_id>/operations", "cdn:operation:get_all", READER,
            "List a vCDN's operations.")
def list_operations(vcdn_id):
    return vcdns.operations(g.caller, vcdn_id, request.args)


@routes.get("/vcdns/<vcdn_id>/metrics", "cdn:vcdn:get_metrics", READER,
            "Read a vCDN's time series.")
def vcdn_metrics(vcdn_id):
    return vcdns.metrics(g.caller, vcdn_id, request.args)


@routes.get("/vcdns/<vcdn_id>/decisions", "cdn:vcdn:get_decisions", READER,
            "Read the decisions taken about a vCDN.")
def vcdn_decisions(vcdn_id):
    return vcdns.decisions(g.caller, vcdn_id, request.args)


@routes.get("/vcdns/<vcdn_id>/usage", "cdn:vcdn:get_usage", READER,
            "Read a vCDN's usage and bill.")
def vcdn_usage(vcdn_id):
    return usage.usage(g.caller, vcdn_id, request.args)


@routes.get("/vcdns/<vcdn_id>/traffic", "cdn:vcdn:get_traffic", READER, "Read a vCDN's traffic.")
def vcdn_traffic(vcdn_id):
    return usage.traffic(g.caller, vcdn_id, request.args)


@routes.get("/vcdns/<vcdn_id>/access-log", "cdn:vcdn:get_access_log", READER,
            "Export a vCDN's access log.")
def vcdn_access_log(vcdn_id):
    return usage.access_log(g.caller, vcdn_id, request.args)


@routes.get("/vcdns/<vcdn_id>/log-streams", "cdn:vcdn:get_log_streams", READER,
            "Read the state of a vCDN's log streams.")
def vcdn_log_streams(vcdn_id):
    return usage.log_streams(g.caller, vcdn_id)


@routes.get("/operations/<operation_id>", "cdn:operation:get_one", PURGE_FOLLOWER,
            "Show an operation.")
def get_operation(operation_id):
    return vcdns.operation(g.caller, operation_id)


@routes.get("/webhooks", "cdn:webhook:get_all", READER,
            "List the project's webhooks (an operator's: every project's).")
def list_webhooks():
    return {"webhooks": SoClient().webhooks(g.caller.tenant_filter)}


@routes.post("/webhooks", "cdn:webhook:create", PROJECT_MEMBER,
             "Register a webhook for the caller's project.")
def create_webhook():
    return SoClient().create_webhook(g.caller.tenant, request.get_json()), 201


@routes.get("/webhooks/<webhook_id>", "cdn:webhook:get_one", READER, "Show a webhook.")
def get_webhook(webhook_id):
    return SoClient().webhook(webhook_id, g.caller.tenant_filter)


@routes.delete("/webhooks/<webhook_id>", "cdn:webhook:delete", MEMBER, "Delete a webhook.")
def delete_webhook(webhook_id):
    SoClient().delete_webhook(webhook_id, g.caller.tenant_filter)
    return "", 204


@routes.get("/webhooks/<webhook_id>/deliveries", "cdn:webhook:get_deliveries", READER,
            "Read a webhook's delivery log.")
def webhook_deliveries(webhook_id):
    return {"deliveries": SoClient().webhook_deliveries(
        webhook_id, g.caller.tenant_filter, request.args.get("limit", type=int))}
