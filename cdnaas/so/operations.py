"""Running operations: the SO hands SIGs to RO and follows them to the end.

Each operation runs in a worker thread. The runner only polls RO, which does
the work in its own process, so a restarted SO resumes following whatever was
in flight (:meth:`OperationRunner.recover`). A scheduler thread starts vCDNs
whose lease is about to begin.

Crash semantics, as Octavia's reverts: while RO cannot be reached (no
connection, or a 5xx answer) every RO call is retried with exponential backoff
(:data:`BACKOFF_FIRST` doubling up to :data:`BACKOFF_MAX` seconds) until
``CDNAAS_DEPLOY_TIMEOUT``; the operation stays ``PROCESSING`` and the capacity
stays reserved meanwhile. 4xx answers are permanent. Capacity is released only
once RO says nothing runs (``DELETED``, or ``ERROR`` with no VNF left). Whatever
ends an operation, its outcome follows what RO reports running, so SO and RO
agree: a rollback is recorded (step :data:`~cdnaas.so.states.ROLL_BACK`) before
it starts, so a restarted SO carries it on instead of redoing the work.

Replicas: any number of SOs may share one PostgreSQL. An operation is run by the
replica that claims it (:class:`cdnaas.db.leases.Claims`: its row locked, ``claimed_by``
and a lease of ``CDNAAS_LEASE_SECONDS`` renewed while it runs); every write of the
runner checks the claim is still its own. The scheduler thread of each replica also
takes over operations whose claim expired (their replica died) and starts due leases
with ``FOR UPDATE SKIP LOCKED``, so no lease is started twice.
"""
import concurrent.futures
import contextlib
import datetime as dt
import logging
import threading
import time

from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from cdnaas import delivery
from cdnaas.common import caching, clock, config, errors
from cdnaas.common.answers import Deployment
from cdnaas.common.clients import RoClient
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.common.timeutil import aware, utcnow
from cdnaas.db import leases
from cdnaas.so import capacity, tls, webhooks
from cdnaas.so import states as S
from cdnaas.so.models import Instance, Operation

LOG = logging.getLogger(__name__)

LONG_POLL_SECONDS = 5.0  # RO answers at the deployment's next change, or after this
BACKOFF_FIRST = 0.2  # seconds before the first retry of an RO call that could not be made
BACKOFF_MAX = 5.0  # the longest wait between two retries


class OperationFailed(Exception):
    """RO reported a failure, or answered a request with a permanent (4xx) refusal."""


class Interrupted(Exception):
    """The runner is shutting down: the operation is left for the next SO to resume."""


def retryable(exc):
    """Whether an error from an RO call may pass by itself (unreachable, 5xx)."""
    return isinstance(exc, errors.CdnaasError) and exc.status >= 500


def serves(deployment, sig):
    """Whether RO's ``deployment`` (a :class:`~cdnaas.common.answers.Deployment`, or None)
    is ACTIVE with ``sig`` (a :class:`ServiceInstanceGraph`): the same SIG, not only the
    same VNF names."""
    return deployment is not None and deployment.status == S.RO_ACTIVE \
        and deployment.sig_digest == sig.digest()


def gone(deployment_id):
    """The :class:`~cdnaas.common.answers.Deployment` of one RO no longer knows: DELETED,
    nothing left."""
    return Deployment(id=deployment_id, driver="", status=S.RO_DELETED, steps=[], error=None,
                      last_error=None, sig_digest=None, entry_point=None, region_endpoints={},
                      vnfs=())


class PatientRo:
    """An :class:`RoClient` whose calls are retried while RO is unreachable or answers 5xx.

    :param client: the RO client.
    :param stop: an event set when the runner shuts down (raises :class:`Interrupted`).
    :param timeout: seconds from now after which a call that still fails raises
        :class:`TimeoutError`; ``CDNAAS_DEPLOY_TIMEOUT`` by default.
    """

    def __init__(self, client, stop, timeout=None):
        self.client = client
        self.stop = stop
        if timeout is None:
            timeout = config.setting("CDNAAS_DEPLOY_TIMEOUT")
        self.deadline = time.monotonic() + timeout

    def call(self, method, *args, **kwargs):
        """``method(*args, **kwargs)`` (``method``: a method of :attr:`client`, such as
        ``ro.client.deploy``), retried with backoff until the deadline.

        :raises CdnaasError: a permanent refusal (4xx), at once.
        :raises TimeoutError: RO still failed at the deadline.
        """
        delay = BACKOFF_FIRST
        while True:
            try:
                return method(*args, **kwargs)
            except errors.CdnaasError as exc:
                if not retryable(exc):
                    raise
                left = self.deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"RO could not be reached until the deployment "
                                       f"timeout: {exc}") from exc
                LOG.warning("RO %s failed (%s); retrying in %.1f s", method.__name__, exc,
                            min(delay, left))
                self.pause(min(delay, left))
                delay = min(delay * 2, BACKOFF_MAX)

    def pause(self, seconds):
        if self.stop.wait(seconds):
            raise Interrupted("the service orchestrator is stopping")

    def expired(self):
        return time.monotonic() > self.deadline

    def current(self, deployment_id, wait=0.0):
        """RO's deployment, or None when RO knows none."""
        try:
            return self.call(self.client.get_deployment, deployment_id, wait=wait)
        except errors.NotFound:
            return None


