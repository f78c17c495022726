"""Calling the flavor's policy hook: build its :class:`Observation`, order what it returns.

A region's history holds its points taken after the region's last started
change (scale, consolidation, heal), at most :data:`HISTORY_SAMPLES`, the
current pass last. The hook's decisions are checked and ordered by urgency:
scale out first (the region with the lowest predicted MOS first), then scale
in, then consolidation; the IM carries out one per vCDN per pass.
"""
import logging
import types

from cdnaas.im.observation import (SCALE_KINDS, HostState, Observation, RegionSample, RegionState,
                                   VnfState)

LOG = logging.getLogger(__name__)

#: most samples of a region handed to the policy
HISTORY_SAMPLES = 60


class HostStates:
    """Every host's :class:`HostState` at this pass, as the policies see the hosts of their
    vCDN's regions: built once a pass, each set of regions' mapping shared (read only)."""

    def __init__(self, hosts_now, host_power):
        self._by_region, self._views = {}, {}
        for h in hosts_now.values():
            self._by_region.setdefault(h.region, {})[h.name] = HostState(
                name=h.name, region=h.region, vcpus=h.vcpus, reserved_vcpus=h.reserved_vcpus,
                enabled=h.enabled, idle_watts=h.idle_watts, peak_watts=h.peak_watts,
                utilisation=host_power[h.name].utilisation)

    def of(self, regions):
        """``{host: HostState}`` of the hosts in ``regions`` (read only)."""
        key = frozenset(regions)
        if key not in self._views:
            self._views[key] = types.MappingProxyType(
                {name: state for region in sorted(key)
                 for name, state in self._by_region.get(region, {}).items()})
        return self._views[key]


def decisions_for(now, observed, changed, hosts_now, host_power, states=None):
    """The checked, ordered :class:`ScaleDecision` list of the flavor's policy for
    ``observed`` (``changed``: ``{region: when}`` of its latest started changes;
    ``states``: the pass's :class:`HostStates` of ``hosts_now`` and ``host_power``, made
    here when not given)."""
    observation = observe(now, observed, changed, states or HostStates(hosts_now, host_power))
    found = []
    caches = {r.name: len(r.caches) for r in observation.regions}
    for decision in observed.flavor.plugin.policy(observation):
        if decision.kind not in SCALE_KINDS or decision.region not in caches \
                or decision.caches == caches[decision.region]:
            LOG.warning("vCDN %s: ignoring an invalid decision of flavor %s's policy: %s",
                        observed.vcdn.id, observed.vcdn.flavor, decision)
            continue
        found.append(decision)
    urgency = {kind: index for index, kind in enumerate(SCALE_KINDS)}
    return sorted(found, key=lambda d: (urgency[d.kind], _last_mos(observation, d.region)))


def observe(now, observed, changed, states):
    """The :class:`Observation` of one vCDN (a reconcile ``Seen``, its ``history`` ending
    with this pass) at this pass; ``changed`` as for :func:`decisions_for`, ``states`` the
    pass's :class:`HostStates`."""
    vcdn_id = observed.vcdn.id
    regions = []
    for requested in observed.vcdn.regions:
        name = requested.name
        since = changed.get(name)
        points = [p for p in observed.history.get(name, ())
                  if since is None or p.at > since][-HISTORY_SAMPLES:]
        regions.append(RegionState(
            name=name, quality=requested.quality, changed_at=since,
            vnfs=[VnfState(name=r.name, role=r.role, host=r.host, vcpus=r.vcpus,
                           healthy=r.healthy)
                  for r in observed.readings if r.region == name],
            history=[RegionSample(at=p.at, viewers=p.viewers or 0.0, mos=p.mos,
                                  vcpus=p.vcpus or 0)
                     for p in points]))
    return Observation(vcdn_id=vcdn_id, now=now, template=observed.flavor.template,
                       model=observed.model, regions=regions,
                       hosts=states.of(r.name for r in regions))


def _last_mos(observation, region):
    state = next(r for r in observation.regions if r.name == region)
    last = state.history[-1].mos if state.history else None
    return last if last is not None else 5.0
