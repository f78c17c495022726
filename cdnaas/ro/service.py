"""Resource Orchestrator logic: SIGs deployed, changed and removed through the VIM driver.

A request marks its deployment's record (``DEPLOYING``, ``UPDATING``,
``DELETING``) under a per-id lock and answers at once; a thread of the pool
then calls the driver, records its progress and the outcome. Only a request
that moves a record out of a resting status starts work, so one deployment is
never worked on by two threads at once.
"""
import concurrent.futures
import dataclasses
import logging
import threading
import time

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from cdnaas.common import config, errors
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.common.timeutil import isoformat
from cdnaas.ro.models import (ACTIVE, BUSY, DELETED, DELETING, DEPLOYING, ERROR, UPDATING,
                              DeploymentRecord, utcnow)
from cdnaas.ro.vim.base import Deployment, VimError

LOG = logging.getLogger(__name__)
PROGRESS_INTERVAL = 0.1  # seconds between two recorded reports of a step in progress

VNF_FIELDS = ("name", "role", "region", "host", "address", "vcpus")
RESTART_STEP = "undo after restart"


class DeploymentService:
    """Deployments of SIGs through ``driver``, recorded in ``database``.

    :param database: the RO's :class:`~cdnaas.db.engine.Database`.
    :param driver: the :class:`~cdnaas.ro.vim.base.VimDriver` in use.
    """

    def __init__(self, database, driver):
        self.database = database
        self.driver = driver
        workers = int(config.env("CDNAAS_RO_WORKERS", "8"))
        self.pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="ro-work")
        self._locks = {}
        self._locks_guard = threading.Lock()
        self._changed = threading.Condition()  # notified whenever a record is written

    # -- requests ---------------------------------------------------------

    def put(self, deployment_id, document):
        """Deploy ``document`` (a SIG) as ``deployment_id``, or update the ACTIVE deployment.

        :returns: the representation, marked ``DEPLOYING`` or ``UPDATING``.
        :raises BadRequest: the SIG is invalid or names another vCDN.
        :raises Conflict: the deployment is being worked on, or belongs to another driver.
        """
        sig = parse_sig(deployment_id, document)
        with self._lock(deployment_id), self.database.transaction() as session:
            record = session.get(DeploymentRecord, deployment_id, with_for_update=True)
            if record is None:
                record = DeploymentRecord(id=deployment_id, steps=[], created_at=utcnow())
                session.add(record)
            self._check_idle(record)
            self._check_driver(record)
            if record.status == ACTIVE:
                record.mark(UPDATING, steps=[], error=None)
                work = self._update
            else:
                record.mark(DEPLOYING, driver=self.driver.name, sig=sig.to_dict(), steps=[],
                            error=None)
                work = self._deploy
            view = represent(record)
        self.pool.submit(self._run, deployment_id, work, sig)
        return view

    def get(self, deployment_id, wait=0.0):
        """The representation of ``deployment_id``. :raises NotFound: unknown id.

        :param wait: while the deployment is being worked on, wait up to this many
            seconds for its next change (status or progress) before answering, so a
            follower learns of it at once without polling.
        """
        with self._changed:
            with self.database.transaction() as session:
                view = represent(_find(session, deployment_id))
            if wait > 0 and view["status"] in BUSY:
                self._changed.wait(wait)
            else:
                return view
        with self.database.transaction() as session:
            return represent(_find(session, deployment_id))

    def _notify(self):
        with self._changed:
            self._changed.notify_all()

    def list(self):
        """Representations of every deployment, oldest first."""
        with self.database.transaction() as session:
            records = session.scalars(select(DeploymentRecord)
                                      .order_by(DeploymentRecord.created_at, DeploymentRecord.id))
            return [represent(r) for r in records]

    def delete(self, deployment_id):
        """Remove ``deployment_id``'s resources.

        :returns: (representation, HTTP status): 202 once removal started or while
            it runs; 200 when there is nothing to remove (already DELETED or unknown).
        :raises Conflict: a deploy or update is running, or another driver owns it.
        """
        with self._lock(deployment_id), self.database.transaction() as session:
            record = session.get(DeploymentRecord, deployment_id, with_for_update=True)
            if record is None:
                return {"id": deployment_id, "status": DELETED}, 200
            if record.status in (DELETED, DELETING):
                return represent(record), 200 if record.status == DELETED else 202
            self._check_idle(record)
            self._check_driver(record)
            record.mark(DELETING, steps=[], error=None)
            view = represent(record)
        self.pool.submit(self._run, deployment_id, self._terminate)
        return view, 202

    def health(self, deployment_id):
        """Health of each VNF of an ACTIVE deployment, as the driver checks it.

        :raises NotFound: unknown id. :raises Conflict: the deployment is not ACTIVE.
        :raises UpstreamError: the driver could not check.
        """
        deployment = self._active(deployment_id, "health is checked")
        try:
            checks = self.driver.health(deployment)
        except VimError as exc:
            raise errors.UpstreamError(f"the VIM could not check {deployment_id}: {exc}") from exc
        return {"healthy": all(c.healthy for c in checks),
                "vnfs": [dataclasses.asdict(c) for c in checks]}

    def metrics(self, deployment_id):
        """Load figures of each VNF of an ACTIVE deployment, as the driver reads them.

        :raises NotFound: unknown id. :raises Conflict: the deployment is not ACTIVE.
        :raises UpstreamError: the driver could not read them.
        """
        deployment = self._active(deployment_id, "metrics are read")
        try:
            figures = self.driver.metrics(deployment)
        except VimError as exc:
            raise errors.UpstreamError(f"the VIM could not read {deployment_id}: {exc}") from exc
        return {"id": deployment_id, "vnfs": [dataclasses.asdict(f) for f in figures]}

    def _active(self, deployment_id, what):
        """The driver's record of an ACTIVE deployment of this driver."""
        with self.database.transaction() as session:
            record = _find(session, deployment_id)
            if record.status != ACTIVE:
                raise errors.Conflict(f"deployment {deployment_id} is {record.status}; "
                                      f"{what} only while it is ACTIVE")
            self._check_driver(record)
            return Deployment.from_dict(record.deployment)

    # -- start-up ---------------------------------------------------------

    def recover(self):
        """Undo what a crash left half-done, then let the driver remove strays.

        Deployments of this driver left ``DEPLOYING`` or ``UPDATING`` have what
        was recorded terminated and become ``ERROR`` (with the reason in
        ``error``); ``DELETING`` ones finish as ``DELETED``. Then
        ``driver.cleanup`` gets the ids that still own resources.
        """
        with self.database.transaction() as session:
            interrupted = session.scalars(select(DeploymentRecord).where(
                DeploymentRecord.status.in_(BUSY),
                DeploymentRecord.driver == self.driver.name)).all()
        for record in interrupted:
            self._undo_interrupted(record)
        with self.database.transaction() as session:
            known = set(session.scalars(select(DeploymentRecord.id).where(
                DeploymentRecord.deployment.is_not(None),
                DeploymentRecord.driver == self.driver.name)))
        try:
            removed = self.driver.cleanup(known)
        except VimError as exc:
            LOG.warning("driver %s could not remove stray deployments: %s", self.driver.name, exc)
            return
        if removed:
            LOG.info("removed stray deployments %s", ", ".join(removed))

    def shutdown(self):
        """Wait for running work to finish and stop the pool."""
        self.pool.shutdown(wait=True)

    # -- background work --------------------------------------------------

    def _run(self, deployment_id, work, *args):
        try:
            work(deployment_id, *args)
        except Exception as exc:  # a bug or the database: never leave the record busy
            LOG.exception("work on deployment %s failed", deployment_id)
            self._save(deployment_id, ERROR, error=f"unexpected {type(exc).__name__}: {exc}")

    def _deploy(self, deployment_id, sig):
        leftover = self._load(deployment_id).deployment
        progress = self._progress(deployment_id)
        try:
            if leftover:  # an ERROR whose resources could not be removed: remove them first
                self.driver.terminate(Deployment.from_dict(leftover), progress)
                self._save(deployment_id, DEPLOYING, deployment=None)
            deployment = self.driver.deploy(sig, progress)
        except VimError as exc:
            self._save(deployment_id, ERROR, error=f"deploy failed: {exc}")
            return
        self._save(deployment_id, ACTIVE, deployment=deployment.to_dict())

    def _update(self, deployment_id, sig):
        old = Deployment.from_dict(self._load(deployment_id).deployment)
        try:
            new = self.driver.update(old, sig, self._progress(deployment_id))
        except VimError as exc:
            self._save(deployment_id, ACTIVE,
                       error=f"update failed; the previous deployment still serves: {exc}")
            return
        self._save(deployment_id, ACTIVE, sig=sig.to_dict(), deployment=new.to_dict())

    def _terminate(self, deployment_id):
        recorded = self._load(deployment_id).deployment
        try:
            if recorded:
                self.driver.terminate(Deployment.from_dict(recorded),
                                      self._progress(deployment_id))
        except VimError as exc:
            self._save(deployment_id, ERROR, error=f"terminate failed: {exc}")
            return
        self._save(deployment_id, DELETED, deployment=None)

    def _undo_interrupted(self, record):
        action = {DEPLOYING: "deploy", UPDATING: "update", DELETING: "delete"}[record.status]
        LOG.warning("deployment %s: undoing the %s a restart interrupted", record.id, action)
        try:
            if record.deployment:
                self.driver.terminate(Deployment.from_dict(record.deployment))
        except VimError as exc:
            self._save(record.id, ERROR, error=f"the {action} was interrupted by a restart "
                                              f"and removing its resources failed: {exc}")
            return
        steps = record.steps + [_step(RESTART_STEP, 1, 1)]
        if record.status == DELETING:
            self._save(record.id, DELETED, deployment=None, steps=steps)
        else:
            self._save(record.id, ERROR, deployment=None, steps=steps,
                       error=f"the {action} was interrupted by a restart of the resource "
                             "orchestrator; its resources were removed")

    # -- records ----------------------------------------------------------

    def _lock(self, deployment_id):
        with self._locks_guard:
            return self._locks.setdefault(deployment_id, threading.Lock())

    def _check_idle(self, record):
        if record.status in BUSY:
            raise errors.Conflict(f"deployment {record.id} is {record.status}; "
                                  "try again once it is done")

    def _check_driver(self, record):
        if record.deployment is not None and record.driver != self.driver.name:
            raise errors.Conflict(f"deployment {record.id} was built by VIM driver "
                                  f"{record.driver}, this resource orchestrator runs "
                                  f"{self.driver.name}")

    def _load(self, deployment_id):
        with self.database.transaction() as session:
            return session.get(DeploymentRecord, deployment_id)

    def _save(self, deployment_id, status, **changes):
        """Record ``status`` and ``changes``; with an ``error``, steps still running failed."""
        with self._lock(deployment_id), self.database.transaction() as session:
            record = session.get(DeploymentRecord, deployment_id, with_for_update=True)
            if changes.get("error"):
                changes.setdefault("steps", [dict(s, state="FAILED") if s["state"] != "COMPLETED"
                                             else s for s in record.steps])
            record.mark(status, **changes)
        self._notify()

    def _progress(self, deployment_id, interval=PROGRESS_INTERVAL):
        """A driver progress callback recording ``step`` in the deployment's steps.

        A step's start and end are always written; reports in between at most
        every ``interval`` seconds, so progress never slows the work it reports.
        """
        last_write = [0.0]

        def report(step, done, total):
            now = time.monotonic()
            if 0 < done < total and now - last_write[0] < interval:
                return
            last_write[0] = now
            try:
                with self.database.transaction() as session:
                    record = session.get(DeploymentRecord, deployment_id, with_for_update=True)
                    steps = [s for s in record.steps if s["name"] != step]
                    position = next((i for i, s in enumerate(record.steps) if s["name"] == step),
                                    len(steps))
                    steps.insert(position, _step(step, done, total))
                    record.mark(record.status, steps=steps)
                self._notify()
            except SQLAlchemyError as exc:  # progress is informative: never fail the work
                LOG.warning("deployment %s: could not record progress of %s: %s",
                            deployment_id, step, exc)
        return report