class OperationRunner:
    """Runs INSTANTIATE, UPDATE and TERMINATE operations of one SO process (replica).

    :param database: the SO's :class:`cdnaas.db.engine.Database`.
    :param ro_client: factory of :class:`RoClient` (called per operation).
    :param owner: this replica's claim value (default: :class:`~cdnaas.db.leases.Claims`').
    """

    def __init__(self, database, ro_client=RoClient, workers=8, owner=None):
        self.database = database
        self.ro_client = ro_client
        self.claims = leases.Claims(database, Operation, "so", owner=owner)
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

    def recover(self, startup=True):
        """Resume operations left pending or in progress; return their ids.

        :param startup: at this replica's start: take the operations of a previous
            process of this replica (every one on SQLite) and those nobody claims;
            otherwise (:meth:`take_over`) only those whose claim expired, or left
            unclaimed for a lease.
        """
        now = utcnow()
        taken = []
        with self.database.transaction() as session:
            found = session.scalars(
                select(Operation).join(Instance, Instance.id == Operation.instance_id)
                .where(Operation.state.in_(S.OPEN), Instance.state != S.SCHEDULED,
                       self.claims.claimable(startup, now))
                .order_by(Operation.created_at)
                .with_for_update(skip_locked=True, of=Operation)).all()
            for operation in found:  # free to take: claimable() selected them
                if operation.claimed_by is not None:
                    LOG.warning("taking over operation %s from %s", operation.id,
                                operation.claimed_by)
                self.claims.take(operation)
                taken.append(operation.id)
        for operation_id in taken:
            LOG.info("resuming operation %s", operation_id)
            self.submit(operation_id)
        return taken

    def take_over(self):
        """Resume operations whose replica died (claim expired); return their ids."""
        return self.recover(startup=False)

    def start_due(self, now=None):
        """Start vCDNs whose lease begins within the deployment lead time; return their ids."""
        now = now or clock.now()
        lead = dt.timedelta(seconds=config.setting("CDNAAS_DEPLOY_LEAD_SECONDS"))
        started = []
        with self.database.transaction() as session:  # peers skip the rows locked here
            due = session.scalars(select(Instance).where(
                Instance.state == S.SCHEDULED, Instance.lease_start <= now + lead)
                .with_for_update(skip_locked=True)).all()
            for instance in due:
                instance.state = S.DEPLOYING
                started.append(instance.id)
        for instance_id in started:
            with self.database.sessions() as session:
                operation_id = session.scalar(select(Operation.id).where(
                    Operation.instance_id == instance_id, Operation.state == S.PENDING))
            if operation_id:
                self.submit(operation_id)
        return started

    def start_scheduler(self):
        """Every ``CDNAAS_SO_SCHEDULER_INTERVAL`` seconds in a thread: start due leases and
        take over the operations of replicas that died."""
        def loop():
            while not self._stop.wait(config.setting("CDNAAS_SO_SCHEDULER_INTERVAL")):
                for task in (self.start_due, self.take_over):
                    try:
                        task()
                    except Exception:  # keep scheduling; the next pass retries
                        LOG.exception("scheduler task %s failed", task.__name__)
        threading.Thread(target=loop, name="so-scheduler", daemon=True).start()

    def shutdown(self):
        self._stop.set()
        self.claims.stop()
        self.pool.shutdown(wait=False, cancel_futures=True)

    # -- running -----------------------------------------------------------

    def _run_guarded(self, operation_id):
        try:
            self.run(operation_id)
        except Interrupted:
            LOG.info("operation %s left for the next start to resume", operation_id)
        except leases.LostClaim as exc:
            LOG.warning("operation %s: %s", operation_id, exc)
        except OperationalError as exc:  # the database went away: the operation is not over
            LOG.warning("operation %s: the database went away while it ran (%s); its claim "
                        "runs out and it is taken over (take_over)", operation_id,
                        errors.outage_words(exc))
        except Exception:
            LOG.exception("operation %s crashed", operation_id)
            try:
                self._finish(operation_id, S.FAILED, "internal error; see the SO log", S.FAILED)
            except Exception:  # pylint: disable=broad-except
                LOG.exception("operation %s could not be marked FAILED", operation_id)
        finally:
            self.claims.drop(operation_id)
            with self._lock:
                self._running.discard(operation_id)

    def run(self, operation_id):
        """Carry ``operation_id`` to a terminal state (synchronously), unless another
        replica holds its claim."""
        with self.database.transaction() as session:
            operation = session.get(Operation, operation_id, with_for_update=True)
            if operation is None or operation.state not in S.OPEN:
                return
            if not self.claims.free(operation):
                LOG.info("operation %s runs on %s", operation_id, operation.claimed_by)
                return
            self.claims.take(operation)
            operation.state = S.PROCESSING
            kind, instance_id = operation.type, operation.instance_id
        handler = {S.INSTANTIATE: self._instantiate, S.UPDATE: self._update,
                   S.TERMINATE: self._terminate, S.INVALIDATE: self._on_caches,
                   S.PREFETCH: self._on_caches}[kind]
        handler(operation_id, instance_id)

    def _ro(self, timeout=None):
        return PatientRo(self.ro_client(), self._stop, timeout)

    def _instantiate(self, operation_id, instance_id):
        if not self._rolling_back(operation_id):
            sig = self._sig(instance_id)
            try:
                deployment = self._apply(operation_id, instance_id, sig, S.DEPLOY)
                if not serves(deployment, sig):
                    raise OperationFailed("RO serves another SIG than this vCDN's")
            except (OperationFailed, errors.CdnaasError, TimeoutError) as exc:
                self._begin_rollback(operation_id, S.DEPLOY, f"deployment failed: {exc}")
            else:
                self._finish(operation_id, S.COMPLETED, None, S.ACTIVE, deployment)
                return
        error = self._error(operation_id)
        try:
            self._remove(operation_id, instance_id, S.ROLL_BACK)
        except (OperationFailed, errors.CdnaasError, TimeoutError) as exc:
            self._finish(operation_id, S.FAILED, f"{error}; removing what was built failed too "
                         f"({exc}): its capacity stays reserved until the vCDN is deleted",
                         S.FAILED)
            return
        with self._claimed(operation_id) as session:
            capacity.release(session, instance_id)
        self._set_step(operation_id, S.ROLL_BACK, S.COMPLETED)
        self._finish(operation_id, S.ROLLED_BACK, error, S.FAILED)

    def _update(self, operation_id, instance_id):
        sig = self._sig(instance_id)
        if not self._rolling_back(operation_id):
            try:
                deployment = self._apply(operation_id, instance_id, sig, S.APPLY)
                if not serves(deployment, sig):
                    raise OperationFailed(deployment.last_error or deployment.error
                                          or "RO kept the previous VNFs")
            except (OperationFailed, errors.CdnaasError, TimeoutError) as exc:
                self._begin_rollback(operation_id, S.APPLY,
                                     f"change failed, previous vCDN kept: {exc}")
            else:
                self._complete_update(operation_id, instance_id, sig, deployment)
                return
        # what serves now decides: the previous SIG (rolled back), the new one (done after all)
        error = self._error(operation_id)
        try:
            deployment = self._settle(self._ro(), operation_id, instance_id, S.ROLL_BACK)
        except (OperationFailed, errors.CdnaasError, TimeoutError) as exc:
            deployment = {"status": f"unknown ({exc})"}
        with self.database.sessions() as session:
            previous = ServiceInstanceGraph.from_record(
                session.get(Operation, operation_id).previous_sig)
        if serves(deployment, previous):
            self._restore_previous(operation_id, instance_id)
            self._set_step(operation_id, S.ROLL_BACK, S.COMPLETED)
            self._finish(operation_id, S.ROLLED_BACK, error, S.ACTIVE)
        elif serves(deployment, sig):
            self._set_step(operation_id, S.ROLL_BACK, S.SKIPPED)
            self._complete_update(operation_id, instance_id, sig, deployment)
        else:  # reservations stay those of both SIGs: they cover whatever may run
            status = deployment.status if deployment is not None else "gone"
            self._finish(operation_id, S.FAILED, f"{error}; RO now reports the vCDN {status}, "
                         "neither the previous nor the new SIG: delete it", S.FAILED)

    def _complete_update(self, operation_id, instance_id, sig, deployment):
        with self._claimed(operation_id) as session:
            instance = session.get(Instance, instance_id)
            capacity.reserve(session, instance_id, sig, aware(instance.lease_start),
                             aware(instance.lease_end))
        self._finish(operation_id, S.COMPLETED, None, S.ACTIVE, deployment)
        with self.database.sessions() as session:
            previous = session.get(Operation, operation_id).previous_sig
        rotated = tls.superseded_ref(ServiceInstanceGraph.from_record(previous), sig)
        if rotated:  # the new certificate serves: the old one goes
            tls.release(rotated, f"operation {operation_id} replaced it", self._ro())

    def _terminate(self, operation_id, instance_id):
        try:
            self._remove(operation_id, instance_id, S.UNDEPLOY)
            if self._served_https(instance_id):  # nothing runs: no certificate stays
                tls.release_all(instance_id, self._ro())
        except (OperationFailed, errors.CdnaasError, TimeoutError) as exc:
            self._finish(operation_id, S.FAILED, f"removal failed, retry DELETE: {exc}", S.FAILED)
            return
        self._set_step(operation_id, S.UNDEPLOY, S.COMPLETED)
        with self._claimed(operation_id) as session:
            capacity.release(session, instance_id)
        self._set_step(operation_id, S.RELEASE, S.COMPLETED)
        self._finish(operation_id, S.COMPLETED, None, S.DELETED)

    def _on_caches(self, operation_id, instance_id):
        """An INVALIDATE or PREFETCH: RO works on every cache at once and answers with each
        one's result, which the step records (``detail``: one entry per cache); the
        operation completes when every cache confirmed. The instance's state is left
        alone. While RO changes the vCDN (409, an update runs), the runner waits for it to
        rest and asks again (new caches start empty). Asking again after a restart is
        harmless: a purge or a fetch done twice leaves the caches the same."""
        with self.database.sessions() as session:
            operation = session.get(Operation, operation_id)
            kind, request = operation.type, operation.request
        step = S.STEPS[kind][0]
        self._set_step(operation_id, step, S.PROCESSING)
        ro = self._ro()
        # RO answers once every cache is done: wait for it as long as for a deployment
        ro.client.timeout = max(ro.client.timeout, config.setting("CDNAAS_DEPLOY_TIMEOUT"))
        try:
            while True:
                try:
                    if kind == S.INVALIDATE:
                        answer = ro.call(ro.client.invalidate, instance_id, request["paths"],
                                         request["prefixes"])
                    else:
                        answer = ro.call(ro.client.prefetch, instance_id, request["paths"])
                    break
                except errors.Conflict:
                    if (ro.current(instance_id) or gone(instance_id)).status not in S.RO_BUSY:
                        raise
                    self._settle(ro, operation_id, instance_id, step)
        except (errors.CdnaasError, TimeoutError) as exc:
            self._finish(operation_id, S.FAILED, f"the caches could not be asked: {exc}", None)
            return
        caches = answer.caches
        failed = [c for c in caches if not c.ok]
        detail = [{"name": c.name, "region": c.region, "done": c.done,
                   "total": c.requests, "detail": c.detail, "seconds": c.seconds,
                   "state": S.COMPLETED if c.ok else S.FAILED} for c in caches]

        def record(steps):
            for entry in steps:
                if entry["name"] == step:
                    entry.update(done=len(caches) - len(failed), total=len(caches), detail=detail)
        self._edit_steps(operation_id, record)
        if failed:
            self._finish(operation_id, S.FAILED, f"{len(failed)} of {len(caches)} caches did not "
                         "confirm: " + "; ".join(f"{c.name}: {c.detail}" for c in failed[:5]),
                         None)
        else:
            self._finish(operation_id, S.COMPLETED, None, None)

    # -- talking to RO -----------------------------------------------------

    def _apply(self, operation_id, instance_id, sig, step):
        """Have RO run ``sig`` and follow it until ACTIVE; return RO's deployment.

        A resumed operation (``step`` already PROCESSING) first looks at what RO
        has: the SIG already serves, RO still works, or an update of it failed.
        """
        ro = self._ro()
        resumed = self._step_state(operation_id, step) == S.PROCESSING
        self._set_step(operation_id, step, S.PROCESSING)
        current = ro.current(instance_id) if resumed else None
        if current is not None and current.status in (S.RO_ERROR, S.RO_DELETED):
            raise OperationFailed(current.error or f"RO reports it {current.status}")
        serving = current is not None and current.status == S.RO_ACTIVE
        if serving and not serves(current, sig) and current.last_error:
            raise OperationFailed(current.last_error)  # RO tried this SIG and kept the last
        if current is None or (serving and not serves(current, sig)):
            try:
                ro.call(ro.client.deploy, instance_id, sig.to_dict())
            except errors.Conflict:
                LOG.info("RO already works on %s; following it", instance_id)
        deployment = self._follow(operation_id, ro, instance_id, step, until=(S.RO_ACTIVE,))
        self._set_step(operation_id, step, S.COMPLETED, S.SERVE)
        return deployment

    def _remove(self, operation_id, instance_id, step):
        """Have RO remove the deployment; return once RO says nothing of it runs.

        :raises OperationFailed: RO could not remove everything (it is ERROR with
            VNFs left), or refuses for good.
        """
        ro = self._ro()
        self._set_step(operation_id, step, S.PROCESSING)
        while True:
            try:
                ro.call(ro.client.undeploy, instance_id)
            except errors.NotFound:
                return
            except errors.Conflict as exc:  # a deploy or update runs: let it end, then remove
                if (ro.current(instance_id) or gone(instance_id)).status not in S.RO_BUSY:
                    raise OperationFailed(str(exc)) from exc
                self._settle(ro, operation_id, instance_id, step)
                continue
            deployment = self._follow(operation_id, ro, instance_id, step,
                                      until=(S.RO_DELETED, S.RO_ERROR))
            if deployment.status == S.RO_DELETED or not deployment.vnfs:
                return
            raise OperationFailed(deployment.error or "RO could not remove every VNF")

    def _settle(self, ro, operation_id, instance_id, step):
        """Follow RO until the deployment rests (ACTIVE, ERROR, DELETED); None if unknown."""
        if ro.current(instance_id) is None:
            return None
        return self._follow(operation_id, ro, instance_id, step,
                            until=(S.RO_ACTIVE, S.RO_ERROR, S.RO_DELETED))

    def _follow(self, operation_id, ro, instance_id, step, until):
        """Poll RO until its status is in ``until``; mirror its progress into the step.

        :raises OperationFailed: RO rests in another status.
        :raises TimeoutError: RO is still busy (or unreachable) at the deadline.
        """
        while True:
            if self.claims.lost(operation_id):
                raise leases.LostClaim(f"operation {operation_id} was taken over")
            deployment = ro.current(instance_id, wait=LONG_POLL_SECONDS) or gone(instance_id)
            self._mirror(operation_id, step, deployment.steps or [])
            status = deployment.status
            if status in until:
                return deployment
            if status not in S.RO_BUSY:
                raise OperationFailed(deployment.error or f"RO ended {status}")
            if ro.expired():
                raise TimeoutError(f"RO still {status} after the deployment timeout")

    # -- records -----------------------------------------------------------

    def _sig(self, instance_id):
        with self.database.sessions() as session:
            return ServiceInstanceGraph.from_record(session.get(Instance, instance_id).sig)

    @contextlib.contextmanager
    def _claimed(self, operation_id):
        """A transaction in which the operation's row is locked and still claimed here.

        :raises LostClaim: another replica took the operation over.
        """
        with self.database.transaction() as session:
            self.claims.check(session.get(Operation, operation_id, with_for_update=True))
            yield session

    def _edit_steps(self, operation_id, change):
        """Apply ``change(steps)`` to the operation's steps (a list of dicts) and save them."""
        with self._claimed(operation_id) as session:
            operation = session.get(Operation, operation_id)
            steps = [dict(s) for s in operation.steps]
            change(steps)
            operation.steps = steps

    def _step_state(self, operation_id, name):
        with self.database.sessions() as session:
            steps = session.get(Operation, operation_id).steps
        return next((s["state"] for s in steps if s["name"] == name), None)

    def _mirror(self, operation_id, name, ro_steps):
        done = sum(s.get("done", 0) for s in ro_steps)
        total = sum(s.get("total", 0) for s in ro_steps) or 1
        detail = [{k: s.get(k) for k in ("name", "done", "total", "state")} for s in ro_steps]

        def change(steps):
            for step in steps:
                if step["name"] == name:
                    step.update(state=S.PROCESSING, done=done, total=total, detail=detail)
        self._edit_steps(operation_id, change)

    def _set_step(self, operation_id, name, state, *others):
        """Put step ``name`` (and the steps ``others``) in ``state``, in one write."""
        names = {name, *others}

        def change(steps):
            for step in steps:
                if step["name"] in names:
                    step["state"] = state
                    if state == S.COMPLETED:
                        step["done"] = step.get("total", 1)
        self._edit_steps(operation_id, change)

    def _begin_rollback(self, operation_id, failed_step, error):
        """Record the failure and a :data:`~cdnaas.so.states.ROLL_BACK` step before undoing."""
        LOG.warning("operation %s: rolling back: %s", operation_id, error)
        with self._claimed(operation_id) as session:
            operation = session.get(Operation, operation_id)
            operation.error = error
            steps = [dict(s) for s in operation.steps]
            for step in steps:
                if step["name"] == failed_step or step["state"] == S.PROCESSING:
                    step["state"] = S.FAILED
            steps.append({"name": S.ROLL_BACK, "state": S.PENDING, "done": 0, "total": 1})
            operation.steps = steps

    def _served_https(self, instance_id):
        """Whether a SIG of the vCDN (its own, or one an operation replaced) had a certificate."""
        with self.database.sessions() as session:
            sigs = [session.get(Instance, instance_id).sig, *session.scalars(
                select(Operation.previous_sig).where(Operation.instance_id == instance_id))]
        return any(tls.sig_tls(sig) for sig in sigs)

    def _rolling_back(self, operation_id):
        return self._step_state(operation_id, S.ROLL_BACK) is not None

    def _error(self, operation_id):
        with self.database.sessions() as session:
            return session.get(Operation, operation_id).error

    def _restore_previous(self, operation_id, instance_id):
        with self._claimed(operation_id) as session:
            operation = session.get(Operation, operation_id)
            instance = session.get(Instance, instance_id)
            previous = ServiceInstanceGraph.from_record(operation.previous_sig)
            abandoned = tls.superseded_ref(ServiceInstanceGraph.from_record(instance.sig),
                                           previous)
            instance.sig = operation.previous_sig
            instance.service = delivery.restored(
                caching.with_rules(tls.restored(instance.service, previous),
                                   previous.service.get("cache_rules")),
                previous.service) or None
            instance.regions = [{"name": r.name, "demand": r.demand, "quality": r.quality}
                                for r in previous.regions]
            instance.origin = previous.origin.url
            if operation.previous_lease_end is not None:
                instance.lease_end = operation.previous_lease_end
            instance.revision += 1
            capacity.reserve(session, instance_id, previous, aware(instance.lease_start),
                             aware(instance.lease_end))
        if abandoned:  # the change's new certificate never served
            tls.release(abandoned, f"operation {operation_id} was rolled back", self._ro())

    def _finish(self, operation_id, state, error, instance_state, deployment=None):
        """End the operation in ``state``; the instance goes to ``instance_state`` (None:
        left as it is, as a cache operation leaves it), with the entry point and region
        endpoints of RO's ``deployment`` if given. Its ``operation.ended`` event is put in
        the webhook outbox in the same transaction."""
        with self._claimed(operation_id) as session:
            operation = session.get(Operation, operation_id)
            operation.state, operation.error = state, error
            self.claims.give_back(operation)
            steps = [dict(s) for s in operation.steps]
            for step in steps:
                if step["state"] in S.OPEN:
                    step["state"] = S.COMPLETED if state == S.COMPLETED else S.FAILED
            operation.steps = steps
            instance = session.get(Instance, operation.instance_id)
            if deployment is not None:
                instance.entry_point = deployment.entry_point
                instance.region_endpoints = deployment.region_endpoints
            webhooks.operation_ended(session, instance.tenant, operation)  # with its end
            if instance_state is None:
                LOG.info("operation %s %s: %s", operation_id, state, error or "ok")
                return
            instance.state = instance_state
            if error:
                instance.state_reason = error
            elif instance_state == S.ACTIVE:
                instance.state_reason = None
        LOG.info("operation %s %s: %s", operation_id, state, error or "ok")
