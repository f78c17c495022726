"""Default elasticity policy of the ``qoe-video`` flavor: hold each region's MOS target
with the fewest caches, without flapping.

In the spirit of PowerSave (the power-proportional software router): two
thresholds with a dead band between them, counters of consecutive samples
before acting, and a cooldown after every change. A region with a
``min_mos`` target ``T`` (regions with a response-time target are left as
planned) and ``n`` caches of ``s`` vCPUs, bounded by the template's
``instances``:

- **Scale out** when the predicted MOS is below ``T + out_margin`` for
  ``out_samples`` samples in a row. The prediction is the lower of the
  smoothed estimate and the model's MOS at the *expected* viewers: the
  viewers now plus ``lookahead`` samples of a sustained rise (the smallest
  rise per sample of the smoothed viewers over the last ``trend_span``
  samples; noise rarely rises that many times in a row, a surge does), so
  a ramp is met before it arrives. The new count is the fewest caches
  whose model MOS at the expected viewers is at least ``T + in_margin``
  (one more at least).
- **Scale in** by one cache when the region has had ``in_cooldown`` samples
  since its last change and, for each of the last ``in_samples`` samples,
  both the estimate and the model's MOS at the expected viewers with one
  cache fewer are at least ``T + in_margin``: the dead band between the two
  thresholds then keeps the new count from scaling out again on the same
  load. SO takes the cache off the host carrying the fewest of the
  region's VNFs and RO drains it before stopping it. With ``pack`` (the
  default), when the ``k > 1`` caches SO would take first are all a host
  carries of the region and ``n - k`` caches keep the same margin, the
  region scales in by ``k`` at once: the host empties one step sooner and
  can be switched off (:mod:`cdnaas.im.hosts`), not ``k`` cooldowns later.
- **Consolidate** when a region is stable (the scale-in conditions hold for
  its current count) and one of its hosts is lightly used (at most
  ``light_share`` of its vCPUs reserved) by nothing but this region's
  caches: ask for one cache more, provided SO would place it on another
  host already on (SO places at the least energy cost,
  :func:`cdnaas.planning.placement.place`, asked here the same question)
  carrying more of the region's VNFs. The next scale in then removes one
  from the light host, the one with the fewest of the region's VNFs, until
  it is empty and can be powered down (:mod:`cdnaas.im.hosts` marks it).

Targets above the model's best MOS are capped at it. Every decision carries
its inputs: the samples it counted, the thresholds, the counters.

The defaults (:class:`Settings`) suit the KVM model at a 10 s control period:
at ``T + 0.2`` the load is about 7% below the target's, room for two samples
of counting and a KVM boot (about two periods) while a flash crowd grows a
few percent a period; ``T + 0.5`` leaves a dead band of about 12% of load
between the thresholds, which viewers jittering by +-5% a sample never cross
back and forth (``tests/unit/test_im_policy.py``; ``benchmarks/im_trace.py``).
"""
import dataclasses
import math

from cdnaas.common.flavor import HostCapacity, InsufficientCapacity
from cdnaas.im.observation import ScaleDecision
from cdnaas.planning import qoe
from cdnaas.planning import placement, resizing

#: a cache SO is asked to place; RAM is not part of an observation, so it asks for none
_PROBE = "consolidation-probe"
_UNMETERED = 1 << 30


@dataclasses.dataclass(frozen=True)
class Settings:
    """Thresholds (MOS above the target) and counters (in samples, i.e. reconcile passes)."""

    out_margin: float = 0.2
    in_margin: float = 0.5
    out_samples: int = 2
    in_samples: int = 6
    in_cooldown: int = 12
    lookahead: int = 3
    trend_span: int = 3
    light_share: float = 0.5
    #: scale in by every cache of the host SO empties first, at once, when the margin holds
    pack: bool = True


DEFAULTS = Settings()


def decide(observation, settings=DEFAULTS):
    """Decisions for the vCDN of ``observation`` (a :class:`cdnaas.im.observation.Observation`)."""
    model = observation.model
    if model is None:
        return []
    bounds = observation.template["vnfs"]["cache"]["instances"]
    found = []
    for region in observation.regions:
        if "min_mos" not in region.quality or not region.caches or not region.history:
            continue
        decision = _region(observation, region, model, bounds, settings)
        if decision is not None:
            found.append(decision)
    return found


