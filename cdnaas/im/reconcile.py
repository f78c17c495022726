"""One idempotent pass over the active vCDNs, and the loop that schedules it.

Like Octavia's health manager: :func:`reconcile_once` looks at every ACTIVE
vCDN, ends those whose lease has passed (through SO) and checks the health of
the rest (through RO, the only component that reaches VNFs). It records what
it decided. Running it twice in a row does nothing new the second time: a
vCDN being terminated is no longer ACTIVE, and health is recorded only when
it changes.
"""
import logging
import threading

from sqlalchemy import select

from cdnaas.common import clock, config, errors
from cdnaas.common.clients import RoClient, SoClient
from cdnaas.common.timeutil import isoformat, parse
from cdnaas.im.models import Action

LOG = logging.getLogger(__name__)


def reconcile_once(database, now=None, so=None, ro=None):
    """Check every ACTIVE vCDN once; return the actions recorded in this pass."""
    now = now or clock.now()
    so, ro = so or SoClient(), ro or RoClient()
    recorded = []
    for vcdn in so.get("/so/v1/instances", params={"state": "ACTIVE"})["vcdns"]:
        try:
            if parse(vcdn["lease"]["end"]) <= now:
                recorded.append(_end_lease(database, so, vcdn, now))
            else:
                action = _check_health(database, ro, vcdn)
                if action:
                    recorded.append(action)
        except errors.CdnaasError as exc:  # one vCDN's trouble must not stop the pass
            LOG.warning("reconcile of %s failed: %s", vcdn["id"], exc)
            recorded.append(_record(database, vcdn["id"], "reconcile", "error", str(exc), {}))
    return recorded


def _end_lease(database, so, vcdn, now):
    details = {"lease_end": vcdn["lease"]["end"], "now": isoformat(now)}
    try:
        answer = so.delete(f"/so/v1/instances/{vcdn['id']}", params={"reason": "lease expired"})
        details["operation"] = answer["operation"]["id"]
        outcome = "started"
    except errors.Conflict as exc:  # another operation runs; the next pass retries
        details["error"] = exc.message
        outcome = "deferred"
    return _record(database, vcdn["id"], "terminate", outcome,
                   f"lease ended at {vcdn['lease']['end']}", details)


def _check_health(database, ro, vcdn):
    health = ro.health(vcdn["id"])
    unhealthy = [v["name"] for v in health["vnfs"] if not v["healthy"]]
    status = "unhealthy" if unhealthy else "healthy"
    with database.sessions() as session:
        last = session.scalar(select(Action).where(Action.instance_id == vcdn["id"],
                                                   Action.kind == "health")
                              .order_by(Action.id.desc()).limit(1))
    if last is not None and last.outcome == status and \
            last.details.get("unhealthy", []) == unhealthy:
        return None  # nothing changed since the last pass
    reason = f"{len(unhealthy)} VNF(s) failing health checks" if unhealthy \
        else "every VNF answers"
    return _record(database, vcdn["id"], "health", status, reason,
                   {"unhealthy": unhealthy, "vnfs": health["vnfs"]})


def _record(database, instance_id, kind, outcome, reason, details):
    with database.transaction() as session:
        action = Action(instance_id=instance_id, kind=kind, outcome=outcome, reason=reason,
                        details=details)
        session.add(action)
        session.flush()
        LOG.info("vCDN %s: %s %s (%s)", instance_id, kind, outcome, reason)
        return action_view(action)


def action_view(action):
    return {"id": action.id, "vcdn_id": action.instance_id, "kind": action.kind,
            "outcome": action.outcome, "reason": action.reason, "details": action.details,
            "created_at": isoformat(action.created_at)}


class ReconcileLoop:
    """Runs :func:`reconcile_once` every ``CDNAAS_IM_INTERVAL`` seconds in a thread."""

    def __init__(self, database):
        self.database = database
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def run_once(self):
        """One pass, never two at once (the loop and ``POST /im/v1/reconcile`` share it)."""
        with self._lock:
            return reconcile_once(self.database)

    def start(self):
        def loop():
            while not self._stop.wait(config.float_setting("CDNAAS_IM_INTERVAL", 10.0)):
                try:
                    self.run_once()
                except Exception:  # a peer may be down; the next pass retries
                    LOG.exception("reconcile pass failed")
        threading.Thread(target=loop, name="im-reconcile", daemon=True).start()

    def stop(self):
        self._stop.set()
