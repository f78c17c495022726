"""Healing: a VNF failing its health checks is healed through SO, whatever the flavor.

A VNF is healed at the first pass whose check found a fault that does not pass by itself
(``lasting``: its process tree is not whole, such as a killed master's workers serving on
alone, or it runs another configuration than RO wrote), otherwise once two passes in a
row found it unhealthy, so one slow answer does not cost a cache. Either way it is healed
within two control periods of the fault. A lasting fault is healed in place, whatever
the role: RO mends the VNF where it runs while it answers (a new master beside a killed
one's workers, a reload on the configuration written), which keeps a cache's content and
changes nothing its balancer names, else rebuilds it at its address. A cache that fails
two passes without one is replaced by SO (a new cache of a new name on the same host, the
old one drained and removed); any other VNF is rebuilt in place, at its address (a
balancer or DNS VNF is an entry point; the origin shield is where caches fetch). Entry
points and the shield go first, and one repair mends every VNF that is broken. A region gets at most
``CDNAAS_IM_HEAL_LIMIT`` heals per hour (3): a host that breaks every VNF put on it needs
an operator, and the IM then records that it holds off (once per VNF).
"""
import datetime as dt

from sqlalchemy import select

from cdnaas.common import config
from cdnaas.im import decisions
from cdnaas.im.models import Action

HEAL_WINDOW = dt.timedelta(hours=1)


def heal(database, so, now, observed):
    """Heal the first VNF of ``observed`` (a reconcile ``Seen``) that needs it: entry points
    and the shield before caches.

    :returns: the decision recorded, or None when no VNF needs healing (or the IM already
        recorded that it holds off).
    """
    vcdn_id = observed.vcdn.id
    limit = config.setting("CDNAAS_IM_HEAL_LIMIT")
    for reading in sorted(observed.readings, key=lambda r: r.role == "cache"):
        if reading.healthy:
            continue
        before = observed.previous.get(("cache" if reading.role == "cache" else "vnf",
                                        reading.name))
        failed_before = before is not None and not before.healthy
        if not (reading.lasting or failed_before):
            continue
        details = {"vnf": reading.name, "role": reading.role, "host": reading.host,
                   "failed_passes": 2 if failed_before else 1, "lasting": reading.lasting,
                   "limit_per_hour": limit}
        with database.sessions() as session:
            done = decisions.started_since(session, vcdn_id, reading.region, "heal",
                                           now - HEAL_WINDOW)
            held = session.scalar(select(Action.id).where(
                Action.instance_id == vcdn_id, Action.kind == "heal", Action.outcome == "held",
                Action.details["vnf"].as_string() == reading.name).limit(1))
        if done >= limit:
            if held:
                continue
            return decisions.record(database, now, "heal", "held",
                                    f"{reading.name} fails its health checks, but {done} VNFs "
                                    f"of {reading.region} were healed within the hour",
                                    {**details, "heals_within_hour": done}, vcdn_id=vcdn_id,
                                    region=reading.region)
        reason = (f"{reading.name} is broken: {reading.detail}" if reading.lasting
                  else f"{reading.name} failed 2 health checks in a row")[:200]
        return decisions.through_so(
            database, now, vcdn_id, "heal",
            lambda: so.heal(vcdn_id, reading.name, reason, in_place=reading.lasting),
            reason, {**details, "heals_within_hour": done}, region=reading.region)
    return None
