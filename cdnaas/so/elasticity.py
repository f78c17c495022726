"""Run-time changes the Instance Manager asks for: scale a region's caches, heal a VNF.

Each builds a new SIG from the current one, places what is new on the region's
free hosts, reserves it in the same transaction as the UPDATE operation that
will have RO apply it (RO drains removed caches before stopping them).
"""
from cdnaas.common import errors
from cdnaas.common.flavor import InsufficientCapacity
from cdnaas.planning import resizing
from cdnaas.planning.placement import Instance, place
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.common.timeutil import aware
from cdnaas.so import capacity, states
from cdnaas.so.instances import _load_flavor_version, _owned, new_operation


def scale(database, instance_id, region, caches, reason):
    """Bring ``region`` of an ACTIVE vCDN to ``caches`` caches; return ``(instance, operation)``.

    :raises Conflict: the vCDN is busy, or the region's hosts lack capacity.
    :raises Unprocessable: unknown region, or a count outside the template's bounds.
    """
    with database.transaction() as session:
        instance = _active(session, instance_id)
        sig = ServiceInstanceGraph.from_record(instance.sig)
        if region not in {r.name for r in sig.regions}:
            raise errors.Unprocessable(f"region {region} is not part of vCDN {instance_id}",
                                       field="region")
        bounds = _load_flavor_version(instance)[0]["vnfs"]["cache"]["instances"]
        new = resizing.resize(sig, region, caches, bounds)
        if new:
            _place(session, instance, sig, region, new)
        return _apply(session, instance, sig, reason)


def heal(database, instance_id, vnf_name, reason, in_place=False):
    """Heal VNF ``vnf_name``; return ``(instance, operation)``. A cache is replaced by a new
    one on the same host, unless healed ``in_place``; any other VNF (a balancer or DNS VNF
    is an entry point, an origin shield is where the caches fetch) is healed in place: an
    UPDATE to the SIG the vCDN already runs, which RO answers by repairing what is not
    whole (mended where it runs while it answers, else rebuilt at its address).

    :raises Unprocessable: the vCDN has no VNF ``vnf_name``.
    """
    with database.transaction() as session:
        instance = _active(session, instance_id)
        sig = ServiceInstanceGraph.from_record(instance.sig)
        sick = next((v for v in sig.vnfs if v.name == vnf_name), None)
        if sick is None:
            raise errors.Unprocessable(f"vCDN {instance_id} has no VNF {vnf_name}", field="vnf")
        if sick.role == "cache" and not in_place:
            resizing.replace(sig, vnf_name)
        return _apply(session, instance, sig, reason)


def _active(session, instance_id):
    instance = _owned(session, instance_id, None)
    if instance.state != "ACTIVE":
        raise errors.Conflict(f"vCDN {instance_id} is {instance.state}; it changes only when "
                              "ACTIVE", field="vcdn_id")
    return instance


def _place(session, instance, sig, region, new):
    window = (aware(instance.lease_start), aware(instance.lease_end))
    hosts = capacity.lock_hosts(session, [region])
    free = capacity.free_capacity(session, hosts, *window).get(region, [])
    try:
        placed = place(region, [Instance(v.name, v.vcpus, v.ram_mb) for v in new], free,
                       anchors=resizing.anchors(sig.vnfs_in(region)))
    except InsufficientCapacity as exc:
        raise errors.Conflict(f"not enough capacity: region {region} lacks {exc.missing_vcpus} "
                              f"vCPUs for {len(new)} more cache(s)", field="caches",
                              details=[{"field": "caches", "region": region,
                                        "missing_vcpus": exc.missing_vcpus,
                                        "problem": str(exc)}]) from None
    for vnf in new:
        vnf.host = placed[vnf.name]


def _apply(session, instance, sig, reason):
    ServiceInstanceGraph.from_dict(sig.to_dict())
    operation = new_operation(instance.id, states.UPDATE, reason=reason,
                              previous_sig=instance.sig)
    capacity.reserve(session, instance.id, sig, aware(instance.lease_start),
                     aware(instance.lease_end), also=ServiceInstanceGraph.from_record(instance.sig))
    instance.sig = sig.to_dict()
    instance.state = "UPDATING"
    instance.revision += 1
    session.add(operation)
    return instance, operation
