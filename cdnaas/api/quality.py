"""The operator's view of quality, load and power across every tenant's vCDNs.

The SO's live instances (tenant, state, each region's demand and quality target)
joined with the Instance Manager's latest pass over each (viewers, estimated MOS,
watts). A region whose target is a MOS and whose estimate is below it is flagged.
"""
from cdnaas.common.clients import ImClient, SoClient


def overview():
    """``{"vcdns": [...], "totals": {...}}`` of every vCDN not deleted, in the SO's order."""
    measured = {v["vcdn_id"]: v for v in ImClient().vcdns()}
    views = [_vcdn(vcdn, measured.get(vcdn["id"]))
             for vcdn in SoClient().instances()]
    return {"vcdns": views, "totals": {
        "vcdns": len(views),
        "viewers": sum(v["viewers"] or 0 for v in views),
        "watts": round(sum(v["watts"] or 0 for v in views), 1),
        "regions_below_target": sum(r["below_target"] for v in views for r in v["regions"])}}


def _vcdn(vcdn, figures):
    figures = figures or {}
    points = {r["name"]: r for r in figures.get("regions", [])}
    return {"id": vcdn["id"], "name": vcdn["name"], "tenant": vcdn["tenant"],
            "state": vcdn["state"], "measured_at": figures.get("at"),
            "viewers": figures.get("viewers"), "watts": figures.get("watts"),
            "energy_wh": figures.get("energy_wh"),
            "regions": [_region(r, points.get(r["name"], {})) for r in vcdn["regions"]]}


def _region(requested, point):
    target = (requested.get("quality") or {}).get("min_mos")
    mos = point.get("mos")
    return {"name": requested["name"], "demand": requested["demand"],
            "quality": requested.get("quality"), "viewers": point.get("viewers"), "mos": mos,
            "vcpus": point.get("vcpus"), "watts": point.get("watts"),
            "below_target": mos is not None and target is not None and mos < target}
