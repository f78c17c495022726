"""A whole calibration campaign (``cdnaas calibrate``) through the ``openstack`` driver, against
the mini cloud (``tests/openstack/``), started as the API starts it for an operator: RO's
``POST /ro/v1/calibrations`` with the qoe-video template's VNFs, on a host of zone
``north-az``, with small budgets. The job deploys a measurement vCDN whose first load test
boots a load-generator server, drives it, removes it and answers a model. The mini cloud's
servers boot no guest, so what their user-data starts runs here, in a namespace at their
Neutron addresses: the cache's nginx (``tests/openstack/caches_here.py``) fetching from
a real sample origin at the SIG's origin address, and the generator's agent
(``tests/openstack/generator_here.py``) running real wrk and simulated viewers at the
cache. A cache that cannot reach its origin fails the job instead of being measured."""
import contextlib
import datetime
import time
import uuid
from pathlib import Path

import jsonschema
import pytest
import yaml

from cdnaas.calibration import modelfile, qoe, viewers, wrk
from cdnaas.common import plugins
from cdnaas.planning import models
from cdnaas.ro import calibration_campaign as campaign
from cdnaas.ro.vim.base import VimError, VnfInstance, no_progress
from cdnaas.ro.vim.openstack import plan
from cdnaas.ro.vim.openstack.driver import OpenStackDriver
from cdnaas.ro.vim.openstack.lookup import check_measured_vcpus
from tests.openstack.caches_here import CachesHere
from tests.openstack.fixtures import ORIGIN
from tests.openstack.generator_here import GeneratorsHere
from tests.support.auth import signed
from tests.support.ro import ro_apps
from tests.test_openstack_driver import nothing_left, tagged

pytestmark = pytest.mark.system

TEMPLATE = yaml.safe_load((Path(__file__).resolve().parent.parent / "plugins" / "qoe_video" /
                           "template.yaml").read_text(encoding="utf-8"))
HOST = "north-host-1"
CONNECTIONS = [10, 50]
STEPS = ["deploy 1 vCPU", "throughput 1 vCPU", "viewers 1 vCPU", "remove 1 vCPU", "write model"]


class HereDriver(OpenStackDriver):
    """The ``openstack`` driver, with what its servers' user-data starts run here from each
    deployment until its termination: its caches (:class:`CachesHere`, the sample origin
    at the SIG's origin; ``origin_down``: closed as soon as the caches run) and the agent
    of each region's load generator once a load test has the driver create its server
    (:class:`GeneratorsHere`, files under ``root``).

    ``generators``: each deployment's; ``servers``: ``{vCDN: its servers' names}`` just
    before its termination.
    """

    def __init__(self, admin_conn, root, origin_down=False):
        super().__init__()
        self.admin_conn, self.root, self.origin_down = admin_conn, root, origin_down
        self.running, self.generators, self.servers = {}, [], {}

    def deploy(self, sig, progress=no_progress):
        deployment = super().deploy(sig, progress)
        running = contextlib.ExitStack()
        try:
            caches = running.enter_context(CachesHere(self.admin_conn, deployment,
                                                      (sig.origin.host, sig.origin.port)))
            if self.origin_down:
                caches.origin.shutdown()
                caches.origin.server_close()
            self.generators.append(running.enter_context(GeneratorsHere(caches, self.root)))
        except BaseException:
            running.close()
            super().terminate(deployment)
            raise
        self.running[deployment.deployment_id] = running
        return deployment

    def terminate(self, deployment, progress=no_progress):
        self.servers[deployment.deployment_id] = tagged(self.admin_conn,
                                                        deployment.deployment_id)["servers"]
        running = self.running.pop(deployment.deployment_id, None)
        if running is not None:
            running.close()
        super().terminate(deployment, progress)