def _region(observation, region, model, bounds, settings):
    target = region.quality["min_mos"]
    levels = {"target": target, "scale_out_below": min(target + settings.out_margin, model.best_mos),
              "scale_in_at_least": min(target + settings.in_margin, model.best_mos)}
    size = max(c.vcpus for c in region.caches)
    count = len(region.caches)
    history = region.history
    predicted = _predicted(model, history, settings)
    below = _run(p < levels["scale_out_below"] for p, _v in predicted)

    def facts():  # the inputs a decision records (made only for a decision taken)
        kept = max(settings.in_samples, settings.out_samples)
        return {"model": model.name, "caches": count, "vcpus_per_cache": size,
                "bounds": dict(bounds), "thresholds": levels,
                "settings": dataclasses.asdict(settings),
                "samples": [_sample_view(s, p, v) for s, (p, v)
                            in zip(history[-kept:], predicted[-kept:])]}
    if below >= settings.out_samples and count < bounds["max"]:
        expected = predicted[-1][1]
        per_cache = model.max_load_for_mos(levels["scale_in_at_least"]) * size
        wanted = min(bounds["max"], max(count + 1, math.ceil(expected / per_cache)))
        return ScaleDecision(
            kind="scale_out", region=region.name, caches=wanted,
            reason=f"predicted MOS {predicted[-1][0]:.2f} below {levels['scale_out_below']:.2f} "
                   f"for {below} samples; {wanted} caches hold {expected:.0f} viewers at "
                   f"MOS >= {levels['scale_in_at_least']:.2f}",
            inputs={**facts(), "counters": {"below": below, "needed": settings.out_samples},
                    "expected_viewers": round(expected, 1), "target_caches": wanted})
    if len(history) < settings.in_cooldown:
        return None
    hosts = _region_hosts(observation, region)
    lightest, emptied = _lightest(region, hosts) if settings.pack else (None, 0)
    fewer = _run(_holds(model, sample, expected, sample.vcpus - size, levels["scale_in_at_least"])
                 for sample, (_p, expected) in zip(history, predicted))
    counters = {"above_with_one_fewer": fewer, "needed": settings.in_samples,
                "samples_since_change": len(history), "cooldown": settings.in_cooldown}
    if emptied > 1 and count - emptied >= bounds["min"]:
        empty = _run(_holds(model, sample, expected, sample.vcpus - emptied * size,
                            levels["scale_in_at_least"])
                     for sample, (_p, expected) in zip(history, predicted))
        if empty >= settings.in_samples:
            return ScaleDecision(
                kind="scale_in", region=region.name, caches=count - emptied,
                reason=f"with {count - emptied} caches the MOS stays at or above "
                       f"{levels['scale_in_at_least']:.2f} for the last {empty} samples: the "
                       f"{emptied} caches of host {lightest} go at once, which empties it",
                inputs={**facts(), "counters": {**counters, "above_with_host_emptied": empty,
                                              "caches_removed": emptied},
                        "emptied_host": lightest, "target_caches": count - emptied})
    if fewer >= settings.in_samples and count > bounds["min"]:
        return ScaleDecision(
            kind="scale_in", region=region.name, caches=count - 1,
            reason=f"with {count - 1} caches the MOS stays at or above "
                   f"{levels['scale_in_at_least']:.2f} for the last {fewer} samples",
            inputs={**facts(), "counters": counters, "target_caches": count - 1})
    stable = _run(_holds(model, sample, expected, sample.vcpus, levels["scale_in_at_least"])
                  for sample, (_p, expected) in zip(history, predicted))
    if stable >= settings.in_samples and count < bounds["max"]:
        move = _consolidation(observation, region, size, settings)
        if move is not None:
            light, fuller = move
            return ScaleDecision(
                kind="consolidate", region=region.name, caches=count + 1,
                reason=f"host {light.name} has {light.reserved_vcpus} of {light.vcpus} vCPUs "
                       f"reserved, all by this region's caches: a cache more goes to "
                       f"{fuller.name}, the next scale in empties {light.name}",
                inputs={**facts(), "counters": {**counters, "stable": stable},
                        "light_host": _host_view(light), "fuller_host": _host_view(fuller),
                        "target_caches": count + 1})
    return None


