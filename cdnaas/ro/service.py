"""Resource Orchestrator logic: SIGs deployed, changed and removed through the VIM driver.

A request marks its deployment's record (``DEPLOYING``, ``UPDATING``,
``DELETING``) with its row locked and claims it for this replica
(:class:`cdnaas.db.leases.Claims`: ``claimed_by`` and a lease renewed while the
work runs), then answers at once; a thread of the pool calls the driver, records
its progress and the outcome, and gives the claim back. Only a request that moves
a record out of a resting status starts work, so one deployment is never worked
on by two threads, or two replicas, at once; every write of the work checks the
claim is still this replica's.

Replicas: any number of ROs may share one PostgreSQL. A replica starting, and
every replica periodically, finishes the work of replicas whose claim expired
(they died), as a restart does (:meth:`DeploymentService.recover`); work other
live replicas do is left alone. A follower's long poll (``get(wait=...)``) is
woken by this replica's own writes and reads the row again every
:data:`ROW_POLL_SECONDS` while another replica does the work.
"""
import concurrent.futures
import dataclasses
import functools
import itertools
import logging
import threading
import time

from sqlalchemy import or_, select
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError

from cdnaas.common import caching, challenges, config, errors
from cdnaas.common.sig import ServiceInstanceGraph, digest
from cdnaas.common.timeutil import isoformat
from cdnaas.db import leases
from cdnaas.ro import logstream_metrics, reconciliation, traffic
from cdnaas.ro.decoded_deployments import DecodedDeployments
from cdnaas.ro.models import (ACTIVE, BUSY, DELETED, DELETING, DEPLOYING, ERROR, UPDATING,
                              DeploymentRecord, utcnow)
from cdnaas.ro.vim import steps as step_names
from cdnaas.ro.vim.base import Deployment, EntryPoint, RemovalIncomplete, VimError
from cdnaas.ro.zones import delegations
from cdnaas.ro.zones.base import ZoneError

LOG = logging.getLogger(__name__)
PROGRESS_INTERVAL = 0.5  # seconds between two recorded reports of a step in progress
PROGRESS_ANSWER_SECONDS = 0.5  # the soonest a long poll answers a change of progress only
ROW_POLL_SECONDS = 0.2  # how often a long poll reads a row another replica works on
INSERT_RETRIES = 3  # tries of a request racing another replica to create one record

VNF_FIELDS = ("name", "role", "region", "host", "address", "vcpus")
RESTART = "a restart of the resource orchestrator"  # what interrupted work a replica finishes


