"""vCDN instances: validate a request, plan it with the flavor's plugin,
reserve its capacity and record the operation that will deploy, change or
remove it. Everything up to the operation record happens in one transaction:
a refused request leaves nothing behind."""
import dataclasses
import datetime as dt
import logging
import uuid

from sqlalchemy import and_, bindparam, or_, select
from sqlalchemy.orm import load_only

from cdnaas import delivery
from cdnaas.common import caching, clock, config, entry_points, errors, etags, plugins
from cdnaas.common.clients import SidrClient
from cdnaas.common.flavor import InsufficientCapacity, PlanRequest, RegionRequest
from cdnaas.common.origin_policy import accepted_origin
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.common.timeutil import aware, isoformat
from cdnaas.delivery import access
from cdnaas.so import capacity, hostname_checks, pricing, quotas, states, tls, webhooks
from cdnaas.so.changes import check_unique, parse_change, parse_time
from cdnaas.so.models import Instance, Operation, Region

LOG = logging.getLogger(__name__)

LIVE_STATES = ("SCHEDULED", "DEPLOYING", "ACTIVE", "UPDATING", "DELETING", "FAILED")
QUALITY_KINDS = ("min_mos", "response_time")
#: vCDNs a list answers by default, and at most
LIST_LIMIT, LIST_MAX = 100, 1000


# -- representations ---------------------------------------------------------

def instance_view(instance, now=None):
    """The API's view of ``instance`` (an :class:`Instance`, or its row:
    :func:`instance_row`) at ``now`` (default: the clock's)."""
    sig = ServiceInstanceGraph.from_record(instance.sig)
    endpoints = instance.region_endpoints or {}
    regions = []
    for requested in instance.regions:
        caches = sig.vnfs_in(requested["name"], "cache")
        regions.append({**requested, "caches": len(caches),
                        "cache_vcpus": sum(c.vcpus for c in caches),
                        "vcpus": sum(v.vcpus for v in sig.vnfs_in(requested["name"])),
                        "load_balancer": endpoints.get(requested["name"])})
    return {"id": instance.id, "name": instance.name, "tenant": instance.tenant,
            "flavor": instance.flavor, "template_version": instance.template_version,
            "origin": instance.origin, "state": instance.state,
            "state_reason": instance.state_reason,
            "lease": {"start": isoformat(instance.lease_start), "end": isoformat(instance.lease_end)},
            "regions": regions, "entry_point": _entry_point(instance, sig),
            **tls.view(instance.service, now or clock.now()),
            "custom_hostnames": hostname_checks.view(instance.id, instance.service, sig.hostname),
            "cache_rules": caching.cache_rules((instance.service or {}).get("cache_rules")),
            **delivery.view(instance.service),
            "revision": instance.revision,
            "created_at": isoformat(instance.created_at), "updated_at": isoformat(instance.updated_at)}


#: the columns of a brief view (:func:`brief_view`)
BRIEF_COLUMNS = (Instance.id, Instance.name, Instance.tenant, Instance.flavor,
                 Instance.template_version, Instance.state, Instance.regions,
                 Instance.lease_start, Instance.lease_end, Instance.revision,
                 Instance.created_at)


def brief_view(instance):
    """What the Instance Manager reads of a vCDN each pass (``brief=true`` lists): its
    id, name, tenant, flavor, state, lease, regions as requested (``name``, ``demand``,
    ``quality``) and revision; nothing drawn from its SIG or service settings, which a
    full :func:`instance_view` works out for every vCDN listed."""
    return {"id": instance.id, "name": instance.name, "tenant": instance.tenant,
            "flavor": instance.flavor, "template_version": instance.template_version,
            "state": instance.state,
            "lease": {"start": isoformat(instance.lease_start),
                      "end": isoformat(instance.lease_end)},
            "regions": instance.regions, "revision": instance.revision}


def _entry_point(instance, sig):
    """RO's entry point of a deployed vCDN; before its deployment (SCHEDULED, DEPLOYING)
    the hostname it was planned with and its name servers' names, known at creation so
    that customers can set their CNAMEs in advance, without addresses yet (RO publishes
    them in the operator's zone when it deploys)."""
    if instance.entry_point is None and instance.state in (states.SCHEDULED, states.DEPLOYING):
        return entry_points.planned(sig)
    return instance.entry_point


