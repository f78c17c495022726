"""vCDNs and operations as a tenant sees them: the SO's records, filtered by owner.

The SO owns instances and operations; this module only forwards requests for
the caller's tenant and hides every other tenant's records behind a 404.
"""
from cdnaas.common import errors, etags
from cdnaas.common.clients import ImClient, SoClient

#: query parameters forwarded to the Instance Manager, per view
METRICS_ARGS = ("since", "until", "scope", "step")
DECISIONS_ARGS = ("since", "kind", "region")
LIST_ARGS = ("state", "name", "limit", "marker")
OPERATIONS_ARGS = ("limit", "marker")


def _so():
    return SoClient()


def _accepted(answer):
    return answer.body, 202, {"Location": f"/api/v1/operations/{answer.operation.id}",
                              "ETag": etags.etag(answer.vcdn.revision)}


def shown(vcdn):
    """A vCDN's answer: its representation with its ``ETag`` (its revision)."""
    return vcdn.body, 200, {"ETag": etags.etag(vcdn.revision)}


def owned(caller, vcdn_id):
    """The vCDN ``vcdn_id`` (an :class:`~cdnaas.common.answers.Instance`) if the caller may
    see it; 404 otherwise."""
    try:
        vcdn = _so().instance(vcdn_id)
    except errors.NotFound:
        vcdn = None
    if vcdn is None or not caller.sees(vcdn.tenant):
        raise errors.NotFound(f"no vCDN {vcdn_id}; GET /api/v1/vcdns lists yours",
                              field="vcdn_id")
    return vcdn


def create(caller, body):
    return _accepted(_so().create_instance(caller.tenant, body))


def quote(caller, body):
    return _so().quote(caller.tenant, body)


def list_(caller, args):
    """A page of the caller's vCDNs (an operator's: every tenant's), filtered by ``args``
    (``state``, ``name``, ``limit``, ``marker``, ``include_deleted``; checked by the
    OpenAPI document): ``{"vcdns": [...], "next": marker or None}``."""
    return _so().instances_page(tenant=caller.tenant_filter,
                                include_deleted=args.get("include_deleted") == "true",
                                **_only(args, LIST_ARGS))


def change(caller, vcdn_id, body, if_match=None):
    owned(caller, vcdn_id)
    return _accepted(_so().update_instance(vcdn_id, body, if_match=if_match))


def delete(caller, vcdn_id, if_match=None):
    owned(caller, vcdn_id)
    return _accepted(_so().delete_instance(vcdn_id, reason="customer", if_match=if_match))


def invalidate(caller, vcdn_id, body):
    """Purge paths and prefixes from every cache of the caller's vCDN (202, an operation)."""
    owned(caller, vcdn_id)
    return _accepted(_so().invalidate(vcdn_id, body))


def prefetch(caller, vcdn_id, body):
    """Have every cache of the caller's vCDN fetch paths (202, an operation)."""
    owned(caller, vcdn_id)
    return _accepted(_so().prefetch(vcdn_id, body))


def sign_url(caller, vcdn_id, body):
    """A URL of the caller's vCDN signed with one of its keys (``{url, query, expires...}``)."""
    owned(caller, vcdn_id)
    return _so().sign_url(vcdn_id, body)


def operations(caller, vcdn_id, args):
    owned(caller, vcdn_id)
    return _so().operations(vcdn_id, **_only(args, OPERATIONS_ARGS))


def operation(caller, operation_id):
    try:
        found = _so().operation(operation_id)
        owned(caller, found.vcdn_id)
    except errors.NotFound:
        raise errors.NotFound(f"no operation {operation_id}", field="operation_id") from None
    return found.body


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