class DeploymentService:
    """Deployments of SIGs through ``driver``, recorded in ``database``.

    :param database: the RO's :class:`~cdnaas.db.engine.Database`.
    :param driver: the :class:`~cdnaas.ro.vim.base.VimDriver` in use.
    :param owner: this replica's claim value (default: :class:`~cdnaas.db.leases.Claims`').
    """

    def __init__(self, database, driver, owner=None):
        self.database = database
        self.driver = driver
        self.claims = leases.Claims(database, DeploymentRecord, "ro", owner=owner)
        self.decoded = DecodedDeployments(database)  # what the IM's readings and placement read
        workers = config.setting("CDNAAS_RO_WORKERS")
        self.pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="ro-work")
        self._changed = threading.Condition()  # notified whenever a record is written
        self._version = 0  # how many writes this replica notified
        self._saved = 0  # how many of them were outcomes (:meth:`_save`), not progress
        self._stop = threading.Event()
        self._watcher = None

    # -- requests ---------------------------------------------------------

    def put(self, deployment_id, document):
        """Deploy ``document`` (a SIG) as ``deployment_id``, or update the ACTIVE deployment.

        :returns: the representation, marked ``DEPLOYING`` or ``UPDATING``.
        :raises BadRequest: the SIG is invalid or names another vCDN.
        :raises Conflict: the deployment is being worked on, or belongs to another driver.
        """
        sig = parse_sig(deployment_id, document)
        for attempt in range(1, INSERT_RETRIES + 1):
            try:
                with self.database.transaction() as session:
                    record = session.get(DeploymentRecord, deployment_id, with_for_update=True)
                    if record is None:
                        record = DeploymentRecord(id=deployment_id, steps=[], status=DEPLOYING,
                                                  driver=self.driver.name, sig=sig.to_dict(),
                                                  created_at=utcnow())
                        session.add(record)
                        session.flush()  # a peer inserting it too fails one of us here
                    else:
                        self._check_idle(record)
                        self._check_driver(record)
                    if record.status == ACTIVE:
                        record.mark(UPDATING, steps=[], error=None)
                        work = self._update
                    else:
                        record.mark(DEPLOYING, driver=self.driver.name, sig=sig.to_dict(),
                                    steps=[], error=None)
                        work = self._deploy
                    self.claims.take(record)
                    view = represent(record)
                break
            except IntegrityError:  # another replica created it: look again
                if attempt == INSERT_RETRIES:
                    raise
        self.pool.submit(self._run, deployment_id, work, sig)
        return view

    def get(self, deployment_id, wait=0.0):
        """The representation of ``deployment_id``. :raises NotFound: unknown id.

        :param wait: while the deployment is being worked on, wait up to this many
            seconds for its next change before answering, so a follower learns of it
            without polling: a change of status at once, one of progress only once
            :data:`PROGRESS_ANSWER_SECONDS` have passed since the question (a follower
            mirroring the progress of many VNFs asks a few times a second, not once a VNF).
            The record is read again only when it may have changed so (this replica's
            progress reports wake no early reader); a peer's work is polled for.
        """
        seen, saved = self._version, self._saved
        view, local = self._read(deployment_id)
        latest, moved = view, False
        asked = time.monotonic()
        deadline, progressed = asked + wait, asked + PROGRESS_ANSWER_SECONDS
        while view["status"] in BUSY and (left := deadline - time.monotonic()) > 0:
            early = time.monotonic() < progressed
            timeout = min(left, progressed - time.monotonic()) if early else left
            with self._changed:  # this replica's writes wake us; a peer's are polled for
                self._changed.wait_for(lambda: self._saved != saved or (
                    not early and self._version != seen),
                    timeout if local else min(timeout, ROW_POLL_SECONDS))
                moved = moved or self._version != seen
                resaved = self._saved != saved
                seen, saved = self._version, self._saved
            ripe = time.monotonic() >= progressed
            if local and not resaved and not (moved and ripe):
                continue
            latest, local = self._read(deployment_id)
            if latest["status"] != view["status"] or (ripe and _moved(view, latest)):
                return latest
        return latest

    def _read(self, deployment_id):
        """``(representation, whether this replica does its work)``."""
        with self.database.transaction() as session:
            record = _find(session, deployment_id)
            return represent(record), self.claims.mine(record)

    def _notify(self, saved=False):
        """Wake the long polls (:meth:`get`) after a write (``saved``: of :meth:`_save`)."""
        with self._changed:
            self._version += 1
            self._saved += saved
            self._changed.notify_all()

    def list(self, live=False):
        """Representations of every deployment (``live``: those not DELETED), oldest first."""
        query = select(DeploymentRecord).order_by(DeploymentRecord.created_at,
                                                  DeploymentRecord.id)
        if live:
            query = query.where(DeploymentRecord.status != DELETED)
        with self.database.transaction() as session:
            return [represent(r) for r in session.scalars(query)]

    def placement(self):
        """``{host: ["deployment/VNF", ...]}`` of every VNF of the deployments not DELETED
        that sits on a host: what the IM's host plan needs of them (:meth:`list` works
        out a whole representation, its SIG's digest too, of each). Each record's VNFs
        are decoded once per version (:mod:`cdnaas.ro.decoded_deployments`)."""
        carried = {}
        for found in self.decoded.live():
            for host, vnf in found.placed:
                carried.setdefault(host, []).append(vnf)
        return carried

    def delete(self, deployment_id):
        """Remove ``deployment_id``'s resources.

        :returns: (representation, HTTP status): 202 once removal started or while
            it runs; 200 when there is nothing to remove (already DELETED or unknown).
        :raises Conflict: a deploy or update is running, or another driver owns it.
        """
        with self.database.transaction() as session:
            record = session.get(DeploymentRecord, deployment_id, with_for_update=True)
            if record is None:
                return {"id": deployment_id, "status": DELETED}, 200
            if record.status in (DELETED, DELETING):
                return represent(record), 200 if record.status == DELETED else 202
            self._check_idle(record)
            self._check_driver(record)
            record.mark(DELETING, steps=[], error=None)
            self.claims.take(record)
            view = represent(record)
        self.pool.submit(self._run, deployment_id, self._terminate)
        return view, 202

    def health(self, deployment_id):
        """Health of each VNF of an ACTIVE deployment, as the driver checks it.

        :raises NotFound: unknown id. :raises Conflict: the deployment is not ACTIVE.
        :raises UpstreamError: the driver could not check.
        """
        return self._health(deployment_id, self._active(deployment_id, "health is checked"))

    def metrics(self, deployment_id):
        """Load figures of each VNF of an ACTIVE deployment, as the driver reads them.

        :raises NotFound: unknown id. :raises Conflict: the deployment is not ACTIVE.
        :raises UpstreamError: the driver could not read them.
        """
        return self._metrics(deployment_id, self._active(deployment_id, "metrics are read"))

    def traffic(self, deployment_id, cursor=None):
        """New traffic of an ACTIVE deployment's balancers since ``cursor``, per region and
        minute, with the cursor to send next (:func:`cdnaas.ro.traffic.read`).

        :raises NotFound: unknown id. :raises Conflict: the deployment is not ACTIVE.
        :raises BadRequest: a cursor this service did not make.
        :raises UpstreamError: the driver could not read the logs.
        """
        return self._traffic(deployment_id, self._active(deployment_id, "traffic is read"),
                             cursor)

    def readings(self, deployment_id, cursor=None):
        """:meth:`health`, :meth:`metrics` and :meth:`traffic` of an ACTIVE deployment in
        one answer, its record read once: what the Instance Manager reads of every vCDN
        each pass. Traffic that cannot be read (the VIM, a cursor this service did not
        make) is ``traffic: null`` with ``traffic_error``: health and figures still count.

        :raises NotFound, Conflict, UpstreamError: as :meth:`health` and :meth:`metrics`.
        """
        return self._readings(deployment_id, self._active(deployment_id, "readings are taken"),
                              cursor)

    def readings_many(self, asked):
        """:meth:`readings` of many deployments, their records read in one query (and their
        deployments only where written since this process decoded them:
        :mod:`cdnaas.ro.decoded_deployments`).

        :param asked: ``[{"id", "cursor"?}, ...]``.
        :returns: one answer per entry, in order: :meth:`readings`' answer, or
            ``{"id", "error": {"status", "message"}}`` where that call would have raised.
        """
        records = self.decoded.of([entry["id"] for entry in asked])
        answers = []
        for entry in asked:
            try:
                record = records.get(entry["id"])
                self._check_active(entry["id"], record, "readings are taken")
                answers.append(self._readings(entry["id"], record.deployment,
                                              entry.get("cursor")))
            except errors.CdnaasError as exc:
                answers.append({"id": entry["id"],
                                "error": {"status": exc.status, "message": exc.message}})
        return answers

    def _readings(self, deployment_id, deployment, cursor):
        found = {"id": deployment_id, "health": self._health(deployment_id, deployment),
                 "metrics": self._metrics(deployment_id, deployment), "traffic": None,
                 "traffic_error": None}
        try:
            found["traffic"] = self._traffic(deployment_id, deployment, cursor)
        except (errors.BadRequest, errors.UpstreamError) as exc:
            found["traffic_error"] = exc.message
        return found

    def _health(self, deployment_id, deployment):
        try:
            checks = self.driver.health(deployment)
        except VimError as exc:
            raise errors.UpstreamError(f"the VIM could not check {deployment_id}: {exc}") from exc
        return {"healthy": all(c.healthy for c in checks),
                "vnfs": [_plain(c) for c in checks]}

    def _metrics(self, deployment_id, deployment):
        try:
            figures = self.driver.metrics(deployment)
        except VimError as exc:
            raise errors.UpstreamError(f"the VIM could not read {deployment_id}: {exc}") from exc
        return {"id": deployment_id, "vnfs": [_plain(f) for f in figures]}

    def _traffic(self, deployment_id, deployment, cursor):
        try:
            return {"id": deployment_id, **traffic.read(self.driver, deployment, cursor)}
        except VimError as exc:
            raise errors.UpstreamError(f"the VIM could not read the logs of {deployment_id}: "
                                       f"{exc}") from exc

    def access_log(self, deployment_id, since, until, limit):
        """NDJSON lines of an ACTIVE deployment's requests within ``[since, until)``
        (epoch seconds), at most ``limit`` (:func:`cdnaas.ro.traffic.export`).

        :raises NotFound, Conflict: as :meth:`traffic`; both before the first line.
        """
        deployment = self._active(deployment_id, "its access log is read")
        lines = traffic.export(self.driver, deployment, since, until, limit)
        try:
            first = next(lines, b"")
        except VimError as exc:
            raise errors.UpstreamError(f"the VIM could not read the logs of {deployment_id}: "
                                       f"{exc}") from exc
        return itertools.chain([first], lines)

    def log_streams(self, deployment_id):
        """The counts of an ACTIVE deployment's log shippers
        (:meth:`VimDriver.log_stream_status`), also set as Prometheus gauges
        (:mod:`cdnaas.ro.logstream_metrics`).

        :returns: ``{"id", "vnfs": [{"name", "region", "shipper"}]}``.
        :raises NotFound, Conflict, UpstreamError: as :meth:`health`.
        """
        deployment = self._active(deployment_id, "its log streams are read")
        try:
            vnfs = self.driver.log_stream_status(deployment)
        except VimError as exc:
            raise errors.UpstreamError(f"the VIM could not read the log shippers of "
                                       f"{deployment_id}: {exc}") from exc
        logstream_metrics.record(deployment_id, vnfs)
        return {"id": deployment_id, "vnfs": vnfs}

    def invalidate(self, deployment_id, body):
        """Purge ``body``'s paths and prefixes from every cache of an ACTIVE deployment
        (:meth:`VimDriver.invalidate`); answers once every cache confirmed or failed.

        :returns: ``{"id", "caches": [CacheResult as a dict, ...]}``.
        :raises BadRequest: a path or prefix is refused (:func:`caching.invalidation`).
        :raises NotFound, Conflict, UpstreamError: as :meth:`health`.
        """
        request = caching.invalidation(body)
        return self._on_caches(deployment_id, "caches are purged", lambda deployment:
                               self.driver.invalidate(deployment, request["paths"],
                                                      request["prefixes"]))

    def prefetch(self, deployment_id, body):
        """Have every cache of an ACTIVE deployment fetch ``body``'s paths
        (:meth:`VimDriver.prefetch`); answers as :meth:`invalidate`."""
        request = caching.prefetch(body)
        return self._on_caches(deployment_id, "caches prefetch", lambda deployment:
                               self.driver.prefetch(deployment, request["paths"]))

    def check_challenges(self, deployment_id, body):
        """Check that the caches of an ACTIVE deployment answer exactly
        ``body["challenges"]`` (ACME HTTP-01, :func:`cdnaas.common.challenges.parse`):
        they answer any token statelessly with the thumbprint of its SIG
        (:func:`cdnaas.common.challenges.check_answered`), so nothing is written.

        :returns: ``{"answered": how many}``.
        :raises BadRequest: an answer is refused (named).
        :raises NotFound: no such deployment.
        :raises Conflict: it is not ACTIVE, its certificate is not managed, or its caches
            answer for another ACME account.
        """
        answers = body.get("challenges") if isinstance(body, dict) else None
        count = len(challenges.parse(answers))
        with self.database.transaction() as session:
            record = _find(session, deployment_id)
            self._check_active(deployment_id, record, "ACME challenges are answered")
            service = ServiceInstanceGraph.from_record(record.sig).service
        challenges.check_answered(service, answers)
        LOG.info("caches of %s answer the %d ACME challenge(s) of the order", deployment_id,
                 count)
        return {"answered": count}

    def _on_caches(self, deployment_id, what, action):
        deployment = self._active(deployment_id, what)
        try:
            results = action(deployment)
        except VimError as exc:
            raise errors.UpstreamError(f"the VIM could not reach the caches of "
                                       f"{deployment_id}: {exc}") from exc
        return {"id": deployment_id, "caches": [dataclasses.asdict(r) for r in results]}

    def _active(self, deployment_id, what):
        """The driver's record of an ACTIVE deployment of this driver."""
        with self.database.transaction() as session:
            record = _find(session, deployment_id)
            self._check_active(deployment_id, record, what)
            return Deployment.from_dict(record.deployment)

    def _check_active(self, deployment_id, record, what):
        """:raises NotFound: ``record`` is None (unknown). :raises Conflict: it is not
        ACTIVE, or another driver built it. ``record``: a row, or anything with its ``id``,
        ``status``, ``driver`` and ``deployment`` (None while nothing runs)."""
        if record is None:
            raise errors.NotFound(f"no deployment {deployment_id}")
        if record.status != ACTIVE:
            raise errors.Conflict(f"deployment {deployment_id} is {record.status}; "
                                  f"{what} only while it is ACTIVE")
        self._check_driver(record)

    # -- start-up ---------------------------------------------------------

    def recover(self, startup=True):
        """Finish or undo what a crash left half-done, then let the driver remove strays.

        Deployments of this driver left ``DEPLOYING`` have whatever of them runs
        removed and become ``ERROR`` (nothing left: SO rolls back and releases the
        capacity); ``UPDATING`` ones are brought back to the recorded deployment
        (:meth:`VimDriver.restore`) and are ``ACTIVE`` again, still serving, with
        ``error`` saying the update was undone (``ERROR`` if that failed);
        ``DELETING`` ones finish as ``DELETED``. Then ``driver.cleanup`` gets the ids
        that still own resources or are being worked on, a reconciliation a restore of
        the databases left owed is carried out (:meth:`_reconcile_after_restore`), and a
        thread starts that finishes, every half lease, the work of replicas that die
        later (:meth:`take_over`).

        Only deployments nobody else works on are touched: at start, those this
        replica's previous process claimed (every one on SQLite: one process) or
        nobody claims; later, those whose claim expired or that stayed unclaimed a
        lease long. Work another live replica does is left to it.

        :returns: the ids finished or undone.
        """
        now = leases.utcnow()
        with self.database.transaction() as session:
            interrupted = session.scalars(select(DeploymentRecord).where(
                DeploymentRecord.status.in_(BUSY),
                DeploymentRecord.driver == self.driver.name,
                self.claims.claimable(startup, now))
                .with_for_update(skip_locked=True)).all()
            causes = {}
            for record in interrupted:
                causes[record.id] = RESTART
                if record.claimed_by is not None and \
                        leases.name_of(record.claimed_by) != self.claims.name:
                    LOG.warning("deployment %s: taking over from %s", record.id,
                                record.claimed_by)
                    causes[record.id] = f"the loss of resource orchestrator replica " \
                                        f"{leases.name_of(record.claimed_by)}"
                self.claims.take(record)
        for record in interrupted:
            self._guarded(record.id, self._finish_interrupted, record, causes[record.id])
        if not startup:
            return [r.id for r in interrupted]
        with self.database.transaction() as session:
            known = set(session.scalars(select(DeploymentRecord.id).where(
                or_(DeploymentRecord.deployment.is_not(None),
                    DeploymentRecord.status.in_(BUSY)),  # a peer's work: not a stray
                DeploymentRecord.driver == self.driver.name)))
        self._watch()
        removed = []
        try:
            removed = self.driver.cleanup(known)
        except VimError as exc:
            LOG.warning("driver %s could not remove stray deployments: %s", self.driver.name, exc)
        if removed:
            LOG.info("removed stray deployments %s", ", ".join(removed))
        self._reconcile_after_restore(removed)
        return [r.id for r in interrupted]

    def _reconcile_after_restore(self, removed):
        """Carry out the reconciliations a restore of the databases left owed
        (:mod:`cdnaas.ro.reconciliation`): every ACTIVE deployment of this driver, marked
        UPDATING and claimed first, is brought back to its record as an interrupted
        update is; ``removed`` (the stray deployments cleanup just removed) is reported.
        One that fails is tried again once the others are done (its recorded addresses
        may have been held by another's VNFs not recorded), then rests ERROR."""
        with self.database.transaction() as session:
            owed = reconciliation.take_owed(session, self.claims)
            if not owed:
                return
            records = session.scalars(select(DeploymentRecord).where(
                DeploymentRecord.status == ACTIVE, DeploymentRecord.driver == self.driver.name,
                DeploymentRecord.deployment.is_not(None))
                .order_by(DeploymentRecord.created_at).with_for_update(skip_locked=True)).all()
            for record in records:
                steps = [s for s in record.steps if s["name"] != reconciliation.STEP]
                record.mark(UPDATING, steps=steps + [_step(reconciliation.STEP, 0, 1)])
                self.claims.take(record)
        cause = owed[0].cause
        LOG.warning("reconciling what runs with the records after %s: %d deployment(s)", cause,
                    len(records))
        actions, plans = reconciliation.removed_deployments(removed), {}
        for record in records:  # what each VNF undergoes, found before anything changes
            try:
                plans[record.id] = reconciliation.plan(self.driver,
                                                       Deployment.from_dict(record.deployment))
            except VimError as exc:  # restored all the same: restoring needs no plan
                LOG.warning("deployment %s: could not tell what runs: %s", record.id, exc)
            actions += plans.get(record.id, [])
        rebuilding = [r for r in records if any(a["action"] == reconciliation.REBUILD
                                                for a in plans.get(r.id, []))]
        failures = {}
        # in parallel, those that only keep and remove first: they free the addresses
        # others rebuild at
        for group in ([r for r in records if r not in rebuilding], rebuilding):
            failures.update(zip([r.id for r in group], self.pool.map(
                lambda r: self._reconcile_one(r, cause, final=False), group)))
        for record in records:
            if failures[record.id]:
                failures[record.id] = self._reconcile_one(record, cause, final=True)
        reconciliation.finish(self.database, [r.id for r in owed], actions,
                              {k: v for k, v in failures.items() if v})

    def _reconcile_one(self, record, cause, final):
        """Bring ``record``'s deployment back to its record after ``cause`` (a restore) and
        mark it ACTIVE; return None, or the error (then, if ``final``, it rests ERROR)."""
        try:
            restored = self._bring_back(record, self._progress(record.id))
            steps = [s for s in self._load(record.id).steps if s["name"] != reconciliation.STEP]
            self._save(record.id, ACTIVE, deployment=restored,
                       steps=steps + [_step(reconciliation.STEP, 1, 1)])
            return None
        except Exception as exc:  # pylint: disable=broad-except
            LOG.warning("deployment %s: could not be brought back to its record%s: %s",
                        record.id, "" if final else " (tried again later)", exc)
            if final:
                try:
                    self._save(record.id, ERROR, error=f"could not be brought back to its "
                                                       f"record after {cause}: {exc}")
                except Exception:  # pylint: disable=broad-except
                    LOG.exception("deployment %s could not be marked ERROR", record.id)
                finally:
                    self.claims.drop(record.id)
            return str(exc)

    def take_over(self):
        """Finish the work of replicas whose claim expired (see :meth:`recover`)."""
        return self.recover(startup=False)

    def _watch(self):
        """Start the thread that takes over dead replicas' work every half lease (once)."""
        if self._watcher is not None:
            return

        def loop():
            while not self._stop.wait(leases.lease_seconds() / 2):
                try:
                    self.take_over()
                except Exception:  # the database may be away a moment: next time
                    LOG.exception("taking over interrupted deployments failed")
        self._watcher = threading.Thread(target=loop, name="ro-takeover", daemon=True)
        self._watcher.start()

    def shutdown(self):
        """Wait for running work to finish and stop the pool."""
        self._stop.set()
        self.pool.shutdown(wait=True)
        self.claims.stop()

    # -- background work --------------------------------------------------

    def _run(self, deployment_id, work, *args):
        self._guarded(deployment_id, work, deployment_id, *args)

    def _guarded(self, deployment_id, work, *args):
        try:
            work(*args)
        except leases.LostClaim as exc:
            LOG.warning("deployment %s: %s", deployment_id, exc)
        except OperationalError as exc:  # the database went away: the work is not over
            LOG.warning("deployment %s: the database went away during its work (%s); its "
                        "claim runs out and the work is taken over (take_over)",
                        deployment_id, errors.outage_words(exc))
        except Exception as exc:  # a bug: never leave the record busy
            LOG.exception("work on deployment %s failed", deployment_id)
            try:
                self._save(deployment_id, ERROR, error=f"unexpected {type(exc).__name__}: {exc}")
            except Exception:  # pylint: disable=broad-except
                LOG.exception("deployment %s could not be marked ERROR", deployment_id)
        finally:
            self.claims.drop(deployment_id)

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
        try:
            deployment = self._publish(deployment, progress)
        except ZoneError as exc:  # a vCDN nobody can find is not deployed: undo it
            try:
                delegations.withdraw(sig.hostname)
                self.driver.terminate(deployment, progress)
            except (VimError, ZoneError) as undo:
                self._save(deployment_id, ERROR, deployment=deployment.to_dict(),
                           error=f"deploy failed: {exc}; and undoing it failed: {undo}")
                return
            self._save(deployment_id, ERROR, error=f"deploy failed: {exc}; its resources "
                                                   "were removed")
            return
        self._save(deployment_id, ACTIVE, deployment=deployment.to_dict())

    def _publish(self, deployment, progress):
        """``deployment`` with its entry point published in the operator's zone.

        :raises ZoneError: it could not be (the step is left unfinished).
        """
        progress(step_names.PUBLISH, 0, 1)
        try:
            published = delegations.publish(deployment)
        except ZoneError as exc:
            raise ZoneError(f"the entry point {deployment.entry_point.hostname} could not be "
                            f"published in the operator's zone: {exc}") from exc
        progress(step_names.PUBLISH, 1, 1)
        return published

    def _update(self, deployment_id, sig):
        record = self._load(deployment_id)
        old = Deployment.from_dict(record.deployment)
        progress = self._progress(deployment_id)
        if sig.digest() == ServiceInstanceGraph.from_record(record.sig).digest():
            self._repair(deployment_id, old, sig, progress)
            return
        errors_left = []
        try:
            new = self.driver.update(old, sig, progress,
                                     previous=ServiceInstanceGraph.from_record(record.sig))
        except RemovalIncomplete as exc:  # the new deployment serves: it is the record
            new = exc.deployment
            errors_left.append(str(exc))
        except VimError as exc:
            self._save(deployment_id, ACTIVE,
                       error=f"update failed; the previous deployment still serves: {exc}")
            return
        try:  # the same NS names; the glue follows the DNS VNFs to their new addresses
            new = self._publish(new, progress)
        except ZoneError as exc:  # it serves: the next update or restart publishes again
            new = dataclasses.replace(new, entry_point=dataclasses.replace(
                new.entry_point, name_servers=old.entry_point.name_servers))
            errors_left.append(str(exc))
        self._save(deployment_id, ACTIVE, sig=sig.to_dict(), deployment=new.to_dict(),
                   **({"error": "; ".join(errors_left)} if errors_left else {}))

    def _repair(self, deployment_id, deployment, sig, progress):
        """An update to the SIG ``deployment`` already serves: the driver brings what runs
        back to the record (:meth:`VimDriver.restore`), rebuilding in place, at the same
        addresses, whatever is not whole (the Instance Manager's heal of a balancer, a DNS
        VNF or an origin shield). A repair that fails leaves it ACTIVE with the error: the
        next health check finds what is still broken."""
        try:
            repaired = self.driver.restore(deployment, sig, progress)
        except VimError as exc:
            LOG.warning("repair of %s failed: %s", deployment_id, exc)
            self._save(deployment_id, ACTIVE, error=f"repair failed: {exc}")
            return
        self._save(deployment_id, ACTIVE, deployment=repaired.to_dict())

    def _terminate(self, deployment_id):
        record = self._load(deployment_id)
        recorded = record.deployment
        progress = self._progress(deployment_id)
        try:  # first, so that resolvers are no longer sent to VNFs about to go
            progress(step_names.WITHDRAW, 0, 1)
            delegations.withdraw(ServiceInstanceGraph.from_dict(record.sig).hostname)
            progress(step_names.WITHDRAW, 1, 1)
        except ZoneError as exc:
            self._save(deployment_id, ERROR, error=f"terminate failed: the entry point could "
                                                   f"not be withdrawn: {exc}")
            return
        try:
            if recorded:
                self.driver.terminate(Deployment.from_dict(recorded),
                                      self._progress(deployment_id))
        except VimError as exc:
            self._save(deployment_id, ERROR, error=f"terminate failed: {exc}")
            return
        self._save(deployment_id, DELETED, deployment=None)

    def _finish_interrupted(self, record, cause=None):
        """Finish or undo ``record``'s work, which ``cause`` (a restart) interrupted."""
        cause = cause or RESTART
        action = {DEPLOYING: "deploy", UPDATING: "update", DELETING: "delete"}[record.status]
        LOG.warning("deployment %s: finishing the %s interrupted by %s", record.id, action, cause)
        progress = self._progress(record.id)
        restored = record.deployment
        try:
            if record.status == UPDATING:
                restored = self._bring_back(record, progress)
            else:  # an interrupted deploy may have built VNFs it never recorded: all go
                delegations.withdraw(ServiceInstanceGraph.from_dict(record.sig).hostname)
                self.driver.terminate(Deployment.from_dict(record.deployment) if record.deployment
                                      else _unrecorded(record, self.driver.name), progress)
        except (VimError, ZoneError) as exc:
            self._save(record.id, ERROR, error=f"the {action} was interrupted by {cause} "
                       f"and could not be undone: {exc}")
            return
        steps = self._load(record.id).steps + [_step(step_names.RESTART, 1, 1)]
        if record.status == UPDATING:
            self._save(record.id, ACTIVE, steps=steps, deployment=restored, error=(
                f"the update was interrupted by {cause} and undone; the previous deployment "
                "serves"))
        elif record.status == DELETING:
            self._save(record.id, DELETED, deployment=None, steps=steps)
        else:
            self._save(record.id, ERROR, deployment=None, steps=steps,
                       error=f"the {action} was interrupted by {cause}; its resources were "
                             "removed")

    def _bring_back(self, record, progress):
        """Have the driver run exactly ``record``'s deployment again
        (:meth:`VimDriver.restore`) and publish its entry point; return it as a dict.

        :raises VimError: the driver could not (what runs is unknown).
        """
        restored = self.driver.restore(Deployment.from_dict(record.deployment),
                                       ServiceInstanceGraph.from_dict(record.sig), progress)
        try:
            restored = self._publish(restored, progress)
        except ZoneError as exc:  # it serves; the next update publishes again
            LOG.warning("deployment %s: %s", record.id, exc)
        return restored.to_dict()

    # -- records ----------------------------------------------------------

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
        """Record ``status`` and ``changes``; with an ``error``, steps still running failed.
        A resting ``status`` gives the claim back.

        :raises LostClaim: another replica took the deployment over.
        """
        with self.database.transaction() as session:
            record = session.get(DeploymentRecord, deployment_id, with_for_update=True)
            self.claims.check(record)
            if changes.get("error"):
                changes.setdefault("steps", [dict(s, state="FAILED") if s["state"] != "COMPLETED"
                                             else s for s in record.steps])
            record.mark(status, **changes)
            if status not in BUSY:
                self.claims.give_back(record)
        self._notify(saved=True)

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
                    if not self.claims.mine(record):  # taken over: the peer's steps now
                        return
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