@pytest.fixture
def ro(caches_here_env, tmp_path, monkeypatch):
    """``ro(driver)``: a signed test client of an RO app (SQLite) calibrating through ``driver``."""
    monkeypatch.setenv("CDNAAS_STATE_DIR", str(tmp_path))
    with ro_apps(f"sqlite:///{tmp_path / 'ro.db'}") as make:
        yield lambda driver: signed(make(driver).test_client())


@pytest.fixture
def one_vcpu_flavor(admin_conn):
    """A flavor of exactly the measured cache's 1 vCPU and 1 GB: the mini cloud's smallest
    that fits 1 GB has 2 vCPUs, which the driver refuses to measure as 1."""
    flavor = admin_conn.compute.create_flavor(name=f"calibration-{uuid.uuid4().hex[:6]}",
                                              vcpus=1, ram=1024, disk=1, is_public=True)
    yield flavor
    admin_conn.compute.delete_flavor(flavor.id, ignore_missing=True)


def calibrate(client, seconds=300):
    """Start the campaign (RO's request as the API makes it) and follow it until it ends;
    return the job."""
    response = client.post("/ro/v1/calibrations", json={
        "flavor": TEMPLATE["flavor"], "template_version": TEMPLATE["version"],
        "technology": TEMPLATE["technology"], "plugin": TEMPLATE["plugin"], "host": HOST,
        "region": {"name": "north", "zone": "north-az", "vim_region": None,
                   "client_prefixes": ["10.1.0.0/16"]},
        "vnfs": TEMPLATE["vnfs"], "vcpus": [1], "origin": dict(ORIGIN),
        "connections": CONNECTIONS, "throughput_seconds": 1, "window_seconds": 4, "windows": 1,
        "viewers_start": 20, "viewers_factor": 2, "max_steps": 2, "max_seconds": 600})
    assert response.status_code == 202, response.get_json()
    deadline = time.monotonic() + seconds
    while True:
        job = client.get(f"/ro/v1/calibrations/{response.get_json()['id']}").get_json()
        if job["state"] in ("COMPLETED", "FAILED"):
            return job
        assert time.monotonic() < deadline, job
        time.sleep(1)


def test_a_calibration_campaign_measures_a_cache_on_openstack(ro, admin_conn, tmp_path,
                                                              one_vcpu_flavor):
    """The job completes every step; its model validates and every point is measured
    (host, date, the cache config's hash, the tool that measured it); the throughput
    points are real answers, the viewer points have a MOS; the generator was a server of
    the measurement vCDN and went with it, leaving nothing in the cloud."""
    driver = HereDriver(admin_conn, tmp_path)
    job = calibrate(ro(driver))
    assert job["state"] == "COMPLETED", job["error"]
    assert [(s["name"], s["state"]) for s in job["steps"]] == [(s, "COMPLETED") for s in STEPS]
    [(vcdn_id, servers)] = driver.servers.items()  # the measurement vCDN, as it was removed
    assert servers == sorted(plan.resource_name(vcdn_id, name)
                             for name in ("cache-0", "dns", "loadgen-north"))
    for generators in driver.generators:
        generators.started()
    assert nothing_left(admin_conn, vcdn_id) == {}

    result = job["result"]
    [run] = result["runs"]
    print(f"\ncalibration {job['id']} on the mini cloud took {result['seconds']} s; "
          "requests/s (KB, connections): " + ", ".join(
              f"{p['requests_per_second']} ({p['object_kb']}, {p['connections']})"
              for p in run["throughput"]) + "; MOS (viewers): " + ", ".join(
              f"{p['mos']} ({p['viewers']})" for p in run["viewers"]))
    assert [(p["object_kb"], p["connections"]) for p in run["throughput"]] == [
        (round(kb, 3), c) for kb in campaign.OBJECTS.values() for c in CONNECTIONS]
    for point in run["throughput"]:
        assert point["requests_per_second"] > 0 and point["errors"] == point["non_2xx"] == 0
        assert point["isolated"] and point["cache_cpu"] is None  # diagnostics: admins only
    assert [p["viewers"] for p in run["viewers"]] == [20, 40] and run["stopped"] is None
    for point in run["viewers"]:
        assert qoe.WORST <= point["mos"] <= qoe.BEST and point["requests_per_second"] > 0

    document = result["model"]
    jsonschema.validate(document, models.schema())
    model = models.parse(yaml.safe_load(result["model_yaml"]))
    assert model.qoe.xs == (20, 40)
    config_sha256 = modelfile.config_sha256(TEMPLATE["vnfs"], (
        plugins.load(plugins.FLAVORS, TEMPLATE["plugin"]).templates_folder(),))
    now = datetime.datetime.now(datetime.timezone.utc)
    tools = {"throughput": wrk.version(), "qoe": viewers.TOOL, "response_time": viewers.TOOL}
    for kind, tool in tools.items():
        points = (document[kind][0] if kind == "response_time" else document[kind])["points"]
        assert points, kind
        for point in points:
            found = point["calibration"]
            measured_at = datetime.datetime.fromisoformat(found["measured_at"].replace("Z",
                                                                                       "+00:00"))
            assert point["source"] == "measured" and found["host"] == HOST, point
            assert (found["vcpus"], found["vnf_config_sha256"], found["tool"]) == (
                1, config_sha256, tool), point
            assert datetime.timedelta(0) <= now - measured_at < datetime.timedelta(minutes=10)


