"""Power-down marks: which empty hosts may be switched off, and waking them before they are needed.

The IM does not switch hosts itself: a mark (table ``im_hosts``, the
operator's ``GET /api/v1/hosts/power``) tells the operator, or its power
manager, which hosts carry nothing and are not needed. Each pass, per region:

- a host carrying reservations, or holding VNFs of a vCDN whose lease starts
  within ``CDNAAS_IM_WAKE_LEAD_SECONDS`` (default 600), is needed: a mark
  on it is lifted (``power_up``);
- when the spare vCPUs of the region's awake hosts fall below the region's
  headroom, the biggest marked host is woken (``power_up``), so a scale out
  finds room; the headroom is the biggest cache of the region's vCDNs, at
  least ``CDNAAS_IM_HEADROOM_VCPUS`` (default 4);
- an empty host is marked (``power_down``) when the region keeps its headroom
  without it.

Each change is recorded as a decision with its figures.
"""
import dataclasses

from sqlalchemy import select

from cdnaas.common import config
from cdnaas.im import decisions
from cdnaas.im.models import HostMark

POWER_DOWN = "power_down"
ON = "on"


@dataclasses.dataclass(frozen=True)
class Change:
    """A mark to set on ``host``, and why."""

    host: object  # cdnaas.im.inventory.Host
    state: str
    reason: str
    details: dict


def marks(session):
    """``{host name: HostMark}`` of every host ever marked."""
    return {mark.name: mark for mark in session.scalars(select(HostMark))}


def plan(inventory, marked, needed, cache_sizes):
    """The :class:`Change` list for this pass (see the module docstring).

    :param inventory: ``{name: Host}`` from SO.
    :param marked: names of the hosts marked ``power_down`` now.
    :param needed: ``{host name: why}`` of hosts soon needed by a starting lease.
    :param cache_sizes: ``{region: vCPUs of its biggest cache}`` over its vCDNs.
    """
    changes = []
    floor = int(config.float_setting("CDNAAS_IM_HEADROOM_VCPUS", 4))
    for region in sorted({h.region for h in inventory.values()}):
        hosts = sorted((h for h in inventory.values() if h.region == region and h.enabled),
                       key=lambda h: h.name)
        headroom = max(floor, cache_sizes.get(region, 0))
        down = {h.name for h in hosts if h.name in marked}
        for host in hosts:
            if host.name in down and (host.reserved_vcpus or host.name in needed):
                why = needed.get(host.name) or f"{host.reserved_vcpus} vCPUs are reserved on it"
                down.discard(host.name)
                changes.append(Change(host, ON, why, {"reserved_vcpus": host.reserved_vcpus}))
        spare = sum(h.free_vcpus for h in hosts if h.name not in down)
        woken = sorted((h for h in hosts if h.name in down), key=lambda h: (-h.vcpus, h.name))
        while spare < headroom and woken:
            host = woken.pop(0)
            down.discard(host.name)
            changes.append(Change(host, ON, f"the region's awake hosts have {spare} spare vCPUs, "
                                  f"below its headroom of {headroom}",
                                  {"spare_vcpus": spare, "headroom_vcpus": headroom}))
            spare += host.free_vcpus
        for host in hosts:
            empty = not host.reserved_vcpus and host.name not in needed
            if host.name in down or not empty or spare - host.vcpus < headroom:
                continue
            spare -= host.vcpus
            down.add(host.name)
            changes.append(Change(host, POWER_DOWN,
                                  f"carries nothing; the region keeps {spare} spare vCPUs on its "
                                  f"awake hosts (headroom {headroom})",
                                  {"spare_vcpus": spare, "headroom_vcpus": headroom,
                                   "idle_watts_saved": host.idle_watts}))
    return changes


def apply(database, now, changes):
    """Store each change's mark and record it as a decision; return the decisions."""
    with database.transaction() as session:
        for change in changes:
            mark = session.get(HostMark, change.host.name)
            if mark is None:
                mark = HostMark(name=change.host.name)
                session.add(mark)
            mark.region, mark.state = change.host.region, change.state
            mark.reason, mark.changed_at = change.reason, now
    return [decisions.record(database, now, POWER_DOWN if c.state == POWER_DOWN else "power_up",
                             "marked", c.reason, c.details, region=c.host.region, host=c.host.name)
            for c in changes]