def _moved(before, after):
    """Whether a deployment's representation changed (status, progress or any write)."""
    return any(before[k] != after[k] for k in ("status", "steps", "updated_at"))


def _find(session, deployment_id):
    record = session.get(DeploymentRecord, deployment_id)
    if record is None:
        raise errors.NotFound(f"no deployment {deployment_id}")
    return record


def _unrecorded(record, driver_name):
    """A :class:`Deployment` naming only ``record``'s id: what a driver needs to remove
    everything of a deployment that never got recorded."""
    sig = ServiceInstanceGraph.from_dict(record.sig)
    return Deployment(deployment_id=record.id, driver=driver_name, vnfs=[],
                      entry_point=EntryPoint(hostname=sig.hostname, dns_servers=[]),
                      region_endpoints={})


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


@functools.cache
def _names(kind):
    return tuple(field.name for field in dataclasses.fields(kind))


def _plain(found):
    """A dataclass of plain values (a VNF's health or figures) as a dict: what
    :func:`dataclasses.asdict` makes without its recursion and copies, which held a
    third of RO's CPU answering an IM pass's readings."""
    return {name: getattr(found, name) for name in _names(type(found))}


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
        "sig_digest": digest(record.sig) if record.sig else None,
        "entry_point": deployment.get("entry_point"),
        "region_endpoints": deployment.get("region_endpoints", {}),
        "vnfs": [{k: v[k] for k in VNF_FIELDS} for v in deployment.get("vnfs", [])],
        "created_at": isoformat(record.created_at),
        "updated_at": isoformat(record.updated_at),
    }