def _region_hosts(observation, region):
    """``{name: HostState}`` of the region's hosts (empty when the IM gave none)."""
    return {h.name: h for h in observation.hosts.values() if h.region == region.name}


def _lightest(region, hosts):
    """``(host, caches)``: the fewest caches SO's removal order takes (the hosts carrying
    the fewest of the region's VNFs first, the newest cache first among equals) to empty
    a host of the region's VNFs, and that host; ``(None, 0)`` when no host empties so."""
    ranked = resizing.removal_order(region.caches, region.vnfs)
    for count in range(1, len(ranked)):
        gone = {v.name for v in ranked[:count]}
        for host in sorted({v.host for v in ranked[:count]}):
            if host in hosts and all(v.name in gone for v in region.vnfs if v.host == host):
                return host, count
    return None, 0


def _predicted(model, history, settings):
    """``(predicted MOS, expected viewers)`` of each sample (see the module docstring)."""
    smoothed, found = [], []
    for index, sample in enumerate(history):
        smoothed.append(qoe.smooth(smoothed[-1] if smoothed else None, sample.viewers))
        rises = [b - a for a, b in zip(smoothed[-settings.trend_span - 1:-1],
                                       smoothed[-settings.trend_span:])]
        rise = max(0.0, min(rises)) if len(rises) == settings.trend_span else 0.0
        expected = max(sample.viewers, smoothed[index]) + settings.lookahead * rise
        forecast = model.mos(expected / sample.vcpus) if sample.vcpus else model.mos(math.inf)
        estimate = sample.mos if sample.mos is not None else forecast
        found.append((min(estimate, forecast), expected))
    return found


def _holds(model, sample, expected, vcpus, level):
    """The estimate, and the model's MOS of ``expected`` viewers on ``vcpus`` cache vCPUs,
    are both at least ``level``."""
    return (vcpus > 0 and sample.mos is not None and sample.mos >= level
            and model.mos(expected / vcpus) >= level)


def _run(flags):
    """How many of the last flags are true in a row."""
    count = 0
    for flag in flags:
        count = count + 1 if flag else 0
    return count


def _consolidation(observation, region, size, settings):
    """``(light host, fuller host)`` when a cache more, placed where SO would place it,
    lets the next scale in empty the light host; None otherwise.

    SO places a new cache at the least energy cost and removes caches from the
    host carrying the fewest of the region's VNFs, the newest first.
    """
    hosts = _region_hosts(observation, region)
    carried = {}
    for vnf in region.vnfs:
        carried[vnf.host] = carried.get(vnf.host, 0) + 1
    free = [HostCapacity(name=h.name, free_vcpus=h.free_vcpus, free_ram_mb=_UNMETERED,
                         vcpus=h.vcpus, ram_mb=_UNMETERED, idle_watts=h.idle_watts,
                         peak_watts=h.peak_watts)
            for h in sorted(hosts.values(), key=lambda h: h.name) if h.enabled]
    try:
        chosen = placement.place(region.name, [placement.Instance(_PROBE, size, 0)], free,
                                 anchors=resizing.anchors(region.vnfs))
    except InsufficientCapacity:
        return None
    fuller = hosts[chosen[_PROBE]]
    if fuller.reserved_vcpus == 0:
        return None  # it would only move the cache to a host now empty
    for light in sorted(hosts.values(), key=lambda h: (h.reserved_vcpus, h.name)):
        ours = [v for v in region.vnfs if v.host == light.name]
        if (light.name != fuller.name and ours and all(v.role == "cache" for v in ours)
                and sum(v.vcpus for v in ours) == light.reserved_vcpus
                and light.reserved_vcpus <= settings.light_share * light.vcpus
                and carried.get(fuller.name, 0) + 1 > carried[light.name]):
            return light, fuller
    return None


def _sample_view(sample, predicted, expected):
    return {"at": sample.at.isoformat(), "viewers": round(sample.viewers, 1),
            "mos": None if sample.mos is None else round(sample.mos, 3),
            "predicted_mos": round(predicted, 3), "expected_viewers": round(expected, 1),
            "vcpus": sample.vcpus}


def _host_view(host):
    return {"name": host.name, "vcpus": host.vcpus, "reserved_vcpus": host.reserved_vcpus,
            "free_vcpus": host.free_vcpus}
