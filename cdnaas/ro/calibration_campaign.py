"""The measurement campaign of the CDNaaS paper (section IV) run against this operator's VIM.

For each vCPU count asked, :func:`run` deploys a measurement vCDN through the VIM driver
(one region, one cache of the flavor's image and config with that many vCPUs on the
chosen host, with its balancer and DNS as any vCDN has), then, through the driver's load
generator (:meth:`~cdnaas.ro.vim.base.VimDriver.load_test`) aimed at the cache:

1. **throughput** (section IV-C1, Table III): wrk for each object size (43 B, 73 KB,
   435 KB, served by the sample origin and warmed into the cache first) and each
   connection count; requests/s per vCPU;
2. **QoE** (section IV-D, Fig. 10): simulated HD viewers (:mod:`cdnaas.calibration.viewers`),
   ``windows`` windows of 16 s per load, turned into MOS (:mod:`cdnaas.calibration.qoe`);
   the load starts at ``viewers_start`` per vCPU and grows by ``viewers_factor`` until the
   MOS falls below ``floor``, ``max_viewers`` per vCPU or ``max_steps`` loads are
   reached, or the campaign has run ``max_seconds``;

and removes it. The model's points are the smallest vCPU count's figures per vCPU (the
paper's single-vCPU results); larger counts check that throughput scales with vCPUs,
as the model assumes (:mod:`cdnaas.calibration.modelfile` states the ratios measured).
"""
import dataclasses
import logging
import math
import time

from cdnaas.calibration import modelfile, qoe
from cdnaas.common.sig import Origin, RegionPlan, ServiceInstanceGraph, Vnf
from cdnaas.ro.vim.base import GeneratorLimit, LoadTest, VimError

LOG = logging.getLogger(__name__)

#: path on the sample origin -> size in KB (``cdnaas/origin/server.py``)
OBJECTS = {"/objects/small": 43 / 1024, "/objects/chunk-low": 73, "/objects/chunk-hd": 435}
VIDEO_PATH = "/video/hd/seg-{n}.m4s"
CACHE = "cache-0"


@dataclasses.dataclass
class Plan:
    """What one calibration measures, where, and within which bounds."""

    flavor: str
    template_version: int
    technology: str
    host: str
    region: dict              # name, zone, vim_region, client_prefixes of the host's region
    vnfs: dict                # the template's ``vnfs`` (image, ram_mb of each role)
    vcpus: list
    origin: dict | None = None  # {scheme, host, port}; None: the caller's sample origin
    plugin: str | None = None   # the flavor's plugin: its templates/ hold the flavor's configs
    connections: list = dataclasses.field(default_factory=lambda: [100, 1000])
    throughput_seconds: float = 5.0
    window_seconds: float = 16.0
    windows: int = 2
    segments: int = 60
    viewers_start: int = 500
    viewers_factor: float = 1.5
    max_viewers: int = 40000
    max_steps: int = 10
    floor: float = 3.0
    max_seconds: float = 1800.0

    @classmethod
    def from_dict(cls, data):
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def step_names(plan):
    """The campaign's progress steps, in order."""
    names = []
    for vcpus in plan.vcpus:
        names += [f"deploy {vcpus} vCPU", f"throughput {vcpus} vCPU", f"viewers {vcpus} vCPU",
                  f"remove {vcpus} vCPU"]
    return names + ["write model"]


def run(driver, plan, job_id, progress):
    """Measure every vCPU count of ``plan`` through ``driver``; return the runs.

    :param progress: ``progress(step, done, total)`` as in :data:`~cdnaas.ro.vim.base.Progress`.
    :returns: ``[{"vcpus", "throughput": [...], "viewers": [...], "scaling"...}]``.
    :raises VimError: a deployment or a load failed (what was deployed is removed).
    """
    deadline = time.monotonic() + plan.max_seconds
    runs = []
    for vcpus in plan.vcpus:
        sig = measurement_sig(plan, job_id, vcpus)
        progress(f"deploy {vcpus} vCPU", 0, 1)
        deployment = driver.deploy(sig)
        try:
            progress(f"deploy {vcpus} vCPU", 1, 1)
            _warm(driver, deployment, plan)
            throughput = _throughput(driver, deployment, plan, vcpus, progress)
            points, stopped = _viewers(driver, deployment, plan, vcpus, progress, deadline)
            runs.append({"vcpus": vcpus, "throughput": throughput, "viewers": points,
                         "stopped": stopped})
        finally:
            progress(f"remove {vcpus} vCPU", 0, 1)
            driver.terminate(deployment)
            progress(f"remove {vcpus} vCPU", 1, 1)
    return runs


