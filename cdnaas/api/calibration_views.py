"""Operators calibrate a flavor's cache on a host of theirs: ``POST /api/v1/calibrations``.

The API finds the flavor's latest template (SIDR) and the host's region (SO), and asks
RO to run the campaign (:mod:`cdnaas.ro.calibration_campaign`); the jobs are listed with
``GET /api/v1/calibrations``, and one job, its model and its curve beside the model it
would replace are read back with ``GET /api/v1/calibrations/{id}``.
"""
from flask import Blueprint, request

from cdnaas.api.policy import ADMIN, ADMIN_READER, Routes
from cdnaas.calibration import reference
from cdnaas.common import errors
from cdnaas.common.clients import CalibrationClient, SidrClient, SoClient
from cdnaas.planning import models

blueprint = Blueprint("api_calibration", __name__, url_prefix="/api/v1")
routes = Routes(blueprint)  # each route with its policy rule (cdnaas.api.policy)

#: vCPU counts measured by default: 1 and 2. More than the machine's cores would measure the
#: machine, not the flavor (a quota of 4 vCPUs on 2 cores is 2 cores).
DEFAULT_VCPUS = (1, 2)
#: states of a job that has ended (api-spec/ro.yaml Calibration)
COMPLETED, FINISHED = "COMPLETED", ("COMPLETED", "FAILED")
#: what an operator may tune, passed to RO as they are (bounds: api-spec/api.yaml)
TUNABLE = ("connections", "throughput_seconds", "window_seconds", "windows", "viewers_start",
           "viewers_factor", "max_viewers", "max_steps", "floor", "max_seconds")


@routes.post("/calibrations", "cdn:calibration:create", ADMIN,
              "Calibrate a flavor's cache on a host (operator).")
def start_calibration():
    body = request.get_json()
    template = SidrClient().get_template(body["flavor"])
    document = template.document
    region, host = _host(body["host"])
    cache = document["vnfs"]["cache"]["vcpus"]
    wanted = body.get("vcpus") or [v for v in DEFAULT_VCPUS
                                   if cache["min"] <= v <= cache["max"] and v <= host.vcpus]
    refused = [v for v in wanted if not cache["min"] <= v <= cache["max"] or v > host.vcpus]
    if refused or not wanted:
        raise errors.Unprocessable(
            f"vcpus {refused or wanted}: a cache of flavor {body['flavor']} takes "
            f"{cache['min']}-{cache['max']} vCPUs and host {host.name} has {host.vcpus}",
            field="vcpus")
    plan = {"flavor": template.flavor, "template_version": template.version,
            "technology": document["technology"], "plugin": document["plugin"],
            "host": host.name,
            "region": {k: getattr(region, k) for k in ("name", "zone", "vim_region",
                                                       "client_prefixes")},
            "vnfs": document["vnfs"], "vcpus": sorted(set(wanted)),
            **{k: body[k] for k in TUNABLE if k in body}}
    return CalibrationClient().start(plan).body, 202


@routes.get("/calibrations", "cdn:calibration:get_all", ADMIN_READER,
            "List calibrations with their progress (operator).")
def list_calibrations():
    """The jobs RO knows (the running one and the latest finished), newest first."""
    jobs = sorted(CalibrationClient().jobs(), key=lambda j: j.created_at, reverse=True)
    return {"calibrations": [_summary(job) for job in jobs]}


@routes.get("/calibrations/<job_id>", "cdn:calibration:get_one", ADMIN_READER,
            "Follow a calibration and read its model and curves (operator).")
def get_calibration(job_id):
    """The job; once COMPLETED with ``curves``: its QoE curve, then the reference's."""
    job = CalibrationClient().job(job_id)
    if job.state != COMPLETED:
        return job.body
    document = job.result["model"]
    kind, shipped = reference.reference_model(
        [t.body for t in SidrClient().list_templates(job.flavor)], document["technology"])
    return {**job.body,
            "curves": [reference.curve_points("calibrated", models.parse(document, "calibrated")),
                       reference.curve_points(kind, shipped)]}


def _summary(job):
    """A job as the list shows it: when it started and ended, and its share of steps done."""
    steps = job.steps
    progress = sum(min(s["done"], s["total"]) / s["total"] for s in steps) / len(steps) if steps else 0
    return {"id": job.id, "flavor": job.flavor, "host": job.host, "vcpus": job.vcpus,
            "state": job.state, "started_at": job.created_at,
            "ended_at": job.updated_at if job.state in FINISHED else None,
            "progress": round(1.0 if job.state == COMPLETED else progress, 3),
            "error": job.error}


def _host(name):
    """``(region, host)`` of the registered host ``name``. :raises NotFound: no such host."""
    so = SoClient()
    for region in so.regions():
        for host in so.hosts(region.name):
            if host.name == name:
                return region, host
    raise errors.NotFound(f"no registered host {name}; see cdnaas hosts list", field="host")
