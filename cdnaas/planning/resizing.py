"""How a running vCDN's SIG changes: a region's caches resized, a cache replaced.

The rules alone, on the SIG in memory: SO (:mod:`cdnaas.so.elasticity`) applies
them with its reservations, the Instance Manager's simulated plant
(:mod:`tests.support.plant`) with its own hosts, so both change a vCDN alike.
"""
import collections
import dataclasses
import re

from cdnaas.common import errors

_INDEX = re.compile(r"-(\d+)$")


def resize(sig, region, caches, bounds):
    """Bring ``region`` of ``sig`` to ``caches`` caches, in place.

    New caches are shaped like the region's first and have no host yet; removed ones
    come off the hosts carrying the fewest of the region's VNFs, so whole hosts empty
    (and can power down), newest first among equals.

    :param bounds: the template's ``{"min", "max"}`` caches per region.
    :returns: the new caches, for the caller to place.
    :raises Unprocessable: ``caches`` is outside ``bounds``.
    """
    if not bounds["min"] <= caches <= bounds["max"]:
        raise errors.Unprocessable(f"the flavor allows {bounds['min']} to {bounds['max']} "
                                   f"caches per region, not {caches}", field="caches")
    current = sig.vnfs_in(region, "cache")
    new = []
    for _ in range(caches - len(current)):
        new.append(dataclasses.replace(current[0], name=_next_name(sig, region), host=None))
        sig.vnfs.append(new[-1])
    if caches < len(current):
        for vnf in removal_order(current, sig.vnfs_in(region))[:len(current) - caches]:
            sig.vnfs.remove(vnf)
    return new


def removal_order(caches, region_vnfs):
    """``caches`` in the order a scale in removes them: those on the host carrying the
    fewest of the region's VNFs (``region_vnfs``) first, the newest first among equals.
    The IM's policies predict which host a scale in empties by the same order."""
    load = collections.Counter(v.host for v in region_vnfs)
    return sorted(caches, key=lambda v: (load[v.host], -_number(v.name)))


def anchors(region_vnfs):
    """Hosts of ``region_vnfs`` carrying a VNF a scale in never removes (all but caches):
    new caches go there first when it costs nothing more
    (:func:`cdnaas.planning.placement.place`), so they are removed last."""
    return {v.host for v in region_vnfs if v.role != "cache"}


def replace(sig, vnf_name):
    """Put a cache of a new name on the host of cache ``vnf_name``, in place; return it.

    :raises Unprocessable: ``vnf_name`` is not a cache of ``sig``.
    """
    sick = next((v for v in sig.vnfs if v.name == vnf_name), None)
    if sick is None or sick.role != "cache":
        raise errors.Unprocessable(f"{vnf_name} is not a cache of vCDN {sig.vcdn_id}; "
                                   "only caches are replaced", field="vnf")
    fresh = dataclasses.replace(sick, name=_next_name(sig, sick.region))
    sig.vnfs[sig.vnfs.index(sick)] = fresh
    return fresh


def _next_name(sig, region):
    used = [int(m.group(1)) for v in sig.vnfs_in(region, "cache")
            if (m := _INDEX.search(v.name))]
    return f"{region}-cache-{max(used, default=-1) + 1}"


def _number(name):
    match = _INDEX.search(name)
    return int(match.group(1)) if match else 0
