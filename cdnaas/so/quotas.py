"""Quotas: how much of the operator's cloud one tenant may hold.

Each quota (:data:`QUOTAS`) has a limit: the tenant's own (``so_quotas`` row of the
tenant), else the operator's default (row of :data:`DEFAULTS`), else the setting that
declares it (``CDNAAS_QUOTA_*``). What counts against it:

- ``vcdns``: the tenant's vCDNs that are not DELETED or FAILED;
- ``vcpus_per_region``: vCPUs the tenant's vCDNs reserve in any one region (every VNF
  role: the capacity the tenant takes from others), the region using most counts;
- ``hostnames``: custom hostnames over the tenant's vCDNs;
- ``purges_per_hour``: invalidations and prefetches of the tenant's vCDNs accepted in
  the last hour.

A customer's create, change, purge and prefetch are checked inside the transaction that
records them, after :func:`lock_tenant`: concurrent requests of one tenant take turns
there, so none passes a quota another is about to fill. The IM's own scale-outs (which
keep the quality the tenant leased) and heals are not counted against quotas.
A refusal is a 403 that names the quota, its limit and the use it would reach.
"""
import datetime as dt

from sqlalchemy import delete, func, select, text

from cdnaas.common import clock, config, errors
from cdnaas.so import states
from cdnaas.so.models import Host, Instance, Operation, Quota, Reservation

#: quota name -> (setting holding the built-in default, what it limits)
QUOTAS = {
    "vcdns": ("CDNAAS_QUOTA_VCDNS", "vCDNs that are not DELETED or FAILED"),
    "vcpus_per_region": ("CDNAAS_QUOTA_VCPUS_PER_REGION",
                         "vCPUs reserved in any one region, over all the tenant's vCDNs"),
    "hostnames": ("CDNAAS_QUOTA_HOSTNAMES", "custom hostnames over all the tenant's vCDNs"),
    "purges_per_hour": ("CDNAAS_QUOTA_PURGES_PER_HOUR",
                        "invalidations and prefetches accepted in the last hour"),
}
#: the tenant name of the operator's default limits' rows (no tenant is named so)
DEFAULTS = "*"
#: states whose vCDNs count as held
_HELD = (states.SCHEDULED, states.DEPLOYING, states.ACTIVE, states.UPDATING, states.DELETING)
MAX_LIMIT = 1_000_000


def lock_tenant(session, tenant):
    """Make the tenant's quota-checked requests take turns until the transaction ends:
    a transaction-scoped advisory lock on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` already
    lets one writer at a time."""
    if session.bind.dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
                        {"key": f"cdnaas-quota:{tenant}"})


def limits(session, tenant):
    """``{quota: limit}`` of ``tenant`` (``DEFAULTS``: the operator's defaults)."""
    rows = {(row.tenant, row.name): row.limit
            for row in session.scalars(select(Quota).where(Quota.tenant.in_({tenant, DEFAULTS})))}
    return {name: rows.get((tenant, name), rows.get((DEFAULTS, name), config.setting(setting)))
            for name, (setting, _what) in QUOTAS.items()}


def in_use(session, tenant, now=None, exclude_instance=None, regions=None):
    """``{quota: what counts against it now}`` for ``tenant`` (the vCDN
    ``exclude_instance`` left out: a change replaces what it holds).

    :param regions: :func:`per_region` of the same, where the caller has read it already.
    """
    now = now or clock.now()
    held = _held(tenant, exclude_instance)
    if regions is None:
        regions = per_region(session, tenant, exclude_instance)
    services = session.scalars(select(Instance.service).where(*held)).all()
    return {"vcdns": session.scalar(select(func.count()).select_from(Instance).where(*held)),
            "vcpus_per_region": max(regions.values(), default=0),
            "hostnames": sum(len((service or {}).get("hostnames", [])) for service in services),
            "purges_per_hour": session.scalar(
                select(func.count()).select_from(Operation)
                .join(Instance, Instance.id == Operation.instance_id)
                .where(Instance.tenant == tenant,
                       Operation.type.in_((states.INVALIDATE, states.PREFETCH)),
                       Operation.created_at >= now - dt.timedelta(hours=1)))}


