"""Running operations: the SO hands SIGs to RO and follows them to the end.

Each operation runs in a worker thread. The runner only polls RO, which does
the work in its own process, so a restarted SO resumes following whatever was
in flight (:meth:`OperationRunner.recover`). A scheduler thread starts vCDNs
whose lease is about to begin.
"""
import concurrent.futures
import datetime as dt
import logging
import threading
import time

from sqlalchemy import select

from cdnaas.common import clock, config, errors
from cdnaas.common.clients import RoClient
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.common.timeutil import aware
from cdnaas.so import capacity
from cdnaas.so.models import Instance, Operation

LOG = logging.getLogger(__name__)

RO_BUSY = ("DEPLOYING", "UPDATING", "DELETING")
LONG_POLL_SECONDS = 5.0  # RO answers at the deployment's next change, or after this


class OperationFailed(Exception):
    """RO reported a failure; what it built was undone (``rolled_back``) or not."""

    def __init__(self, message, rolled_back):
        super().__init__(message)
        self.rolled_back = rolled_back


class OperationRunner:
    """Runs INSTANTIATE, UPDATE and TERMINATE operations of one SO process.

    :param database: the SO's :class:`cdnaas.db.engine.Database`.
    :param ro_client: factory of :class:`RoClient` (called per operation).
    """

    def __init__(self, database, ro_client=RoClient, workers=8):
        self.database = database
        self.ro_client = ro_client
        self.pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="so-op")
        self._running = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()

    # -- scheduling --------------------------------------------------------

    def submit(self, operation_id):
        """Run ``operation_id`` in the background unless it already runs here."""
        with self._lock:
            if operation_id in self._running:
                return
            self._running.add(operation_id)
        self.pool.submit(self._run_guarded, operation_id)

    def recover(self):
        """Resume operations a previous SO process left pending or in progress."""
        with self.database.sessions() as session:
            pending = session.scalars(
                select(Operation.id).join(Instance, Instance.id == Operation.instance_id)
                .where(Operation.state.in_(("PENDING", "PROCESSING")),
                       Instance.state != "SCHEDULED")).all()
        for operation_id in pending:
            LOG.info("resuming operation %s", operation_id)
            self.submit(operation_id)

    def start_due(self, now=None):
        """Start vCDNs whose lease begins within the deployment lead time; return their ids."""
        now = now or clock.now()
        lead = dt.timedelta(seconds=config.float_setting("CDNAAS_DEPLOY_LEAD_SECONDS", 60))
        started = []
        with self.database.transaction() as session:
            due = session.scalars(select(Instance).where(
                Instance.state == "SCHEDULED", Instance.lease_start <= now + lead)).all()
            for instance in due:
                instance.state = "DEPLOYING"
                started.append(instance.id)
        for instance_id in started:
            with self.database.sessions() as session:
                operation_id = session.scalar(select(Operation.id).where(
                    Operation.instance_id == instance_id, Operation.state == "PENDING"))
            if operation_id:
                self.submit(operation_id)
        return started

    def start_scheduler(self):
        """Check for due leases every ``CDNAAS_SO_SCHEDULER_INTERVAL`` seconds in a thread."""
        def loop():
            while not self._stop.wait(config.float_setting("CDNAAS_SO_SCHEDULER_INTERVAL", 1.0)):
                try:
                    self.start_due()
                except Exception:  # keep scheduling; the next pass retries
                    LOG.exception("lease scheduler pass failed")
        threading.Thread(target=loop, name="so-scheduler", daemon=True).start()

    def shutdown(self):
        self._stop.set()
        self.pool.shutdown(wait=False, cancel_futures=True)

    # -- running -----------------------------------------------------------

    def _run_guarded(self, operation_id):
        try:
            self.run(operation_id)
        except Exception:
            LOG.exception("operation %s crashed", operation_id)
            self._finish(operation_id, "FAILED", "internal error; see the SO log", "FAILED")
        finally:
            with self._lock:
                self._running.discard(operation_id)

    def run(self, operation_id):
        """Carry ``operation_id`` to a terminal state (synchronously)."""
        with self.database.transaction() as session:
            operation = session.get(Operation, operation_id)
            if operation is None or operation.state not in ("PENDING", "PROCESSING"):
                return
            operation.state = "PROCESSING"
            kind, instance_id = operation.type, operation.instance_id
        handler = {"INSTANTIATE": self._instantiate, "UPDATE": self._update,
                   "TERMINATE": self._terminate}[kind]
        handler(operation_id, instance_id)

    def _instantiate(self, operation_id, instance_id):
        sig = self._sig(instance_id)
        try:
            deployment = self._apply(operation_id, instance_id, sig)
        except (OperationFailed, errors.CdnaasError, TimeoutError) as exc:
            rolled_back = getattr(exc, "rolled_back", False) or self._undeploy_quietly(instance_id)
            with self.database.transaction() as session:
                capacity.release(session, instance_id)
            self._finish(operation_id, "ROLLED_BACK" if rolled_back else "FAILED",
                         f"deployment failed: {exc}", "FAILED")
            return
        self._record_deployment(instance_id, deployment)
        self._finish(operation_id, "COMPLETED", None, "ACTIVE")

    def _update(self, operation_id, instance_id):
        sig = self._sig(instance_id)
        try:
            deployment = self._apply(operation_id, instance_id, sig)
            names = {v["name"] for v in deployment["vnfs"]}
            if names != {v.name for v in sig.vnfs}:
                raise OperationFailed(deployment.get("last_error") or deployment.get("error")
                                      or "RO kept the previous VNFs", rolled_back=True)
        except (OperationFailed, errors.CdnaasError, TimeoutError) as exc:
            self._restore_previous(operation_id, instance_id)
            self._finish(operation_id, "ROLLED_BACK", f"change failed, previous vCDN kept: {exc}",
                         "ACTIVE")
            return
        self._record_deployment(instance_id, deployment)
        self._finish(operation_id, "COMPLETED", None, "ACTIVE")

    def _terminate(self, operation_id, instance_id):
        ro = self.ro_client()
        try:
            ro.undeploy(instance_id)
            self._follow(operation_id, ro, instance_id, step=0, until=("DELETED",))
        except errors.NotFound:
            pass  # nothing deployed: removing what is gone is success
        except (OperationFailed, errors.CdnaasError, TimeoutError) as exc:
            self._finish(operation_id, "FAILED", f"removal failed, retry DELETE: {exc}", "FAILED")
            return
        self._set_step(operation_id, 0, "COMPLETED")
        with self.database.transaction() as session:
            capacity.release(session, instance_id)
        self._set_step(operation_id, 1, "COMPLETED")
        self._finish(operation_id, "COMPLETED", None, "DELETED")

    # -- helpers -----------------------------------------------------------

    def _sig(self, instance_id):
        with self.database.sessions() as session:
            return ServiceInstanceGraph.from_record(session.get(Instance, instance_id).sig)

    def _apply(self, operation_id, instance_id, sig):
        """PUT the SIG to RO and follow it until ACTIVE; return RO's deployment."""
        ro = self.ro_client()
        self._set_step(operation_id, 1, "PROCESSING")
        try:
            ro.deploy(instance_id, sig.to_dict())
        except errors.Conflict:
            LOG.info("RO already works on %s; following it", instance_id)
        deployment = self._follow(operation_id, ro, instance_id, step=1, until=("ACTIVE",))
        self._set_step(operation_id, 1, "COMPLETED")
        self._set_step(operation_id, 2, "COMPLETED")
        return deployment

    def _follow(self, operation_id, ro, instance_id, step, until):
        """Poll RO until its status is in ``until``; mirror its progress into the step."""
        deadline = time.monotonic() + config.float_setting("CDNAAS_DEPLOY_TIMEOUT", 600)
        while True:
            deployment = ro.get_deployment(instance_id, wait=LONG_POLL_SECONDS)
            self._mirror(operation_id, step, deployment.get("steps") or [])
            status = deployment["status"]
            if status in until:
                return deployment
            if status not in RO_BUSY:
                raise OperationFailed(deployment.get("error") or f"RO ended {status}",
                                      rolled_back=status == "ERROR")
            if time.monotonic() > deadline:
                raise TimeoutError(f"RO still {status} after the deployment timeout")

    def _mirror(self, operation_id, step, ro_steps):
        done = sum(s.get("done", 0) for s in ro_steps)
        total = sum(s.get("total", 0) for s in ro_steps) or 1
        with self.database.transaction() as session:
            operation = session.get(Operation, operation_id)
            steps = [dict(s) for s in operation.steps]
            steps[step].update(state="PROCESSING", done=done, total=total,
                               detail=[{k: s.get(k) for k in ("name", "done", "total", "state")}
                                       for s in ro_steps])
            operation.steps = steps

    def _set_step(self, operation_id, index, state):
        with self.database.transaction() as session:
            operation = session.get(Operation, operation_id)
            steps = [dict(s) for s in operation.steps]
            if index < len(steps):
                steps[index]["state"] = state
                if state == "COMPLETED":
                    steps[index]["done"] = steps[index].get("total", 1)
            operation.steps = steps

    def _record_deployment(self, instance_id, deployment):
        with self.database.transaction() as session:
            instance = session.get(Instance, instance_id)
            instance.entry_point = deployment.get("entry_point")
            instance.region_endpoints = deployment.get("region_endpoints")

    def _restore_previous(self, operation_id, instance_id):
        with self.database.transaction() as session:
            operation = session.get(Operation, operation_id)
            instance = session.get(Instance, instance_id)
            previous = ServiceInstanceGraph.from_record(operation.previous_sig)
            instance.sig = operation.previous_sig
            instance.regions = [{"name": r.name, "demand": r.demand, "quality": r.quality}
                                for r in previous.regions]
            capacity.reserve(session, instance_id, previous, aware(instance.lease_start),
                             aware(instance.lease_end))

    def _undeploy_quietly(self, instance_id):
        """Best-effort removal after a failure RO did not undo itself; True if it worked."""
        ro = self.ro_client()
        try:
            ro.undeploy(instance_id)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if ro.get_deployment(instance_id)["status"] in ("DELETED", "ERROR"):
                    return True
                time.sleep(0.2)
        except errors.NotFound:
            return True
        except errors.CdnaasError:
            LOG.exception("could not remove %s after a failed deployment", instance_id)
        return False

    def _finish(self, operation_id, state, error, instance_state):
        with self.database.transaction() as session:
            operation = session.get(Operation, operation_id)
            operation.state, operation.error = state, error
            steps = [dict(s) for s in operation.steps]
            for step in steps:
                if step["state"] in ("PENDING", "PROCESSING"):
                    step["state"] = "COMPLETED" if state == "COMPLETED" else "FAILED"
            operation.steps = steps
            instance = session.get(Instance, operation.instance_id)
            instance.state = instance_state
            if error:
                instance.state_reason = error
            elif instance_state == "ACTIVE":
                instance.state_reason = None
        LOG.info("operation %s %s: %s", operation_id, state, error or "ok")