def operation_view(operation):
    return {"id": operation.id, "vcdn_id": operation.instance_id, "type": operation.type,
            "state": operation.state, "steps": operation.steps, "error": operation.error,
            "reason": operation.reason, "request": operation.request,
            "created_at": isoformat(operation.created_at),
            "updated_at": isoformat(operation.updated_at)}


def signed_url(instance, body):
    """A URL of ``instance`` signed as ``body`` asks (:func:`cdnaas.delivery.access.sign`):
    ``{url, path, query, expires, key_id}``, on the vCDN's hostname (HTTPS where it has a
    certificate).

    :raises BadRequest: naming the field refused, or ``access`` without signed URLs.
    """
    signed = access.sign((instance.service or {}).get(access.FIELD), body)
    scheme = "https" if tls.tls_of(instance.service) else "http"
    hostname = ServiceInstanceGraph.from_record(instance.sig).hostname
    return {"url": f"{scheme}://{hostname}{signed['path']}?{signed['query']}", **signed}


def get_instance(session, instance_id):
    instance = session.get(Instance, instance_id)
    if instance is None:
        raise errors.NotFound(f"no vCDN {instance_id}", field="vcdn_id")
    return instance


#: a vCDN's row by id, every column, for :func:`instance_view` (built once)
_ROW = select(*Instance.__table__.columns).where(Instance.id == bindparam("instance_id"))


def instance_row(session, instance_id):
    """The row of vCDN ``instance_id`` read without making an ORM object (a third of a
    GET's cost in SO): what :func:`instance_view` takes, not to be changed.

    :raises NotFound: no such vCDN.
    """
    found = session.connection().execute(_ROW, {"instance_id": instance_id}).first()
    if found is None:
        raise errors.NotFound(f"no vCDN {instance_id}", field="vcdn_id")
    return found


def get_operation(session, operation_id):
    operation = session.get(Operation, operation_id)
    if operation is None:
        raise errors.NotFound(f"no operation {operation_id}", field="operation_id")
    return operation


def list_operations(session, instance_id, limit=None, marker=None):
    """One page of the vCDN's operations, oldest first, and the next page's marker (as
    :func:`list_instances`)."""
    get_instance(session, instance_id)
    return _page(session, Operation, select(Operation).where(Operation.instance_id == instance_id),
                 limit, marker, lambda last: last.instance_id == instance_id)


def list_instances(session, tenant=None, state=None, name=None, limit=None, marker=None,
                   include_deleted=False, brief=False):
    """One page of vCDNs, oldest first (by creation time, then id), and the marker of the
    next page (None: this is the last).

    DELETED vCDNs are left out unless ``include_deleted`` or ``state`` is DELETED.

    :param marker: the id of the last vCDN of the previous page.
    :param limit: at most this many (1 to :data:`LIST_MAX`; default :data:`LIST_LIMIT`).
    :param brief: read only the columns of :func:`brief_view`.
    :raises BadRequest: ``marker`` names no vCDN this list holds.
    """
    query = select(Instance)
    if brief:
        query = query.options(load_only(*BRIEF_COLUMNS))
    if tenant:
        query = query.where(Instance.tenant == tenant)
    if state:
        query = query.where(Instance.state == state)
    elif not include_deleted:
        query = query.where(Instance.state != states.DELETED)
    if name:
        query = query.where(Instance.name == name)
    return _page(session, Instance, query, limit, marker,
                 lambda last: not tenant or last.tenant == tenant)


def _page(session, model, query, limit, marker, visible):
    """Rows of ``query`` after the row ``marker`` in (created_at, id) order, at most ``limit``,
    and the marker of the next page (None: no more).

    :param visible: whether the marker's row belongs to this list.
    :raises BadRequest: the limit is out of range, or the marker is no row of this list.
    """
    limit = LIST_LIMIT if limit is None else limit
    if not 1 <= limit <= LIST_MAX:
        raise errors.BadRequest(f"limit must be from 1 to {LIST_MAX}", field="limit")
    if marker:
        last = session.get(model, marker)
        if last is None or not visible(last):
            raise errors.BadRequest(f"marker {marker} is not part of this list; start again "
                                    "without a marker", field="marker")
        query = query.where(or_(model.created_at > last.created_at,
                                and_(model.created_at == last.created_at, model.id > last.id)))
    found = session.scalars(query.order_by(model.created_at, model.id).limit(limit + 1)).all()
    return found[:limit], (found[limit - 1].id if len(found) > limit else None)


# -- validation --------------------------------------------------------------

