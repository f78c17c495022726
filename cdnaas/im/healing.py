"""Healing: a cache failing its health checks is replaced through SO, whatever the flavor.

A cache is replaced (SO heal: a new cache of a new name on the same host,
the old one removed) once two passes in a row found it unhealthy, so one
slow answer does not cost a cache. A region gets at most ``HEAL_LIMIT``
heals per hour: a host that breaks every cache put on it needs an operator,
and the IM then records that it holds off (once per cache).
"""
import datetime as dt

from sqlalchemy import select

from cdnaas.im import decisions
from cdnaas.im.models import Action

HEAL_LIMIT = 3
HEAL_WINDOW = dt.timedelta(hours=1)


def heal(database, so, now, observed):
    """Replace the first cache of ``observed`` (a reconcile ``Seen``) failing for two passes.

    :returns: the decision recorded, or None when no cache needs healing (or the
        IM already recorded that it holds off).
    """
    vcdn_id = observed.vcdn["id"]
    for reading in observed.readings:
        before = observed.previous.get(("cache", reading.name))
        if reading.role != "cache" or reading.healthy or before is None or before.healthy:
            continue
        details = {"vnf": reading.name, "host": reading.host, "failed_passes": 2,
                   "limit_per_hour": HEAL_LIMIT}
        with database.sessions() as session:
            done = decisions.started_since(session, vcdn_id, reading.region, "heal",
                                           now - HEAL_WINDOW)
            held = session.scalar(select(Action.id).where(
                Action.instance_id == vcdn_id, Action.kind == "heal", Action.outcome == "held",
                Action.details["vnf"].as_string() == reading.name).limit(1))
        if done >= HEAL_LIMIT:
            if held:
                continue
            return decisions.record(database, now, "heal", "held",
                                    f"{reading.name} fails its health checks, but {done} caches "
                                    f"of {reading.region} were replaced within the hour",
                                    {**details, "heals_within_hour": done}, vcdn_id=vcdn_id,
                                    region=reading.region)
        reason = f"{reading.name} failed 2 health checks in a row"
        return decisions.through_so(
            database, now, vcdn_id, "heal",
            lambda: so.heal(vcdn_id, reading.name, reason),
            reason, {**details, "heals_within_hour": done}, region=reading.region)
    return None
