"""Calling the flavor's policy hook: build its :class:`Observation`, order what it returns.

A region's history holds its points taken after the region's last started
change (scale, consolidation, heal), at most :data:`HISTORY_SAMPLES`, the
current pass last. The hook's decisions are checked and ordered by urgency:
scale out first (the region with the lowest predicted MOS first), then scale
in, then consolidation; the IM carries out one per vCDN per pass.
"""
import logging

from cdnaas.im.observation import (SCALE_KINDS, HostState, Observation, RegionSample, RegionState,
                                   VnfState)

LOG = logging.getLogger(__name__)

#: most samples of a region handed to the policy
HISTORY_SAMPLES = 60


def decisions_for(now, observed, changed, hosts_now, host_power):
    """The checked, ordered :class:`ScaleDecision` list of the flavor's policy for
    ``observed`` (``changed``: ``{region: when}`` of its latest started changes)."""
    observation = observe(now, observed, changed, hosts_now, host_power)
    found = []
    caches = {r.name: len(r.caches) for r in observation.regions}
    for decision in observed.flavor.plugin.policy(observation):
        if decision.kind not in SCALE_KINDS or decision.region not in caches \
                or decision.caches == caches[decision.region]:
            LOG.warning("vCDN %s: ignoring an invalid decision of flavor %s's policy: %s",
                        observed.vcdn["id"], observed.vcdn["flavor"], decision)
            continue
        found.append(decision)
    urgency = {kind: index for index, kind in enumerate(SCALE_KINDS)}
    return sorted(found, key=lambda d: (urgency[d.kind], _last_mos(observation, d.region)))


def observe(now, observed, changed, hosts_now, host_power):
    """The :class:`Observation` of one vCDN (a reconcile ``Seen``, its ``history`` ending
    with this pass) at this pass; ``changed`` as for :func:`decisions_for`."""
    vcdn_id = observed.vcdn["id"]
    regions = []
    for requested in observed.vcdn["regions"]:
        name = requested["name"]
        since = changed.get(name)
        points = [p for p in observed.history.get(name, ())
                  if since is None or p.at > since][-HISTORY_SAMPLES:]
        regions.append(RegionState(
            name=name, quality=requested["quality"], changed_at=since,
            vnfs=[VnfState(name=r.name, role=r.role, host=r.host, vcpus=r.vcpus,
                           healthy=r.healthy)
                  for r in observed.readings if r.region == name],
            history=[RegionSample(at=p.at, viewers=p.viewers or 0.0, mos=p.mos,
                                  vcpus=p.vcpus or 0)
                     for p in points]))
    names = {r.name for r in regions}
    hosts = {h.name: HostState(name=h.name, region=h.region, vcpus=h.vcpus,
                               reserved_vcpus=h.reserved_vcpus, enabled=h.enabled,
                               idle_watts=h.idle_watts, peak_watts=h.peak_watts,
                               utilisation=host_power[h.name].utilisation)
             for h in hosts_now.values() if h.region in names}
    return Observation(vcdn_id=vcdn_id, now=now, template=observed.flavor.template,
                       model=observed.model, regions=regions, hosts=hosts)


def _last_mos(observation, region):
    state = next(r for r in observation.regions if r.name == region)
    last = state.history[-1].mos if state.history else None
    return last if last is not None else 5.0
