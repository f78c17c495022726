"""HTTP views of the Service Orchestrator (thin: logic lives in the modules they call)."""
from flask import Blueprint, current_app, request

from cdnaas.so import (cache_ops, catalogue, elasticity, instances, pricing, quotas, states,
                       webhooks)

blueprint = Blueprint("so", __name__, url_prefix="/so/v1")


def _db():
    return current_app.extensions["db"]


def _runner():
    return current_app.extensions["runner"]


def _accepted(instance, operation, status=202):
    body = {"vcdn": instances.instance_view(instance),
            "operation": instances.operation_view(operation)}
    return body, status, {"Location": f"/so/v1/operations/{operation.id}"}


@blueprint.get("/flavors")
def list_flavors():
    return {"flavors": catalogue.flavors()}


@blueprint.get("/flavors/<flavor>/versions/<version>/vcdns")
def template_users(flavor, version):
    # the OpenAPI document has already checked that version is an integer
    with _db().sessions() as session:
        return {"vcdns": catalogue.template_users(session, flavor, int(version))}


@blueprint.get("/regions")
def list_regions():
    with _db().sessions() as session:
        return {"regions": catalogue.list_regions(session)}


@blueprint.post("/regions")
def create_region():
    with _db().transaction() as session:
        return catalogue.create_region(session, request.get_json()), 201


@blueprint.get("/regions/<region>")
def get_region(region):
    with _db().sessions() as session:
        return catalogue.region_view(session, catalogue.get_region(session, region))


@blueprint.patch("/regions/<region>")
def update_region(region):
    with _db().transaction() as session:
        return catalogue.update_region(session, region, request.get_json())


@blueprint.get("/regions/<region>/hosts")
def list_hosts(region):
    with _db().sessions() as session:
        return {"hosts": catalogue.list_hosts(session, region)}


@blueprint.post("/regions/<region>/hosts")
def create_host(region):
    with _db().transaction() as session:
        return catalogue.create_host(session, region, request.get_json()), 201


@blueprint.patch("/regions/<region>/hosts/<host>")
def update_host(region, host):
    with _db().transaction() as session:
        return catalogue.update_host(session, region, host, request.get_json())


@blueprint.get("/instances")
def list_instances():
    # the OpenAPI document has already checked each parameter's form
    args = request.args
    brief = args.get("brief") == "true"
    with _db().sessions() as session:
        found, marker = instances.list_instances(
            session, tenant=args.get("tenant"), state=args.get("state"), name=args.get("name"),
            limit=args.get("limit", type=int), marker=args.get("marker"),
            include_deleted=args.get("include_deleted") == "true", brief=brief)
        view = instances.brief_view if brief else instances.instance_view
        return {"vcdns": [view(i) for i in found], "next": marker}


@blueprint.post("/instances")
def create_instance():
    body = request.get_json()
    instance, operation, start_now = instances.create(_db(), body["tenant"], body["request"])
    if start_now:
        _runner().submit(operation.id)
    return _accepted(instance, operation)


@blueprint.post("/quotes")
def create_quote():
    body = request.get_json()
    return instances.quote(_db(), body["tenant"], body["request"])


@blueprint.post("/prices")
def create_price():
    """The price of usage figures from the operator's price table (usage reports)."""
    body = request.get_json()
    return pricing.price(body["flavor"], body["vcpu_hours"], body["kwh"], body["gb"],
                         body["viewer_hours"])


@blueprint.get("/instances/<instance_id>")
def get_instance(instance_id):
    with _db().sessions() as session:
        return instances.instance_view(instances.instance_row(session, instance_id))


@blueprint.get("/instances/<instance_id>/sig")
def get_sig(instance_id):
    with _db().sessions() as session:
        return instances.get_instance(session, instance_id).sig


@blueprint.patch("/instances/<instance_id>")
def update_instance(instance_id):
    instance, operation = instances.update(_db(), instance_id, request.get_json(),
                                           if_match=request.headers.get("If-Match"))
    if operation.state == "PENDING":
        _runner().submit(operation.id)
    return _accepted(instance, operation)


@blueprint.delete("/instances/<instance_id>")
def delete_instance(instance_id):
    instance, operation = instances.terminate(_db(), instance_id,
                                              reason=request.args.get("reason", "customer"),
                                              if_match=request.headers.get("If-Match"))
    if operation.state == "PENDING":
        _runner().submit(operation.id)
    return _accepted(instance, operation)


