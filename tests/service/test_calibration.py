"""Calibration (issue 13): the QoE model, the model file, the drivers' load generators, a
real campaign on the local driver, and ``cdnaas calibrate`` end to end.

The local-driver tests deploy real caches and drive real load (wrk, the viewer
simulator) for a few seconds each; they are bounded in count and time.

Its tests that start no process are in tests/unit/test_calibration_units.py (the unit tier)."""
import resource
import shutil
import subprocess
import sys

import pytest
import yaml

from cdnaas.calibration import modelfile, qoe, viewers
from cdnaas.common import plugins
from cdnaas.origin.server import serve_in_thread
from cdnaas.planning import dimensioning, models
from cdnaas.ro import calibration_campaign as campaign
from cdnaas.ro.vim.base import LoadTest, VimError
from cdnaas.ro.vim.local import cgroups
from cdnaas.ro.vim.noop import NoopDriver
from tests.support.api import Api, populate
from tests.support.stack import running_stack
from tests.unit.test_calibration_units import QOE_TEMPLATE, _plan


def local_ready():
    try:
        plugins.load(plugins.VIM_DRIVERS, "local").check_prerequisites()
    except Exception:  # pylint: disable=broad-except
        return False
    return shutil.which("wrk") is not None


needs_local = pytest.mark.skipif(not local_ready(), reason="needs root, the local driver's tools and wrk")


# -- the driver interface --------------------------------------------------------------


def test_the_viewer_simulator_says_when_it_cannot_open_enough_files():
    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    limited = subprocess.run(
        [sys.executable, viewers.__file__, "--address", "127.0.0.1", "--viewers", "100",
         "--seconds", "1"], preexec_fn=low_limit, capture_output=True, text=True, timeout=30,
        check=False)
    assert limited.returncode == viewers.LIMIT_STATUS, limited.stderr
    assert "100 viewers need 164 open files; this generator may open 64" in limited.stderr