def _lease(body, now):
    lease = body["lease"]
    start = parse_time(lease["start"], "lease.start") if lease.get("start") else now
    end = parse_time(lease["end"], "lease.end")
    start = max(start, now)
    if end <= start:
        raise errors.BadRequest(f"lease.end ({isoformat(end)}) must be after lease.start "
                                f"({isoformat(start)}); extend the end or move the start",
                                field="lease.end")
    return start, end


def _check_quality(regions, template):
    accepted = template.get("quality_targets", list(QUALITY_KINDS))
    for index, region in enumerate(regions):
        kinds = [k for k in QUALITY_KINDS if k in region.get("quality", {})]
        field = f"regions[{index}].quality"
        if len(kinds) != 1:
            raise errors.BadRequest(f"{field} must hold exactly one target: min_mos (e.g. 4.0) "
                                    "or response_time {percentile, max_ms}", field=field)
        if kinds[0] not in accepted:
            raise errors.Unprocessable(f"flavor {template['flavor']} honours {', '.join(accepted)}"
                                       f" targets, not {kinds[0]}", field=field)


def _load_flavor(flavor):
    try:
        template = SidrClient().get_template(flavor).document
    except errors.NotFound as exc:
        offered = ", ".join(sorted({t.flavor for t in SidrClient().list_templates()
                                    if not t.deprecated})) or "none"
        raise errors.Unprocessable(f"flavor {flavor} is not offered ({exc.message}); "
                                   f"offered: {offered}", field="flavor") from None
    try:
        return template, plugins.load(plugins.FLAVORS, template["plugin"])
    except LookupError as exc:
        raise errors.Unprocessable(f"flavor {flavor} is not available: {exc}",
                                   field="flavor") from None


def _regions(session, requested):
    rows = {r.name: r for r in session.scalars(
        select(Region).where(Region.name.in_([r["name"] for r in requested])))}
    unknown = [r["name"] for r in requested if r["name"] not in rows]
    if unknown:
        known = ", ".join(session.scalars(select(Region.name).order_by(Region.name))) or "none"
        index = [r["name"] for r in requested].index(unknown[0])
        raise errors.Unprocessable(f"unknown region(s) {', '.join(unknown)}; regions: {known}",
                                   field=f"regions[{index}].name")
    return rows


def _default_region(session, requested):
    operator_default = session.scalar(select(Region.name).where(Region.is_default.is_(True)))
    names = [r["name"] for r in requested]
    return operator_default if operator_default in names else names[0]


# -- planning ----------------------------------------------------------------

def _plan(session, plugin, template, instance_id, hostname, origin, requested, window,
          exclude_instance=None, hook="plan", service=None):
    """Run the plugin's ``hook`` (``plan``: a checked SIG; ``quote``: its description)
    over the free capacity of the window, with the region's hosts locked; ``service``:
    the SIG's service options (:func:`cdnaas.so.tls.sig_service`)."""
    rows = _regions(session, requested)
    hosts = capacity.lock_hosts(session, list(rows))
    free = capacity.free_capacity(session, hosts, *window, exclude_instance=exclude_instance)
    request = PlanRequest(
        vcdn_id=instance_id, hostname=hostname, origin=origin,
        default_region=_default_region(session, requested), template=template,
        regions=[RegionRequest(name=r["name"], demand=r["demand"], quality=r["quality"],
                               zone=rows[r["name"]].zone, vim_region=rows[r["name"]].vim_region,
                               client_prefixes=rows[r["name"]].client_prefixes,
                               hosts=free.get(r["name"], []))
                 for r in requested],
        service=service or {})
    try:
        outcome = getattr(plugin, hook)(request)
    except InsufficientCapacity as exc:
        raise errors.Conflict(f"not enough capacity: region {exc.region} lacks "
                              f"{exc.missing_vcpus} vCPUs (the plan needs {exc.needed_vcpus}); "
                              "lower the demand or pick another region or time",
                              field="regions",
                              details=[{"field": "regions", "region": exc.region,
                                        "missing_vcpus": exc.missing_vcpus,
                                        "problem": str(exc)}]) from None
    if hook == "plan":
        capacity.check_fits(free, outcome)
        ServiceInstanceGraph.from_dict(outcome.to_dict())  # the plugin's output obeys the schema
    return outcome


