"""Calibration jobs in the Resource Orchestrator: one campaign at a time, with progress.

A job is kept in the RO's memory (a calibration is minutes long and its product is the
model it returns; a restarted RO has none, and its start-up cleanup removes what an
interrupted campaign had deployed, since no deployment record names it). Only one runs
at a time: two campaigns on one VIM would measure each other.
"""
import contextlib
import datetime
import logging
import threading
import time
import uuid

from cdnaas.calibration import modelfile
from cdnaas.common import errors, origin_policy, settings
from cdnaas.origin.server import serve_in_thread
from cdnaas.ro import calibration_campaign as campaign

LOG = logging.getLogger(__name__)
PENDING, RUNNING, COMPLETED, FAILED = "PENDING", "RUNNING", "COMPLETED", "FAILED"
#: finished jobs kept for their callers to read
KEEP = 20


class Jobs:
    """Calibration jobs run through ``driver`` (the RO's VIM driver)."""

    def __init__(self, driver):
        self.driver = driver
        self._jobs = {}
        self._lock = threading.Lock()

    def start(self, request):
        """Start a campaign for ``request`` (``api-spec/ro.yaml`` CalibrationRequest).

        :raises Conflict: a calibration is running.
        """
        plan = campaign.Plan.from_dict(request)
        job_id = uuid.uuid4().hex[:12]
        now = _now()
        job = {"id": job_id, "type": "CALIBRATE", "state": PENDING, "flavor": plan.flavor, "host": plan.host,
               "vcpus": plan.vcpus, "created_at": now, "updated_at": now, "error": None,
               "steps": [{"name": n, "state": "PENDING", "done": 0, "total": 1}
                         for n in campaign.step_names(plan)],
               "result": None}
        with self._lock:
            busy = [j["id"] for j in self._jobs.values() if j["state"] in (PENDING, RUNNING)]
            if busy:
                raise errors.Conflict(f"calibration {busy[0]} is running; one at a time, "
                                      "since two would measure each other")
            self._jobs[job_id] = job
            self._trim()
        threading.Thread(target=self._run, args=(job_id, plan), daemon=True,
                         name=f"calibration-{job_id}").start()
        return self.get(job_id)

    def get(self, job_id):
        """A copy of the job. :raises NotFound: unknown id."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                raise errors.NotFound(f"no calibration {job_id} (jobs live in the RO's memory: "
                                      "a restarted RO has none)")
            return {**job, "steps": [dict(s) for s in job["steps"]]}

    def list(self):
        with self._lock:
            return [{k: v for k, v in j.items() if k != "result"} for j in self._jobs.values()]

    # -- background -----------------------------------------------------------------

    def _run(self, job_id, plan):
        self._update(job_id, state=RUNNING)
        started = time.monotonic()
        origin = None
        try:
            allowed = contextlib.nullcontext()
            if plan.origin is None:  # the sample origin, on this machine, for this campaign
                origin, _thread = serve_in_thread("0.0.0.0", 0)
                host = settings.get("CDNAAS_CALIBRATION_ORIGIN_HOST")
                plan.origin = {"scheme": "http", "host": host, "port": origin.server_address[1]}
                allowed = origin_policy.operator_origin(host, origin.server_address[1])
            with allowed:
                runs = campaign.run(self.driver, plan, job_id, lambda step, done, total:
                                    self._progress(job_id, step, done, total))
            campaign.check_runs(runs)
            self._progress(job_id, "write model", 0, 1)
            document = modelfile.build(plan, runs, job_id)
            self._progress(job_id, "write model", 1, 1)
            self._update(job_id, state=COMPLETED, result={
                "model": document, "model_yaml": modelfile.dump(document), "runs": runs,
                "seconds": round(time.monotonic() - started, 1)})
        except Exception as exc:  # the job records every failure; nothing is left running
            LOG.warning("calibration %s failed: %s", job_id, exc)
            self._update(job_id, state=FAILED, error=str(exc))
        finally:
            if origin is not None:
                origin.shutdown()
                origin.server_close()

    def _progress(self, job_id, step, done, total):
        with self._lock:
            job = self._jobs[job_id]
            for entry in job["steps"]:
                if entry["name"] == step:
                    entry.update(done=done, total=max(total, 1),
                                 state="COMPLETED" if done >= total else "PROCESSING")
            job["updated_at"] = _now()

    def _update(self, job_id, **changes):
        with self._lock:
            job = self._jobs[job_id]
            job.update(changes, updated_at=_now())
            if changes.get("state") == FAILED:
                for entry in job["steps"]:
                    if entry["state"] == "PROCESSING":
                        entry["state"] = "FAILED"
                    elif entry["state"] == "PENDING":
                        entry["state"] = "SKIPPED"

    def _trim(self):
        done = [j for j in self._jobs.values() if j["state"] in (COMPLETED, FAILED)]
        for job in sorted(done, key=lambda j: j["created_at"])[:max(0, len(done) - KEEP)]:
            del self._jobs[job["id"]]


def _now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")
