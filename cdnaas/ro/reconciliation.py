"""What runs brought back to the deployment records after a restore of the databases.

A restore (``cdnaas db restore``) puts the records of an earlier moment back while the
VNFs went on: vCDNs created since run without a record, vCDNs deleted since have
records and nothing running, vCDNs changed since run other VNFs or configs than their
record says. The restore leaves a ``PENDING`` :class:`ReconciliationRecord`
(:func:`request`); the next RO to start carries it out inside its crash recovery
(:meth:`cdnaas.ro.service.DeploymentService.recover`), with the very steps that recover
from a crash:

- deployments of no record are removed by the driver's ``cleanup`` (each reported
  ``remove``: a vCDN created after the backup);
- every ACTIVE deployment is marked ``UPDATING`` and claimed (a crash in the middle
  leaves it to the crash recovery of the next start, which finishes the same way), then
  brought back to its record by the driver's ``restore``, as an interrupted update is,
  and its entry point published again. Before that, :func:`plan` names what happens to
  each VNF: ``adopt`` (recorded and answering: kept as it runs, its config set back to
  the record's if it differs), ``rebuild`` (recorded and not answering: booted again at
  its recorded address) and ``remove`` (running, of the deployment, not recorded).

Each action is logged and kept in the record (``GET /ro/v1/reconciliations``,
``cdnaas db reconciliations``). A deployment the driver cannot bring back rests
``ERROR`` saying why, and the reconciliation ``FAILED`` names it.
"""
import datetime as dt
import logging
import uuid

from sqlalchemy import select

from cdnaas.common.timeutil import isoformat
from cdnaas.db import leases
from cdnaas.db.engine import Database
from cdnaas.ro.models import (DONE, FAILED, PENDING, RUNNING, ReconciliationRecord, utcnow)

LOG = logging.getLogger(__name__)

ADOPT, REBUILD, REMOVE = "adopt", "rebuild", "remove"
STEP = "reconcile after restore"


def request(url, cause):
    """Record in the RO database at ``url`` that a reconciliation is owed; return its id.

    :param cause: what made it owed, e.g. ``the restore of the backup taken at ...``.
    """
    database = Database(url)
    try:
        with database.transaction() as session:
            record = ReconciliationRecord(id=uuid.uuid4().hex, cause=cause, status=PENDING,
                                          actions=[], created_at=utcnow(), updated_at=utcnow())
            session.add(record)
        return record.id
    finally:
        database.dispose()


def take_owed(session, claims):
    """The reconciliations owed that this replica may carry out at its start (``PENDING``,
    or ``RUNNING`` by a previous process of this replica, or past its lease), marked
    ``RUNNING`` and claimed by ``claims``' owner, their rows locked by ``session``."""
    found = session.scalars(select(ReconciliationRecord).where(
        ReconciliationRecord.status.in_((PENDING, RUNNING)))
        .order_by(ReconciliationRecord.created_at).with_for_update(skip_locked=True)).all()
    taken = [r for r in found if r.status == PENDING or claims.free(r, startup=True)]
    for record in taken:
        record.status, record.updated_at = RUNNING, utcnow()
        record.claimed_by = claims.owner
        record.claim_expires = utcnow() + dt.timedelta(seconds=leases.lease_seconds())
    return taken


def plan(driver, deployment):
    """What bringing ``deployment`` back to its record does to each VNF: a list of
    ``{deployment, vnf, role, action, detail}``, each logged.

    :raises VimError: the driver could not tell what runs.
    """
    recorded = {v.name: v for v in deployment.vnfs}
    answering = {h.name: h for h in driver.health(deployment)}
    present = driver.vnf_names(deployment)  # an address may answer for another deployment
    actions = []
    for name, vnf in recorded.items():
        health = answering.get(name)
        if name in present and health is not None and health.healthy:
            actions.append(_action(deployment.deployment_id, name, vnf.role, ADOPT,
                                   f"recorded and running ({health.detail}): kept"))
        else:
            why = "nothing of it here" if name not in present else \
                health.detail if health is not None else "not checked"
            actions.append(_action(deployment.deployment_id, name, vnf.role, REBUILD,
                                   f"recorded, not running ({why}): booted again"))
    for name in sorted(set(present) - set(recorded)):
        actions.append(_action(deployment.deployment_id, name, None, REMOVE,
                               "running, not recorded: removed"))
    return actions


def removed_deployments(ids):
    """The actions (each logged) of the driver's cleanup, which removed the deployments
    ``ids``: they have no record in the restored database."""
    return [_action(deployment_id, None, None, REMOVE, "a deployment of no record (a vCDN "
                    "created after the backup): removed") for deployment_id in ids]


def finish(database, reconciliation_ids, actions, failures):
    """Record ``actions`` and the end of the reconciliations ``reconciliation_ids``:
    ``DONE``, or ``FAILED`` when ``failures`` (``{deployment id: error}``) is not empty."""
    with database.transaction() as session:
        for record in session.scalars(select(ReconciliationRecord).where(
                ReconciliationRecord.id.in_(reconciliation_ids))):
            record.actions = list(record.actions or []) + actions
            record.status = FAILED if failures else DONE
            record.error = "; ".join(f"deployment {d}: {e}" for d, e in sorted(failures.items())) \
                or None
            record.finished_at = record.updated_at = utcnow()
            record.claimed_by = record.claim_expires = None
    LOG.info("reconciliation after restore %s: %d action(s), %s", ", ".join(reconciliation_ids),
             len(actions), f"{len(failures)} deployment(s) not brought back" if failures
             else "every deployment as recorded")


def listing(database):
    """Every reconciliation, newest first (``GET /ro/v1/reconciliations``)."""
    with database.sessions() as session:
        return [represent(r) for r in session.scalars(select(ReconciliationRecord).order_by(
            ReconciliationRecord.created_at.desc()))]


def represent(record):
    return {"id": record.id, "cause": record.cause, "status": record.status,
            "actions": record.actions or [], "error": record.error,
            "created_at": isoformat(record.created_at),
            "finished_at": isoformat(record.finished_at)}


def _action(deployment_id, vnf, role, action, detail):
    entry = {"deployment": deployment_id, "vnf": vnf, "role": role, "action": action,
             "detail": detail}
    log = LOG.info if action == ADOPT else LOG.warning
    log("reconciliation after restore: deployment %s: %s %s: %s", deployment_id, action,
        vnf or "(all of it)", detail)
    return entry