def new_operation(instance_id, kind, reason=None, previous_sig=None, previous_lease_end=None):
    """A PENDING operation of ``kind`` with its steps (:data:`states.STEPS`); the plan
    and reservation, done in the transaction that creates it, is already complete."""
    return Operation(id=str(uuid.uuid4()), instance_id=instance_id, type=kind, state="PENDING",
                     steps=[{"name": s, "state": "COMPLETED" if s == states.PLAN else "PENDING",
                             "done": int(s == states.PLAN), "total": 1}
                            for s in states.STEPS[kind]],
                     reason=reason, previous_sig=previous_sig,
                     previous_lease_end=previous_lease_end)


def _accept(tenant, body, now):
    """What every request for a new vCDN is checked for; ``(origin, window, template, plugin)``."""
    origin = accepted_origin(body["origin"])
    window = _lease(body, now)
    check_unique([r["name"] for r in body["regions"]], "regions")
    template, plugin = _load_flavor(body["flavor"])
    _check_quality(body["regions"], template)
    return origin, window, template, plugin


#: the name a quote without one is planned under (only its SIG's hostname sees it)
QUOTE_NAME = "quote"


def _hostname(tenant, body):
    return f"{body.get('name', QUOTE_NAME)}.{tenant}.{config.dns_domain()}"


def create(database, tenant, body, now=None):
    """Validate, plan and reserve a new vCDN; return ``(instance, operation, start_now)``.

    :raises BadRequest/Conflict/Unprocessable: nothing was written.
    """
    now = now or clock.now()
    origin, window, template, plugin = _accept(tenant, body, now)
    hostnames, bundle, managed = tls.accept(body, _hostname(tenant, body), now)
    rules = caching.stored_rules(body.get("cache_rules"))
    options = delivery.accept(body)
    tls.check_policy_served(options, bundle is not None, body)
    instance_id = str(uuid.uuid4())
    lead = dt.timedelta(seconds=config.setting("CDNAAS_DEPLOY_LEAD_SECONDS"))
    start_now = window[0] - lead <= now
    with tls.Stored(instance_id) as stored, database.transaction() as session:
        clash = session.scalar(select(Instance.id).where(
            Instance.tenant == tenant, Instance.name == body["name"],
            Instance.state.in_(LIVE_STATES)))
        if clash:
            raise errors.Conflict(f"you already have a vCDN named {body['name']} ({clash}); "
                                  "pick another name or delete it first", field="name")
        tls.check_unclaimed(session, hostnames, instance_id, LIVE_STATES)
        quotas.lock_tenant(session, tenant)
        quotas.check(session, tenant, {"vcdns": 1, "hostnames": len(hostnames)}, now)
        service = caching.with_rules(tls.record(options, hostnames, stored.keep(bundle)
                                                if bundle else None, managed), rules)
        sig = _plan(session, plugin, template, instance_id, _hostname(tenant, body), origin,
                    body["regions"], window, service=tls.sig_service(service))
        quotas.check(session, tenant, {"vcpus_per_region": quotas.vcpus_per_region(sig)}, now)
        instance = Instance(
            id=instance_id, tenant=tenant, name=body["name"], flavor=template["flavor"],
            template_version=template["version"], origin=origin.url,
            regions=[{"name": r["name"], "demand": r["demand"], "quality": r["quality"]}
                     for r in body["regions"]],
            lease_start=window[0], lease_end=window[1],
            state="DEPLOYING" if start_now else "SCHEDULED", sig=sig.to_dict(),
            service=service or None)
        session.add(instance)
        session.flush()
        capacity.reserve(session, instance_id, sig, *window)
        operation = new_operation(instance_id, states.INSTANTIATE, reason="customer")
        session.add(operation)
    return instance, operation, start_now


def quote(database, tenant, body, now=None):
    """What ``create`` would plan and reserve for ``body``, its power, energy over the lease
    and price; nothing is written (the transaction is rolled back).

    :raises BadRequest/Conflict/Unprocessable: as ``create``.
    """
    now = now or clock.now()
    origin, window, template, plugin = _accept(tenant, body, now)
    with database.sessions() as session:
        try:
            described = _plan(session, plugin, template, "quote", _hostname(tenant, body),
                              origin, body["regions"], window, hook="quote")
        finally:
            session.rollback()  # releases the hosts' locks; nothing was written
    hours = (window[1] - window[0]).total_seconds() / 3600
    energy_kwh = described["power_watts"] * hours / 1000
    return {**described, "lease": {"start": isoformat(window[0]), "end": isoformat(window[1]),
                                   "hours": round(hours, 3)},
            "energy_kwh": round(energy_kwh, 3),
            "price": pricing.price(template["flavor"], described["vcpus"] * hours, energy_kwh)}