def test_the_sample_origin_is_served_where_the_vims_servers_reach_it(monkeypatch):
    """A campaign without an origin serves the sample origin on RO's machine and names it
    CDNAAS_CALIBRATION_ORIGIN_HOST (127.0.0.1 reaches nothing in a cloud's server): the
    measurement vCDN fetches from there, and it answers there."""
    import time
    import urllib.request

    from cdnaas.ro.calibration_jobs import Jobs
    seen = []

    class Recording(NoopDriver):
        def deploy(self, sig, progress=None):
            origin = sig.origin
            with urllib.request.urlopen(f"http://{origin.host}:{origin.port}/objects/small",
                                        timeout=5) as answer:
                seen.append((origin.host, answer.status))
            raise VimError("recorded; no campaign needed")

    monkeypatch.setenv("CDNAAS_CALIBRATION_ORIGIN_HOST", "127.0.0.2")
    jobs = Jobs(Recording())
    job = jobs.start({**vars(_plan(vcpus=[1])), "origin": None})
    deadline = time.monotonic() + 10
    while jobs.get(job["id"])["state"] not in ("COMPLETED", "FAILED"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert jobs.get(job["id"])["error"] == "recorded; no campaign needed"
    assert seen == [("127.0.0.2", 200)]


# -- a real campaign on the local driver -------------------------------------------------

@pytest.fixture
def local_origin(monkeypatch, tmp_path):
    monkeypatch.setenv("CDNAAS_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("CDNAAS_ORIGIN_ALLOW", "127.0.0.1")
    server, _thread = serve_in_thread("0.0.0.0", 0)
    yield {"scheme": "http", "host": "127.0.0.1", "port": server.server_address[1]}
    server.shutdown()
    server.server_close()


def _short_plan(origin, **changes):
    values = dict(origin=origin, vcpus=[1], connections=[50], throughput_seconds=2,
                  window_seconds=4, windows=1, viewers_start=2400, max_steps=1, segments=20)
    values.update(changes)
    return _plan(**values)


def _cut_cache_quota(monkeypatch):
    """Caches get a tenth of their vCPUs' quota (a 0.1 vCPU cache for 1 vCPU): a quota
    that binds even while other work keeps this 2-core machine busy (in a full test run
    a 1 vCPU cache measured as little as a quarter of a CPU)."""
    create = cgroups.create

    def cut(name, vcpus, cpus=None):
        create(name, vcpus, cpus)
        if name.endswith("_cache-0"):
            version, base = cgroups._hierarchy()  # pylint: disable=protected-access
            quota = vcpus * cgroups.PERIOD_US // 10
            if version == "v2":
                (base / name / "cpu.max").write_text(f"{quota} {cgroups.PERIOD_US}")
            else:
                (base / name / "cpu.cfs_quota_us").write_text(str(quota))
    monkeypatch.setattr(cgroups, "create", cut)


@needs_local
def test_points_follow_the_cache_cpu_quota(local_origin, monkeypatch):
    """A calibration is real: a tenth of the CPU quota, lower throughput measured."""
    driver = plugins.load(plugins.VIM_DRIVERS, "local")
    plan = _short_plan(local_origin)
    full = campaign.run(driver, plan, "quotafull", lambda *a: None)[0]
    _cut_cache_quota(monkeypatch)
    cut = campaign.run(driver, plan, "quotacut", lambda *a: None)[0]

    def rps(run, kb):
        return next(p["per_vcpu"] for p in run["throughput"] if p["object_kb"] == kb)
    # small objects cost the cache CPU per request: a cut quota, well under the throughput
    assert rps(cut, 0.042) < 0.8 * rps(full, 0.042), (full["throughput"], cut["throughput"])
    # the measured cache never used more than its quota, at full quota it used more
    assert all(p["cache_cpu"] <= 0.13 for p in cut["throughput"] + cut["viewers"]), cut
    assert max(p["cache_cpu"] for p in full["throughput"]) > 0.2, full


@needs_local
def test_a_vcdn_dimensioned_from_a_calibration_holds_its_target(local_origin):
    driver = plugins.load(plugins.VIM_DRIVERS, "local")
    plan = _short_plan(local_origin, viewers_start=500, viewers_factor=2, max_steps=2)
    runs = campaign.run(driver, plan, "dim00001", lambda *a: None)
    model = models.parse(modelfile.build(plan, runs, "dim00001"))
    target = {"min_mos": 3.0}
    demand = int(0.9 * dimensioning.max_load(model, "eu-west", target))
    vcpus = dimensioning.required_vcpus(model, "eu-west", demand, target)
    sig = campaign.measurement_sig(plan, "dim00002", vcpus)
    deployment = driver.deploy(sig)
    try:  # viewers of the dimensioned demand, through the region's balancer as viewers come
        measured = driver.load_test(deployment, "lb", LoadTest(
            "viewers", campaign.VIDEO_PATH, demand, 8, segments=plan.segments, window_seconds=4))
    finally:
        driver.terminate(deployment)
    assert qoe.load_mos(measured.windows, 4) >= target["min_mos"], measured


# -- cdnaas calibrate end to end -----------------------------------------------------------

@needs_local
def test_cli_calibrates_on_a_local_stack(tmp_path):
    model_dir = tmp_path / "models"
    # the default origin policy (no allow list): RO's own sample origin is the operator's
    with running_stack(None, tmp_path, extra_env={"CDNAAS_VIM_DRIVER": "local",
                                                  "CDNAAS_ORIGIN_ALLOW": None,
                                                  "CDNAAS_MODEL_DIRS": str(model_dir)}) as stack:
        populate(stack)
        operator = Api(stack.urls["api"], stack.operator_token)
        operator.ok("POST", "/templates", 201, data=open(QOE_TEMPLATE, "rb").read(),
                    headers={"Content-Type": "application/yaml"})
        env = {**{k: v for k, v in stack.env.items() if v is not None},
               "CDNAAS_TOKEN": stack.operator_token, "COLUMNS": "200"}
        done = subprocess.run(
            [sys.executable, "-m", "cdnaas.cli.main", "calibrate", "--flavor", "qoe-video",
             "--host", "eu-1", "--vcpus", "1", "--connections", "20", "--windows", "1",
             "--window-seconds", "4", "--viewers-start", "200", "--max-viewers", "400"],
            env=env, capture_output=True, text=True, timeout=240, check=False)
        assert done.returncode == 0, done.stdout + done.stderr + stack.log("ro")[-3000:]
        written = list((model_dir / "calibrated").glob("*.yaml"))
        assert len(written) == 1, done.stdout
        model = models.load(written[0])
        document = yaml.safe_load(written[0].read_text())
        assert {p["source"] for p in document["qoe"]["points"]} == {"measured"}
        assert model.qoe.xs == (200, 300) and written[0].with_suffix(".svg").exists()
        assert "calibrated (" in done.stdout and "paper (tnsm2017-kvm)" in done.stdout
        # the job is listed, and answers its curve beside the paper's (the operator console's)
        [job] = operator.ok("GET", "/calibrations")["calibrations"]
        assert job["state"] == "COMPLETED" and job["progress"] == 1.0
        assert job["ended_at"] > job["started_at"]
        curves = operator.ok("GET", f"/calibrations/{job['id']}")["curves"]
        assert [(c["label"], c["model"]) for c in curves] == [("calibrated", document["name"]),
                                                              ("paper", "tnsm2017-kvm")]
        assert [p["viewers_per_vcpu"] for p in curves[0]["points"]] == [200, 300]
        # a template version naming the calibrated model: quotes read it from then on
        template = yaml.safe_load(open(QOE_TEMPLATE, encoding="utf-8"))
        template.update(version=2, model=f"calibrated/{written[0].name}")
        operator.ok("POST", "/templates", 201, json=template)
        curves = operator.ok("GET", f"/calibrations/{job['id']}")["curves"]
        assert curves[1]["label"] == "in use" and curves[1]["model"] == document["name"]
        quote = stack.acme.ok("POST", "/quotes", json={
            "name": "q", "flavor": "qoe-video", "origin": "http://origin.example.com",
            "regions": [{"name": "eu-west", "demand": 300, "quality": {"min_mos": 3.0}}],
            "lease": {"end": "2099-01-01T00:00:00Z"}})
        assert quote["regions"][0]["predicted_mos"] == pytest.approx(model.mos(300), abs=0.01)