@blueprint.post("/instances/<instance_id>/scale")
def scale_instance(instance_id):
    body = request.get_json()
    instance, operation = elasticity.scale(_db(), instance_id, body["region"], body["caches"],
                                           body.get("reason", "instance manager"))
    _runner().submit(operation.id)
    return _accepted(instance, operation)


@blueprint.post("/instances/<instance_id>/signed-urls")
def sign_url(instance_id):
    with _db().sessions() as session:
        return instances.signed_url(instances.get_instance(session, instance_id),
                                    request.get_json())


@blueprint.post("/instances/<instance_id>/invalidations")
def invalidate_instance(instance_id):
    return _on_caches(instance_id, states.INVALIDATE)


@blueprint.post("/instances/<instance_id>/prefetches")
def prefetch_instance(instance_id):
    return _on_caches(instance_id, states.PREFETCH)


def _on_caches(instance_id, kind):
    instance, operation = cache_ops.start(_db(), instance_id, kind, request.get_json())
    _runner().submit(operation.id)
    return _accepted(instance, operation)


@blueprint.post("/instances/<instance_id>/heal")
def heal_instance(instance_id):
    body = request.get_json()
    instance, operation = elasticity.heal(_db(), instance_id, body["vnf"],
                                          body.get("reason", "instance manager"),
                                          body.get("in_place", False))
    _runner().submit(operation.id)
    return _accepted(instance, operation)


@blueprint.get("/instances/<instance_id>/operations")
def list_operations(instance_id):
    with _db().sessions() as session:
        found, marker = instances.list_operations(session, instance_id,
                                                  limit=request.args.get("limit", type=int),
                                                  marker=request.args.get("marker"))
        return {"operations": [instances.operation_view(o) for o in found], "next": marker}


@blueprint.get("/operations/<operation_id>")
def get_operation(operation_id):
    with _db().sessions() as session:
        return instances.operation_view(instances.get_operation(session, operation_id))


@blueprint.get("/webhooks")
def list_webhooks():
    with _db().sessions() as session:
        return {"webhooks": webhooks.list_(session, request.args.get("tenant"))}


@blueprint.post("/webhooks")
def create_webhook():
    body = request.get_json()
    with _db().transaction() as session:
        return webhooks.create(session, body["tenant"], body["webhook"]), 201


@blueprint.get("/webhooks/<webhook_id>")
def get_webhook(webhook_id):
    with _db().sessions() as session:
        return webhooks.view(webhooks.owned(session, webhook_id, request.args.get("tenant")))


@blueprint.delete("/webhooks/<webhook_id>")
def delete_webhook(webhook_id):
    with _db().transaction() as session:
        webhooks.delete(session, webhook_id, request.args.get("tenant"))
    return "", 204


@blueprint.get("/webhooks/<webhook_id>/deliveries")
def webhook_deliveries(webhook_id):
    with _db().sessions() as session:
        return {"deliveries": webhooks.deliveries(session, webhook_id, request.args.get("tenant"),
                                                  request.args.get("limit", type=int))}


@blueprint.post("/events")
def emit_event():
    body = request.get_json()
    with _db().transaction() as session:
        instance = instances.get_instance(session, body["vcdn_id"])
        made = webhooks.emit(session, instance.tenant, body["type"], instance.id, body["data"],
                             dedupe_key=body.get("dedupe_key"))
    return {"deliveries": made}, 202


@blueprint.get("/quotas/defaults")
def quota_defaults():
    with _db().sessions() as session:
        return quotas.defaults_view(session)


@blueprint.put("/quotas/defaults")
def set_quota_defaults():
    with _db().transaction() as session:
        quotas.set_limits(session, quotas.DEFAULTS, request.get_json())
        return quotas.defaults_view(session)


@blueprint.get("/tenants/<tenant>/quotas")
def tenant_quotas(tenant):
    with _db().sessions() as session:
        return quotas.view(session, tenant)


@blueprint.put("/tenants/<tenant>/quotas")
def set_tenant_quotas(tenant):
    with _db().transaction() as session:
        quotas.set_limits(session, tenant, request.get_json())
        return quotas.view(session, tenant)