def update(database, instance_id, body, tenant=None, if_match=None, now=None,
           reason="customer", issued=False, verified=()):
    """Change an ACTIVE or SCHEDULED vCDN as ``body`` asks (:mod:`cdnaas.so.changes`);
    return ``(instance, operation)``.

    New regions, demands or qualities plan the vCDN again; a new origin alone keeps its
    VNFs (RO reconfigures them); a longer lease needs the VNFs' capacity over the
    new window. The reservations follow in the same transaction. A change that leaves
    the SIG as it was (a new lease end), or of a SCHEDULED vCDN, completes at once.

    :param if_match: the request's ``If-Match`` (None: no precondition).
    :param reason: recorded with the operation (SO's own renewals give theirs).
    :param issued: the body's certificate is a managed one SO obtained
        (:func:`cdnaas.so.tls.change`).
    :param verified: customer hostnames SO saw pointing at the vCDN, now served
        (:mod:`cdnaas.so.hostname_checks`).
    :raises PreconditionFailed: ``if_match`` is not the vCDN's current ETag.
    :raises BadRequest/Conflict/Unprocessable: nothing was written.
    """
    now = now or clock.now()
    with tls.Stored(instance_id) as stored, database.transaction() as session:
        instance = _owned(session, instance_id, tenant, lock=True)
        etags.check_if_match(if_match, instance.revision)
        if instance.state not in (states.ACTIVE, states.SCHEDULED):
            raise errors.Conflict(f"vCDN {instance_id} is {instance.state}; it can change only "
                                  "when ACTIVE or SCHEDULED", field="vcdn_id")
        old_sig = ServiceInstanceGraph.from_record(instance.sig)
        start = aware(instance.lease_start)
        change = parse_change(body, instance.regions, old_sig.origin, start,
                              aware(instance.lease_end),
                              set(session.scalars(select(Region.name))), now)
        template, plugin = _load_flavor_version(instance)
        _check_quality(change.regions, template)
        service, superseded = tls.change(instance.service, body, old_sig.hostname, now, stored,
                                         issued)
        if verified:
            service = tls.record_verified(service, verified)
        if "cache_rules" in body:  # replaced whole
            service = caching.with_rules(service, caching.stored_rules(body["cache_rules"]))
        service = delivery.accept(body, service)
        tls.check_policy_served(service, tls.tls_of(service) is not None, body)
        tls.check_unclaimed(session, tls.hostnames_of(service), instance.id, LIVE_STATES)
        quotas.lock_tenant(session, instance.tenant)
        window = (start, change.lease_end)
        if change.replan:
            sig = _plan(session, plugin, template, instance.id, old_sig.hostname, change.origin,
                        change.regions, window, exclude_instance=instance.id,
                        service=tls.sig_service(service))
            _check_growth(session, instance, old_sig, sig, service, now)
        else:
            sig = dataclasses.replace(old_sig, origin=change.origin,
                                      service=tls.sig_service(service))
            _check_growth(session, instance, old_sig, sig, service, now)
            if change.lease_end > aware(instance.lease_end):
                capacity.check_room(session, sig, *window, exclude_instance=instance.id)
        applies = instance.state == states.ACTIVE and sig.digest() != old_sig.digest()
        capacity.reserve(session, instance.id, sig, *window, also=old_sig if applies else None)
        operation = new_operation(instance.id, states.UPDATE, reason=reason,
                                  previous_sig=instance.sig, previous_lease_end=instance.lease_end)
        instance.regions = change.regions
        instance.origin = change.origin.url
        instance.lease_end = change.lease_end
        instance.sig = sig.to_dict()
        instance.service = service or None
        instance.revision += 1
        if applies:
            instance.state = states.UPDATING
        else:  # nothing to deploy: a SCHEDULED vCDN, or the same SIG
            operation.state = states.COMPLETED
            for step in operation.steps:
                step.update(state=states.COMPLETED if step["state"] == states.COMPLETED
                            else states.SKIPPED)
        session.add(operation)
    if superseded and operation.state == states.COMPLETED:  # no SIG runs it any more
        tls.release(superseded, why=f"vCDN {instance_id} got a new certificate")
    return instance, operation