def per_region(session, tenant, exclude_instance=None):
    """``{region: vCPUs}`` the tenant's held vCDNs reserve (but ``exclude_instance``)."""
    return {region: int(vcpus or 0) for region, vcpus in session.execute(
        select(Host.region_name, func.sum(Reservation.vcpus))
        .join(Reservation, Reservation.host_name == Host.name)
        .join(Instance, Instance.id == Reservation.instance_id)
        .where(*_held(tenant, exclude_instance)).group_by(Host.region_name))}


def _held(tenant, exclude_instance):
    held = [Instance.tenant == tenant, Instance.state.in_(_HELD)]
    if exclude_instance:
        held.append(Instance.id != exclude_instance)
    return held


def view(session, tenant):
    """``{"tenant", "quotas": [{name, limit, in_use, description}]}`` of ``tenant``."""
    limit, use = limits(session, tenant), in_use(session, tenant)
    return {"tenant": tenant,
            "quotas": [{"name": name, "limit": limit[name], "in_use": use[name],
                        "description": what} for name, (_setting, what) in QUOTAS.items()]}


def defaults_view(session):
    """``{"quotas": [{name, limit, description}]}``: the operator's defaults."""
    limit = limits(session, DEFAULTS)
    return {"quotas": [{"name": name, "limit": limit[name], "description": what}
                       for name, (_setting, what) in QUOTAS.items()]}


def set_limits(session, tenant, body):
    """Set ``tenant``'s limits (``DEFAULTS``: the operator's defaults) from ``body``
    (``{quota: limit or null}``; null: back to the default).

    :raises BadRequest: an unknown quota or a limit that is not 0 to :data:`MAX_LIMIT`.
    """
    if not isinstance(body, dict) or not body:
        raise errors.BadRequest("send an object of quota names and limits (null: the "
                                "default), e.g. {\"vcdns\": 10}", field="body")
    for name, limit in body.items():
        if name not in QUOTAS:
            raise errors.BadRequest(f"{name} is no quota; quotas are {', '.join(QUOTAS)}",
                                    field=name)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or not 0 <= limit <= MAX_LIMIT):
            raise errors.BadRequest(f"{name} must be a whole number from 0 to {MAX_LIMIT} "
                                    "(or null for the default)", field=name)
    for name, limit in body.items():
        session.execute(delete(Quota).where(Quota.tenant == tenant, Quota.name == name))
        if limit is not None:
            session.add(Quota(tenant=tenant, name=name, limit=limit))
    session.flush()


def check(session, tenant, adds, now=None, exclude_instance=None):
    """Refuse what would take ``tenant`` past a quota; call after :func:`lock_tenant`.

    :param adds: ``{quota: what the request holds}``, for the quotas it adds to: for
        ``vcdns`` and ``purges_per_hour`` how many it adds; for ``hostnames`` how many the
        request's vCDN holds once done, and for ``vcpus_per_region`` ``{region: vCPUs}`` it
        reserves there (with ``exclude_instance``, that vCDN: its current holding is not
        counted, as the request replaces it).
    :raises Forbidden: naming the quota, its limit and the use it would reach.
    """
    limit = limits(session, tenant)
    regions = per_region(session, tenant, exclude_instance)
    use = in_use(session, tenant, now, exclude_instance, regions)
    for name, adding in adds.items():
        if not adding:  # takes none of it
            continue
        if name == "vcpus_per_region":
            reached = max(regions.get(region, 0) + vcpus for region, vcpus in adding.items())
        else:
            reached = use[name] + adding
        if reached > limit[name]:
            raise errors.Forbidden(
                f"quota {name} exceeded: {QUOTAS[name][1]} would be {reached}, over your "
                f"limit of {limit[name]} (in use now: {use[name]}); free some or ask the "
                "operator for a higher quota", field=name,
                details=[{"quota": name, "limit": limit[name], "in_use": use[name],
                          "requested": reached}])


def vcpus_per_region(sig):
    """``{region: vCPUs}`` the SIG reserves."""
    out = {}
    for vnf in sig.vnfs:
        out[vnf.region] = out.get(vnf.region, 0) + vnf.vcpus
    return out