def _find(session, deployment_id):
    record = session.get(DeploymentRecord, deployment_id)
    if record is None:
        raise errors.NotFound(f"no deployment {deployment_id}")
    return record


def _step(name, done, total):
    return {"name": name, "done": done, "total": total,
            "state": "COMPLETED" if done >= total else "PROCESSING"}


def parse_sig(deployment_id, document):
    """The SIG in ``document`` for ``deployment_id``.

    :raises BadRequest: listing every problem, each field named from the request
        body (``sig.vnfs.0.role``).
    """
    sig = ServiceInstanceGraph.from_dict(document, field_prefix="sig")
    if sig.vcdn_id != deployment_id:
        raise errors.BadRequest(f"invalid SIG: sig.vcdn_id must be the deployment id of the "
                                f"URL, {deployment_id}", field="sig.vcdn_id")
    return sig


def represent(record):
    """The API representation of a deployment (see ``api-spec/ro.yaml``)."""
    deployment = record.deployment or {}
    return {
        "id": record.id,
        "driver": record.driver,
        "status": record.status,
        "steps": record.steps,
        "error": record.error if record.status == ERROR else None,
        "last_error": record.error,
        "entry_point": deployment.get("entry_point"),
        "region_endpoints": deployment.get("region_endpoints", {}),
        "vnfs": [{k: v[k] for k in VNF_FIELDS} for v in deployment.get("vnfs", [])],
        "created_at": isoformat(record.created_at),
        "updated_at": isoformat(record.updated_at),
    }