def _check_growth(session, instance, old_sig, sig, service, now):
    """Check the quotas a change of ``instance`` from ``old_sig`` to ``sig`` (with
    ``service``) grows: only what it adds to counts, so a change never fails a quota
    lowered below what the vCDN already holds unless it takes more."""
    before, after = quotas.vcpus_per_region(old_sig), quotas.vcpus_per_region(sig)
    grows = {}
    hostnames = len(tls.hostnames_of(service))
    if hostnames > len(tls.hostnames_of(instance.service)):
        grows["hostnames"] = hostnames
    grown = {region: vcpus for region, vcpus in after.items() if vcpus > before.get(region, 0)}
    if grown:
        grows["vcpus_per_region"] = grown
    if grows:
        quotas.check(session, instance.tenant, grows, now, exclude_instance=instance.id)


#: ``{(flavor, version): document}`` of the templates this process's vCDNs were last
#: changed with: SIDR refuses to delete a version a vCDN uses, so while SIDR restarts a
#: change to such a vCDN goes on with the copy read before
_TEMPLATES_SEEN = {}


def _template_of(instance):
    """The document of the template version ``instance`` runs, from SIDR, or the copy read
    before when SIDR is unreachable (:data:`_TEMPLATES_SEEN`).

    :raises UpstreamError: SIDR is unreachable and no copy was read before.
    """
    key = (instance.flavor, instance.template_version)
    try:
        document = SidrClient().get_template(*key).document
    except errors.UpstreamError as exc:
        if key not in _TEMPLATES_SEEN:
            raise
        LOG.warning("%s; vCDN %s changes with the copy of %s version %s read before",
                    exc.message, instance.id, *key)
        return _TEMPLATES_SEEN[key]
    _TEMPLATES_SEEN[key] = document
    return document


def _load_flavor_version(instance):
    document = _template_of(instance)
    try:
        return document, plugins.load(plugins.FLAVORS, document["plugin"])
    except LookupError as exc:
        raise errors.Unprocessable(f"flavor {instance.flavor} is not available: {exc}",
                                   field="flavor") from None


def terminate(database, instance_id, tenant=None, reason="customer", if_match=None):
    """Start removing a vCDN; return ``(instance, operation)``.

    A SCHEDULED vCDN has nothing deployed: it ends at once. A vCDN busy with
    another operation answers 409 (wait for that operation).

    :raises PreconditionFailed: ``if_match`` is not the vCDN's current ETag.
    """
    with database.transaction() as session:
        instance = _owned(session, instance_id, tenant, lock=True)
        etags.check_if_match(if_match, instance.revision)
        if instance.state in states.BUSY:
            busy = session.scalar(select(Operation.id).where(
                Operation.instance_id == instance.id,
                Operation.state.in_(("PENDING", "PROCESSING"))))
            raise errors.Conflict(f"vCDN {instance_id} is {instance.state} (operation {busy}); "
                                  "delete it once that operation ends", field="vcdn_id")
        if instance.state == "DELETED":
            raise errors.Conflict(f"vCDN {instance_id} is already deleted", field="vcdn_id")
        operation = new_operation(instance.id, states.TERMINATE, reason=reason)
        instance.revision += 1
        if instance.state == "SCHEDULED":
            _cancel_scheduled(session, instance, operation)
        else:
            instance.state = "DELETING"
            instance.state_reason = reason
        session.add(operation)
    if instance.state == "DELETED" and tls.tls_of(instance.service):
        try:  # nothing was deployed: its certificate goes now
            tls.release_all(instance.id)
        except errors.CdnaasError as exc:
            LOG.warning("secrets of cancelled vCDN %s are left in RO: %s", instance.id, exc)
    return instance, operation


def _cancel_scheduled(session, instance, operation):
    capacity.release(session, instance.id)
    for pending in session.scalars(select(Operation).where(
            Operation.instance_id == instance.id, Operation.state == "PENDING")):
        pending.state, pending.error = "ROLLED_BACK", "cancelled before the lease started"
    instance.state, instance.state_reason = "DELETED", "cancelled before the lease started"
    operation.state = "COMPLETED"
    operation.steps = [{**s, "state": "SKIPPED"} for s in operation.steps]
    webhooks.operation_ended(session, instance.tenant, operation)


def _owned(session, instance_id, tenant, lock=False):
    """The vCDN ``instance_id`` (of ``tenant`` when given); ``lock``: its row locked until
    the transaction ends, so two changes of it never both pass the same precondition.

    :raises NotFound: no such vCDN (or another tenant's).
    """
    instance = session.get(Instance, instance_id, with_for_update=lock)
    if instance is None or (tenant and instance.tenant != tenant):
        raise errors.NotFound(f"no vCDN {instance_id}", field="vcdn_id")
    return instance
