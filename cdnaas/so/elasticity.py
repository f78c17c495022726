"""Run-time changes the Instance Manager asks for: scale a region's caches, heal a cache.

Each builds a new SIG from the current one, places what is new on the region's
free hosts, reserves it in the same transaction as the UPDATE operation that
will have RO apply it (RO drains removed caches before stopping them).
"""
import collections
import dataclasses
import re

from cdnaas.common import errors
from cdnaas.common.flavor import InsufficientCapacity
from cdnaas.planning.placement import Instance, place
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.common.timeutil import aware
from cdnaas.so import capacity
from cdnaas.so.instances import _load_flavor_version, _new_operation, _owned

_INDEX = re.compile(r"-(\d+)$")


def scale(database, instance_id, region, caches, reason):
    """Bring ``region`` of an ACTIVE vCDN to ``caches`` caches; return ``(instance, operation)``.

    :raises Conflict: the vCDN is busy, or the region's hosts lack capacity.
    :raises Unprocessable: unknown region, or a count outside the template's bounds.
    """
    with database.transaction() as session:
        instance = _active(session, instance_id)
        sig = ServiceInstanceGraph.from_dict(instance.sig)
        if region not in {r.name for r in sig.regions}:
            raise errors.Unprocessable(f"region {region} is not part of vCDN {instance_id}",
                                       field="region")
        bounds = _load_flavor_version(instance)[0]["vnfs"]["cache"]["instances"]
        if not bounds["min"] <= caches <= bounds["max"]:
            raise errors.Unprocessable(f"the flavor allows {bounds['min']} to {bounds['max']} "
                                       f"caches per region, not {caches}", field="caches")
        current = sig.vnfs_in(region, "cache")
        if caches > len(current):
            new = _grow(sig, region, current, caches - len(current))
            _place(session, instance, sig, region, new)
        elif caches < len(current):
            for vnf in _to_remove(sig, region, current, len(current) - caches):
                sig.vnfs.remove(vnf)
        return _apply(session, instance, sig, reason)


def heal(database, instance_id, vnf_name, reason):
    """Replace cache ``vnf_name`` by a new one on the same host; return ``(instance, operation)``."""
    with database.transaction() as session:
        instance = _active(session, instance_id)
        sig = ServiceInstanceGraph.from_dict(instance.sig)
        sick = next((v for v in sig.vnfs if v.name == vnf_name), None)
        if sick is None or sick.role != "cache":
            raise errors.Unprocessable(f"{vnf_name} is not a cache of vCDN {instance_id}; "
                                       "only caches are replaced", field="vnf")
        fresh = dataclasses.replace(sick, name=_next_name(sig, sick.region))
        sig.vnfs[sig.vnfs.index(sick)] = fresh
        return _apply(session, instance, sig, reason)


def _active(session, instance_id):
    instance = _owned(session, instance_id, None)
    if instance.state != "ACTIVE":
        raise errors.Conflict(f"vCDN {instance_id} is {instance.state}; it changes only when "
                              "ACTIVE", field="vcdn_id")
    return instance


def _next_name(sig, region):
    used = [int(m.group(1)) for v in sig.vnfs_in(region, "cache")
            if (m := _INDEX.search(v.name))]
    return f"{region}-cache-{max(used, default=-1) + 1}"


def _grow(sig, region, current, count):
    """Append ``count`` caches shaped like the region's existing ones (host chosen later)."""
    new = []
    for _ in range(count):
        vnf = dataclasses.replace(current[0], name=_next_name(sig, region), host=None)
        sig.vnfs.append(vnf)
        new.append(vnf)
    return new


def _to_remove(sig, region, current, count):
    """Caches to drop: from the hosts carrying the fewest of the region's VNFs, so whole
    hosts empty (and can power down); newest first among equals."""
    load = collections.Counter(v.host for v in sig.vnfs_in(region))
    ranked = sorted(current, key=lambda v: (load[v.host], -_number(v.name)))
    return ranked[:count]


def _number(name):
    match = _INDEX.search(name)
    return int(match.group(1)) if match else 0


def _place(session, instance, sig, region, new):
    window = (aware(instance.lease_start), aware(instance.lease_end))
    hosts = capacity.lock_hosts(session, [region])
    free = capacity.free_capacity(session, hosts, *window).get(region, [])
    try:
        placed = place(region, [Instance(v.name, v.vcpus, v.ram_mb) for v in new], free)
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
    operation = _new_operation(instance.id, "UPDATE", ["plan and reserve", "apply", "serve"],
                               reason=reason, previous_sig=instance.sig)
    operation.steps[0].update(state="COMPLETED", done=1)
    capacity.reserve(session, instance.id, sig, aware(instance.lease_start),
                     aware(instance.lease_end))
    instance.sig = sig.to_dict()
    instance.state = "UPDATING"
    session.add(operation)
    return instance, operation