def test_a_cache_that_cannot_reach_its_origin_fails_the_campaign(ro, admin_conn, tmp_path,
                                                                 one_vcpu_flavor):
    """The cache answers the warm-up with errors (its origin refuses it): the job fails
    saying so, before measuring anything, and the measurement vCDN is removed."""
    driver = HereDriver(admin_conn, tmp_path, origin_down=True)
    job = calibrate(ro(driver))
    assert job["state"] == "FAILED" and job["result"] is None, job
    assert "the measurement cache did not serve /objects/small (" in job["error"]
    assert f"reach the origin {ORIGIN['host']}:{ORIGIN['port']}?" in job["error"]
    assert {s["name"]: s["state"] for s in job["steps"]} == {
        "deploy 1 vCPU": "COMPLETED", "throughput 1 vCPU": "SKIPPED",
        "viewers 1 vCPU": "SKIPPED", "remove 1 vCPU": "COMPLETED", "write model": "SKIPPED"}
    [vcdn_id] = driver.servers
    assert nothing_left(admin_conn, vcdn_id) == {}


def test_the_driver_measures_a_vnf_only_on_its_planned_vcpus(admin_conn):
    """A cache of 1 vCPU on the smallest flavor that fits its RAM, m1.medium of 2 vCPUs, as
    Nova shows a server's flavor: refused, naming a flavor to create (per-vCPU figures
    would be overstated); planned for 2: measured."""
    server = admin_conn.compute.create_server(
        name=f"cdnaas-test-vcpus-{uuid.uuid4().hex[:6]}", networks="none",
        flavor_id=admin_conn.compute.find_flavor("m1.medium", ignore_missing=False).id,
        image_id=admin_conn.image.find_image("cdnaas-vnf", ignore_missing=False).id)
    try:
        admin_conn.compute.wait_for_server(server, wait=120, interval=0.5)

        def cache(vcpus):
            return VnfInstance("cache-0", "cache", "north", HOST, "10.0.0.10", server.id,
                               vcpus=vcpus)
        with pytest.raises(VimError, match=r"cache-0 runs on flavor m1.medium of 2 vCPUs, not "
                                           r"the 1 .*create one of 1 vCPUs and 1024 MB"):
            check_measured_vcpus(admin_conn, cache(1))
        check_measured_vcpus(admin_conn, cache(2))
    finally:
        admin_conn.compute.delete_server(server.id, ignore_missing=True)
        admin_conn.compute.wait_for_delete(server, wait=120, interval=0.5)
