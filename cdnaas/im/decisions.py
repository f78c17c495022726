"""Decisions of the Instance Manager: carried out through the Service Orchestrator and recorded.

Every change to a vCDN is an SO operation (scale, heal, terminate); the
decision is recorded with the figures that caused it and what came of it:

- ``started``: SO accepted; ``details.operation`` is the operation's id;
- ``deferred``: the vCDN was busy with another operation; a later pass retries;
- ``refused``: SO refused (capacity short, a bound of the template);
  ``details.error`` says why, ``details.refused_for`` which (``capacity``: the IM
  wakes a host of the region, :mod:`cdnaas.im.hosts`; ``bounds``). The same
  decision is not sent again for ``CDNAAS_IM_RETRY_SECONDS`` (default 60).
"""
import datetime as dt
import logging

from sqlalchemy import func, select

from cdnaas.common import config, errors
from cdnaas.common.timeutil import aware, isoformat
from cdnaas.im.models import Action

LOG = logging.getLogger(__name__)

#: kinds that change a region's capacity (they reset its policy counters)
CHANGES = ("scale_out", "scale_in", "consolidate", "heal")


def record(database, now, kind, outcome, reason, details, vcdn_id=None, region=None, host=None):
    """Store one decision taken at ``now``; return its view."""
    with database.transaction() as session:
        action = Action(instance_id=vcdn_id, kind=kind, outcome=outcome, reason=reason,
                        details=details, region=region, host=host, created_at=now)
        session.add(action)
        session.flush()
        LOG.info("%s: %s %s (%s)", vcdn_id or host, kind, outcome, reason)
        return view(action)


def view(action):
    """The API representation of a decision (``api-spec/im.yaml`` Action)."""
    return {"id": action.id, "vcdn_id": action.instance_id, "kind": action.kind,
            "outcome": action.outcome, "reason": action.reason, "region": action.region,
            "host": action.host, "details": action.details,
            "created_at": isoformat(aware(action.created_at))}


def through_so(database, now, vcdn_id, kind, call, reason, details, region=None):
    """Run ``call()`` (an SO request answering :class:`~cdnaas.common.answers.Accepted`) and
    record the outcome."""
    try:
        details = {**details, "operation": call().operation.id}
        outcome = "started"
    except errors.Conflict as exc:
        capacity = exc.field not in (None, "vcdn_id")
        details = {**details, "error": exc.message}
        if capacity:
            details["refused_for"] = "capacity"
        outcome = "refused" if capacity else "deferred"
    except errors.Unprocessable as exc:
        details = {**details, "error": exc.message, "refused_for": "bounds"}
        outcome = "refused"
    return record(database, now, kind, outcome, reason, details, vcdn_id=vcdn_id, region=region)


def latest_health(session, vcdn_ids):
    """``{vcdn_id: (outcome, unhealthy VNF names)}`` of the latest ``health`` decision of
    each of ``vcdn_ids`` that has one (one query)."""
    if not vcdn_ids:
        return {}
    newest = (select(func.max(Action.id)).where(Action.kind == "health",
                                                Action.instance_id.in_(vcdn_ids))
              .group_by(Action.instance_id))
    return {vcdn_id: (outcome, details.get("unhealthy", []))
            for vcdn_id, outcome, details in session.execute(
                select(Action.instance_id, Action.outcome, Action.details)
                .where(Action.id.in_(newest)))}


def last_changes(session):
    """``{vcdn_id: {region: when}}`` of the latest started change of each region of every
    vCDN (one query for a whole pass)."""
    rows = session.execute(
        select(Action.instance_id, Action.region, func.max(Action.created_at))
        .where(Action.kind.in_(CHANGES), Action.outcome == "started",
               Action.region.is_not(None), Action.instance_id.is_not(None))
        .group_by(Action.instance_id, Action.region))
    found = {}
    for vcdn_id, region, at in rows:
        found.setdefault(vcdn_id, {})[region] = aware(at)
    return found


def recently_refused(session, now, vcdn_id, region, kind, caches):
    """Whether SO refused this very decision less than ``CDNAAS_IM_RETRY_SECONDS`` ago."""
    last = session.scalar(select(Action).where(
        Action.instance_id == vcdn_id, Action.region == region, Action.kind == kind)
        .order_by(Action.id.desc()).limit(1))
    wait = dt.timedelta(seconds=config.setting("CDNAAS_IM_RETRY_SECONDS"))
    return (last is not None and last.outcome == "refused"
            and last.details.get("target_caches") == caches
            and now - aware(last.created_at) < wait)


def started_since(session, vcdn_id, region, kind, since):
    """How many ``kind`` decisions on the region were started after ``since``."""
    return len(session.scalars(select(Action.id).where(
        Action.instance_id == vcdn_id, Action.region == region, Action.kind == kind,
        Action.outcome == "started", Action.created_at > since)).all())
