"""vCDNs and operations as a tenant sees them: the SO's records, filtered by owner.

The SO owns instances and operations; this module only forwards requests for
the caller's tenant and hides every other tenant's records behind a 404.
"""
from cdnaas.common import errors
from cdnaas.common.clients import ImClient, SoClient

#: query parameters forwarded to the Instance Manager, per view
METRICS_ARGS = ("since", "until", "scope", "step")
DECISIONS_ARGS = ("since", "kind", "region")


def _so():
    return SoClient()


def _accepted(answer):
    return answer, 202, {"Location": f"/api/v1/operations/{answer['operation']['id']}"}


def owned(caller, vcdn_id):
    """The vCDN ``vcdn_id`` if the caller may see it; 404 otherwise."""
    try:
        vcdn = _so().instance(vcdn_id)
    except errors.NotFound:
        vcdn = None
    if vcdn is None or not (caller.is_operator or vcdn["tenant"] == caller.tenant):
        raise errors.NotFound(f"no vCDN {vcdn_id}; GET /api/v1/vcdns lists yours",
                              field="vcdn_id")
    return vcdn


def create(caller, body):
    return _accepted(_so().create_instance(caller.tenant, body))


def quote(caller, body):
    return _so().quote(caller.tenant, body)


def list_(caller):
    return {"vcdns": _so().instances(tenant=None if caller.is_operator else caller.tenant)}


def change(caller, vcdn_id, body):
    owned(caller, vcdn_id)
    return _accepted(_so().update_instance(vcdn_id, body))


def delete(caller, vcdn_id):
    owned(caller, vcdn_id)
    return _accepted(_so().delete_instance(vcdn_id, reason="customer"))


def operations(caller, vcdn_id):
    owned(caller, vcdn_id)
    return _so().operations(vcdn_id)


def operation(caller, operation_id):
    try:
        found = _so().operation(operation_id)
        owned(caller, found["vcdn_id"])
    except errors.NotFound:
        raise errors.NotFound(f"no operation {operation_id}", field="operation_id") from None
    return found


def metrics(caller, vcdn_id, args):
    """Time series of the caller's vCDN (the Instance Manager's), within the window in ``args``."""
    owned(caller, vcdn_id)
    return ImClient().metrics(vcdn_id, **_only(args, METRICS_ARGS))


def decisions(caller, vcdn_id, args):
    """Decisions the Instance Manager took about the caller's vCDN, oldest first."""
    owned(caller, vcdn_id)
    return {"decisions": ImClient().actions(instance_id=vcdn_id, **_only(args, DECISIONS_ARGS))}


def _only(args, names):
    return {name: args[name] for name in names if args.get(name)}