def measurement_sig(plan, job_id, vcpus):
    """A one-region SIG: one cache of ``vcpus`` on ``plan.host`` with its balancer and DNS."""
    vcdn_id = f"cal{job_id[:8]}-{vcpus}"
    region = plan.region["name"]
    origin = plan.origin or {}

    def vnf(name, role, cpus):
        spec = plan.vnfs.get(role) or {}
        return Vnf(name=name, role=role, region=region, host=plan.host, vcpus=cpus,
                   ram_mb=(spec.get("ram_mb") or {}).get("min", 256),
                   image=spec.get("image", "cdnaas-vnf"),
                   config_templates=list(spec.get("config_templates") or []))
    return ServiceInstanceGraph(
        vcdn_id=vcdn_id, flavor=plan.flavor, template_version=plan.template_version,
        hostname=f"{vcdn_id}.calibration.invalid",
        origin=Origin(origin.get("scheme", "http"), origin["host"], int(origin["port"])),
        default_region=region,
        regions=[RegionPlan(name=region, zone=plan.region.get("zone"),
                            vim_region=plan.region.get("vim_region"),
                            client_prefixes=list(plan.region.get("client_prefixes") or []),
                            demand=plan.viewers_start * vcpus, quality={"min_mos": plan.floor})],
        vnfs=[vnf(CACHE, "cache", vcpus), vnf("lb", "load_balancer", 1), vnf("dns", "dns", 1)],
        plugin=plan.plugin)


def _warm(driver, deployment, plan):
    """Fetch every object and video segment once, so the loads measure cache hits.

    :raises VimError: the cache served an object with no success (an origin it cannot
        reach, say): the loads would measure its error answers.
    """
    for path in OBJECTS:
        _served(driver.load_test(deployment, CACHE, LoadTest("http", path, 1, 1)), path, plan)
    chunk = 0.5
    driver.load_test(deployment, CACHE, LoadTest(
        "viewers", VIDEO_PATH, plan.segments, 4 * chunk, chunk_seconds=chunk,
        segments=plan.segments, window_seconds=4 * chunk))


def _served(report, path, plan):
    """:raises VimError: ``report``, of fetching ``path`` from the cache, has no answer or
        answers of an error status."""
    if report.requests and not report.non_2xx:
        return
    origin = plan.origin or {}
    raise VimError(f"the measurement cache did not serve {path} ({report.requests} answers, "
                   f"{report.non_2xx} of an error status, {report.errors} failed connections) "
                   "and a campaign measures no error answers: can the VIM's servers reach the "
                   f"origin {origin.get('host')}:{origin.get('port')}?")


def _throughput(driver, deployment, plan, vcpus, progress):
    step = f"throughput {vcpus} vCPU"
    total = len(OBJECTS) * len(plan.connections)
    progress(step, 0, total)
    points = []
    for path, size_kb in OBJECTS.items():
        for connections in plan.connections:
            report = driver.load_test(deployment, CACHE,
                                      LoadTest("http", path, connections, plan.throughput_seconds))
            points.append({"object_kb": round(size_kb, 3), "connections": connections,
                           "requests_per_second": report.requests_per_second,
                           "per_vcpu": round(report.requests_per_second / vcpus, 1),
                           **_costs(report)})
            progress(step, len(points), total)
    return points


def _viewers(driver, deployment, plan, vcpus, progress, deadline):
    """The viewer ramp: ``(points, why it stopped early or None)``."""
    step = f"viewers {vcpus} vCPU"
    progress(step, 0, plan.max_steps)
    points, viewers, stopped = [], plan.viewers_start * vcpus, None
    seconds = plan.windows * plan.window_seconds
    while len(points) < plan.max_steps and viewers <= plan.max_viewers * vcpus:
        if points and time.monotonic() + seconds > deadline:
            LOG.info("calibration stops its viewer ramp at %d viewers: time bound", viewers)
            break
        try:
            report = driver.load_test(deployment, CACHE, LoadTest(
                "viewers", VIDEO_PATH, viewers, seconds, segments=plan.segments,
                window_seconds=plan.window_seconds))
        except GeneratorLimit as exc:
            if not points:
                raise
            stopped = f"the load generator could not drive {viewers} viewers ({exc})"
            LOG.info("calibration stops its viewer ramp: %s", stopped)
            break
        figures = qoe.summary(report.windows or [], plan.window_seconds)
        points.append({"viewers": viewers, "per_vcpu": viewers / vcpus, **figures,
                       "requests_per_second": report.requests_per_second,
                       "latency_ms": report.latency_ms, **_costs(report)})
        progress(step, len(points), plan.max_steps)
        if figures["mos"] is None or figures["mos"] < plan.floor \
                or modelfile.generator_bound(points[-1]):
            break
        viewers = _next_load(viewers, plan.viewers_factor)
    progress(step, plan.max_steps, plan.max_steps)
    return points, stopped


def _next_load(viewers, factor):
    """The next load: ``factor`` times more, rounded to two significant figures."""
    grown = viewers * factor
    unit = 10 ** max(0, int(math.log10(grown)) - 1)
    return max(viewers + 1, int(round(grown / unit) * unit))


def _costs(report):
    """What a load cost: errors, the generator's CPU and the measured VNF's CPU, per second."""
    return {"errors": report.errors, "non_2xx": report.non_2xx,
            "generator_cpu": round(report.generator_cpu_seconds / report.seconds, 3),
            "cache_cpu": None if report.target_cpu_seconds is None
            else round(report.target_cpu_seconds / report.seconds, 3),
            "isolated": report.isolated, "tool": report.tool}


def check_runs(runs):
    """:raises VimError: a run measured nothing a model can be made of."""
    if not runs or not runs[0]["viewers"] or not runs[0]["throughput"]:
        raise VimError("the calibration measured no load; nothing to make a model of")
