"""The operator's view of quality, load and power across every tenant's vCDNs.

The SO's live instances (tenant, state, each region's demand and quality target)
joined with the Instance Manager's latest pass over each (viewers, estimated MOS,
watts). A region whose target is a MOS and whose estimate is below it is flagged.
"""
from cdnaas.common.answers import Measured, MeasuredRegion
from cdnaas.common.clients import ImClient, SoClient

#: the figures of a vCDN, or of a region, the IM has not measured yet
NOT_MEASURED, NOT_MEASURED_REGION = Measured(), MeasuredRegion()


def overview():
    """``{"vcdns": [...], "totals": {...}}`` of every vCDN not deleted, in the SO's order."""
    measured = {v.vcdn_id: v for v in ImClient().vcdns()}
    views = [_vcdn(vcdn, measured.get(vcdn.id)) for vcdn in SoClient().instances()]
    return {"vcdns": views, "totals": {
        "vcdns": len(views),
        "viewers": sum(v["viewers"] or 0 for v in views),
        "watts": round(sum(v["watts"] or 0 for v in views), 1),
        "regions_below_target": sum(r["below_target"] for v in views for r in v["regions"])}}


def _vcdn(vcdn, figures):
    """``vcdn`` (SO's :class:`~cdnaas.common.answers.Instance`) with the IM's ``figures``
    (:class:`~cdnaas.common.answers.Measured`, None: not measured yet)."""
    figures = figures or NOT_MEASURED
    points = {r.name: r for r in figures.regions}
    return {"id": vcdn.id, "name": vcdn.name, "tenant": vcdn.tenant,
            "state": vcdn.state, "measured_at": figures.at,
            "viewers": figures.viewers, "watts": figures.watts,
            "energy_wh": figures.energy_wh,
            "regions": [_region(r, points.get(r.name, NOT_MEASURED_REGION)) for r in vcdn.regions]}


def _region(requested, point):
    target = (requested.quality or {}).get("min_mos")
    mos = point.mos
    return {"name": requested.name, "demand": requested.demand,
            "quality": requested.quality, "viewers": point.viewers, "mos": mos,
            "vcpus": point.vcpus, "watts": point.watts,
            "below_target": mos is not None and target is not None and mos < target}
