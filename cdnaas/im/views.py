"""HTTP views of the Instance Manager."""
import datetime as dt

from flask import Blueprint, current_app, request
from sqlalchemy import select

from cdnaas.common import clock, errors, windows
from cdnaas.common.clients import SoClient
from cdnaas.common.timeutil import aware, isoformat
from cdnaas.im import decisions, hosts, inventory, series, usage
from cdnaas.im.models import Action

blueprint = Blueprint("im", __name__, url_prefix="/im/v1")

DEFAULT_WINDOW = dt.timedelta(hours=1)


def _db():
    return current_app.extensions["db"]


@blueprint.post("/reconcile")
def reconcile():
    return {"actions": current_app.extensions["loop"].run_once()}


@blueprint.get("/actions")
def list_actions():
    query = select(Action).order_by(Action.id)
    for arg, column in (("instance_id", Action.instance_id), ("kind", Action.kind),
                        ("region", Action.region), ("host", Action.host)):
        if request.args.get(arg):
            query = query.where(column == request.args[arg])
    since = windows.moment(request.args, "since", None)
    if since is not None:
        query = query.where(Action.created_at >= since)
    with _db().sessions() as session:
        return {"actions": [decisions.view(a) for a in session.scalars(query)]}


@blueprint.get("/vcdns/<vcdn_id>/metrics")
def vcdn_metrics(vcdn_id):
    until = windows.moment(request.args, "until", clock.now())
    since = windows.moment(request.args, "since", until - DEFAULT_WINDOW)
    if since > until:
        raise errors.BadRequest("since must not be after until", field="since")
    with _db().sessions() as session:
        step = request.args.get("step", type=int) or series.default_step(
            session, vcdn_id, since, until)
        found = series.window(session, vcdn_id, since, until, request.args.get("scope"), step)
    return {"vcdn_id": vcdn_id, "since": isoformat(since), "until": isoformat(until),
            "step": step, "series": found}


@blueprint.get("/vcdns/<vcdn_id>/usage")
def vcdn_usage(vcdn_id):
    """The vCDN's usage per region and in total within ``[from, to)`` (minute rows)."""
    since, until = windows.window(request.args, "from", "to", clock.now(),
                                  lambda end: end - usage.kept(), usage.kept())
    with _db().sessions() as session:
        found = usage.report(session, vcdn_id, since, until)
        read_at = usage.read_at(session, vcdn_id)
    return {"vcdn_id": vcdn_id, "from": isoformat(since), "to": isoformat(until),
            "traffic_read_at": read_at, **found}


@blueprint.get("/vcdns/<vcdn_id>/traffic")
def vcdn_traffic(vcdn_id):
    """The vCDN's traffic per region as a series of ``step`` seconds."""
    since, until = windows.window(request.args, "since", "until", clock.now(),
                                  lambda end: end - DEFAULT_WINDOW, usage.kept())
    step = usage.series_step(request.args.get("step", type=int), since, until)
    with _db().sessions() as session:
        found = usage.series(session, vcdn_id, since, until, step)
    return {"vcdn_id": vcdn_id, "since": isoformat(since), "until": isoformat(until),
            "step": step, "regions": found}


@blueprint.get("/vcdns")
def latest_figures():
    """Every measured vCDN as its latest pass saw it, with its regions."""
    with _db().sessions() as session:
        passes = series.latest_passes(session)
    views = []
    for vcdn_id, points in sorted(passes.items()):
        whole = points[("vcdn", "")]
        views.append({"vcdn_id": vcdn_id, **series.point_view(whole),
                      "regions": [{"name": key, **series.point_view(point)}
                                  for (scope, key), point in sorted(points.items())
                                  if scope == "region"]})
    return {"vcdns": views}


@blueprint.get("/hosts")
def list_hosts():
    known = inventory.hosts(SoClient())
    with _db().sessions() as session:
        latest = series.previous_hosts(session)
        marks = hosts.marks(session)
    views = []
    for name, host in sorted(known.items()):
        point, mark = latest.get(name), marks.get(name)
        views.append({
            "name": name, "region": host.region, "vcpus": host.vcpus,
            "reserved_vcpus": host.reserved_vcpus, "enabled": host.enabled,
            "idle_watts": host.idle_watts, "peak_watts": host.peak_watts,
            "watts": None if point is None else round(point.watts, 1),
            "utilisation": None if point is None else round(point.cpu / point.vcpus, 3),
            "source": None if point is None else point.source,
            "energy_wh": None if point is None else round(point.energy_wh, 3),
            "sampled_at": None if point is None else isoformat(aware(point.at)),
            "mark": None if mark is None else {
                "state": mark.state, "reason": mark.reason,
                "since": isoformat(aware(mark.changed_at)),
                "switched_off": hosts.switched_off(host, mark)}})
    marked = [v for v in views if v["mark"] and v["mark"]["state"] == hosts.POWER_DOWN]
    off = [v for v in marked if v["mark"]["switched_off"]]
    still_on = [v for v in marked if not v["mark"]["switched_off"]]
    return {"hosts": views,
            "totals": {"hosts": len(views), "watts": round(sum(v["watts"] or 0 for v in views), 1),
                       "marked_power_down": len(marked), "switched_off": len(off),
                       "saved_idle_watts": round(sum(v["idle_watts"] for v in off), 1),
                       "marked_still_on": len(still_on),
                       "marked_still_on_watts": round(
                           sum(v["watts"] or v["idle_watts"] for v in still_on), 1)}}
