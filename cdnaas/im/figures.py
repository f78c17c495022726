"""The points one pass adds to a vCDN's time series: per cache, other VNF, region and vCDN.

- **Viewers.** A region's viewers are its balancers' open connections (each
  video client keeps one); without a balancer figure, its caches'. A cache
  carries the share of them that its requests are of the region's (its share
  of the region's cache vCPUs before rates are known).
- **MOS.** The flavor's model at viewers per cache vCPU, smoothed
  (:mod:`cdnaas.planning.qoe`), per cache and per region; the vCDN's is the
  regions' estimates weighted by their viewers.
- **Watts.** Each VNF's share of its host's power (:mod:`cdnaas.im.power`);
  regions and the vCDN add up their VNFs'.
- **Energy.** Cumulative watt-hours of the series: the previous point's plus
  this pass's watts over the time since it.

Balancers and DNS VNFs are points of scope ``vnf``; their watts count in
their region's.
"""
from cdnaas.common.timeutil import aware
from cdnaas.planning import qoe


def vcdn_points(vcdn_id, readings, watts, model, previous, now):
    """Points (dicts of ``Sample`` columns) of one vCDN for the pass at ``now``.

    :param readings: the :class:`~cdnaas.im.monitoring.Reading` of each VNF.
    :param watts: ``{vnf name: watts}`` (absent or None: unknown).
    :param model: the flavor's model, or None (no MOS).
    :param previous: ``{(scope, key): Sample}`` of the vCDN's previous pass.
    """
    points, regions = [], []
    for region in dict.fromkeys(r.region for r in readings):
        vnfs = [r for r in readings if r.region == region]
        region_points = _region(vcdn_id, region, vnfs, watts, model, previous, now)
        points += region_points
        regions.append(region_points[-1])
    total_viewers = sum(r["viewers"] for r in regions)
    estimates = [(r["mos"], r["viewers"]) for r in regions if r["mos"] is not None]
    mos = None
    if estimates:
        weight = sum(w for _m, w in estimates)
        mos = (sum(m * w for m, w in estimates) / weight if weight
               else sum(m for m, _w in estimates) / len(estimates))
    vcdn_watts = _sum(r["watts"] for r in regions)
    points.append(_point(vcdn_id, "vcdn", "", previous, now, viewers=total_viewers,
                         requests_per_second=_sum(r["requests_per_second"] for r in regions),
                         mos=mos, cpu=_sum(r["cpu"] for r in regions),
                         vcpus=sum(r["vcpus"] for r in regions), watts=vcdn_watts))
    return points


def _region(vcdn_id, region, vnfs, watts, model, previous, now):
    caches = [v for v in vnfs if v.role == "cache"]
    balancers = [v.connections for v in vnfs if v.role == "load_balancer"
                 and v.connections is not None]
    viewers = float(sum(balancers) if balancers else sum(c.connections or 0 for c in caches))
    cache_vcpus = sum(c.vcpus for c in caches)
    cache_rps = [c.requests_per_second for c in caches if c.requests_per_second is not None]
    region_rps = sum(cache_rps) if cache_rps else None
    points = []
    for vnf in vnfs:
        if vnf.role == "cache":
            if region_rps and vnf.requests_per_second is not None:
                held = viewers * vnf.requests_per_second / region_rps
            else:
                held = viewers * vnf.vcpus / cache_vcpus
            estimate = qoe.smooth(_last(previous, "cache", vnf.name, "mos"),
                                  qoe.sample(model, held, vnf.vcpus))
            points.append(_vnf_point(vcdn_id, "cache", vnf, held, estimate, watts, previous, now))
        else:
            points.append(_vnf_point(vcdn_id, "vnf", vnf, vnf.connections, None, watts,
                                     previous, now))
    estimate = qoe.smooth(_last(previous, "region", region, "mos"),
                          qoe.sample(model, viewers, cache_vcpus))
    points.append(_point(vcdn_id, "region", region, previous, now, viewers=viewers,
                         requests_per_second=region_rps, mos=estimate,
                         cpu=_sum(v.cpu for v in vnfs), vcpus=cache_vcpus,
                         watts=_sum(watts.get(v.name) for v in vnfs)))
    return points


def _vnf_point(vcdn_id, scope, vnf, viewers, mos, watts, previous, now):
    return _point(vcdn_id, scope, vnf.name, previous, now, viewers=viewers,
                  requests_per_second=vnf.requests_per_second, mos=mos, cpu=vnf.cpu,
                  vcpus=vnf.vcpus, watts=watts.get(vnf.name), healthy=vnf.healthy,
                  requests_total=vnf.requests_total, cpu_seconds_total=vnf.cpu_seconds_total,
                  read_at=vnf.read_at)


def _point(vcdn_id, scope, key, previous, now, **figures):
    figures["energy_wh"] = energy_wh(previous.get((scope, key)), figures["watts"], now)
    return {"scope": scope, "vcdn_id": vcdn_id, "key": key, **figures}


def energy_wh(before, watts, now):
    """Cumulative energy of a series: ``before``'s plus ``watts`` since ``before`` was taken."""
    if before is None or before.energy_wh is None:
        return 0.0
    hours = max(0.0, (now - aware(before.at)).total_seconds() / 3600)
    return before.energy_wh + (watts or 0.0) * hours


def _last(previous, scope, key, figure):
    row = previous.get((scope, key))
    return getattr(row, figure) if row is not None else None


def _sum(values):
    """The sum of the known ``values`` (None: none known), added in order."""
    total = None
    for value in values:
        if value is not None:
            total = value if total is None else total + value
    return total
