"""What the Instance Manager reads through RO: each VNF's load figures from the VIM driver
(the no-op driver's model, the local driver's nginx and cgroups) and RO's metrics endpoint."""
import json
import os
import time
import uuid

import pytest

from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.db import migrate
from cdnaas.db.engine import Database
from cdnaas.ro.app import create_app
from cdnaas.ro.vim.local import cgroups, clients
from cdnaas.ro.vim.local.driver import LocalDriver
from cdnaas.ro.vim.noop import CHUNK_SECONDS, REQUESTS_PER_VCPU, NoopDriver
from tests.support.sigs import sample_sig
from tests.support.auth import signed


def sig(caches=None, vcdn_id="vcdn-1"):
    return ServiceInstanceGraph.from_dict(sample_sig(vcdn_id, caches or {"north": 2, "south": 1}))


def test_noop_figures_follow_the_injected_viewers_over_time():
    now = [1000.0]
    viewers = {"north": 3000}
    driver = NoopDriver(load=lambda _id: viewers, clock=lambda: now[0])
    deployment = driver.deploy(sig())
    first = {f.name: f for f in driver.metrics(deployment)}
    now[0] += 10
    later = {f.name: f for f in driver.metrics(deployment)}
    assert [f.name for f in driver.metrics(deployment)] == [v.name for v in deployment.vnfs]
    assert later["north-lb"].active_connections == 3000  # every viewer's connection
    assert later["north-cache-1"].active_connections == 1500  # shared by vCPUs
    assert later["north-cache-1"].requests - first["north-cache-1"].requests == \
        1500 / CHUNK_SECONDS * 10
    busy = 1500 / CHUNK_SECONDS / (2 * REQUESTS_PER_VCPU)
    assert later["north-cache-1"].cpu_seconds == pytest.approx(busy * 2 * 10)
    assert later["dns-1"].active_connections is None and later["dns-1"].requests is None
    assert later["south-cache-1"].requests == 0 and later["south-cache-1"].read_at == 1010.0


def test_noop_load_file_is_read_at_each_call(tmp_path, monkeypatch):
    path = tmp_path / "load.json"
    monkeypatch.setenv("CDNAAS_NOOP_LOAD_FILE", str(path))
    driver = NoopDriver()
    deployment = driver.deploy(sig(vcdn_id="filed"))
    assert {f.active_connections for f in driver.metrics(deployment) if f.role != "dns"} == {0}
    path.write_text(json.dumps({"filed": {"south": 700}}))
    south = {f.name: f for f in driver.metrics(deployment) if f.region == "south"}
    assert south["south-lb"].active_connections == 700
    assert south["south-cache-1"].active_connections == 700


def test_noop_counters_survive_an_update_for_the_caches_kept():
    now = [0.0]
    driver = NoopDriver(load=lambda _id: {"north": 2000}, clock=lambda: now[0])
    deployment = driver.deploy(sig())
    driver.metrics(deployment)
    now[0] = 5.0
    before = {f.name: f.requests for f in driver.metrics(deployment)}
    grown = driver.update(deployment, sig({"north": 3, "south": 1}))
    now[0] = 10.0
    after = {f.name: f.requests for f in driver.metrics(grown)}
    assert after["north-cache-1"] > before["north-cache-1"] > 0
    assert after["north-cache-3"] == 0  # new: counts from its first reading


@pytest.fixture
def ro(database_url):
    migrate.upgrade("ro", database_url)
    app = create_app(Database(database_url), driver=NoopDriver(load=lambda _id: {"north": 10}))
    yield signed(app.test_client())
    app.extensions["ro"].shutdown()


def wait_active(client, deployment_id):
    deadline = time.monotonic() + 10
    while client.get(f"/ro/v1/deployments/{deployment_id}").get_json()["status"] != "ACTIVE":
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_ro_serves_the_figures_of_an_active_deployment(ro):
    assert ro.get("/ro/v1/deployments/nope/metrics").status_code == 404
    assert ro.put("/ro/v1/deployments/vcdn-1", json={"sig": sample_sig("vcdn-1")}).status_code == 202
    wait_active(ro, "vcdn-1")
    answer = ro.get("/ro/v1/deployments/vcdn-1/metrics")
    assert answer.status_code == 200
    body = answer.get_json()
    assert body["id"] == "vcdn-1"
    lb = next(v for v in body["vnfs"] if v["name"] == "north-lb")
    assert lb["active_connections"] == 10 and lb["role"] == "load_balancer"
    assert set(lb) == {"name", "role", "region", "host", "vcpus", "read_at",
                       "active_connections", "requests", "cpu_seconds"}
    assert ro.delete("/ro/v1/deployments/vcdn-1").status_code == 202
    assert ro.get("/ro/v1/deployments/vcdn-1/metrics").status_code == 409  # not ACTIVE


def fake_hierarchy(tmp_path, monkeypatch, layout):
    """Point cgroups at a fake tree: ``v2``, ``v1`` (cpu and cpuacct together) or ``split``."""
    v2, v1, accounting = tmp_path / "unified", tmp_path / "cpu", tmp_path / "cpuacct"
    for path in (v2, v1, accounting):
        path.mkdir()
    if layout == "v2":
        (v2 / "cgroup.controllers").write_text("cpu memory\n")
    else:
        (v1 / "cpu.cfs_quota_us").write_text("-1\n")
    if layout == "split":
        (accounting / "cpuacct.usage").write_text("0\n")
    monkeypatch.setattr(cgroups, "ROOT_V2", v2)
    monkeypatch.setattr(cgroups, "ROOT_V1", v1)
    monkeypatch.setattr(cgroups, "ROOT_V1_ACCOUNTING", accounting)
    return {"v2": v2, "v1": v1, "split": v1}[layout] / "cdnaas" / "g", accounting / "cdnaas" / "g"


def test_cpu_time_of_a_group_on_cgroup_v2(tmp_path, monkeypatch):
    group, _twin = fake_hierarchy(tmp_path, monkeypatch, "v2")
    group.mkdir(parents=True)
    (group / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
    assert cgroups.cpu_usage_seconds("g") == 2.5
    assert cgroups.cpu_usage_seconds("gone") is None


def test_cpu_time_of_a_group_with_cpu_and_cpuacct_together(tmp_path, monkeypatch):
    group, _twin = fake_hierarchy(tmp_path, monkeypatch, "v1")
    group.mkdir(parents=True)
    (group / "cpuacct.usage").write_text("1500000000\n")
    assert cgroups.cpu_usage_seconds("g") == 1.5


def test_cpu_time_where_cpuacct_is_its_own_hierarchy_joins_the_groups_processes(
        tmp_path, monkeypatch):
    group, twin = fake_hierarchy(tmp_path, monkeypatch, "split")
    group.mkdir(parents=True)
    (group / "cgroup.procs").write_text(f"{os.getpid()}\n")
    twin.mkdir(parents=True)
    (twin / "cgroup.procs").write_text("")
    (twin / "cpuacct.usage").write_text("750000000\n")
    assert cgroups.cpu_usage_seconds("g") == 0.75
    assert (twin / "cgroup.procs").read_text() == str(os.getpid())  # joined for accounting
    assert cgroups.cpu_usage_seconds("gone") is None


@pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")
def test_the_local_driver_reads_nginx_and_the_cgroups(origin, tmp_path, monkeypatch):
    monkeypatch.setenv("CDNAAS_STATE_DIR", str(tmp_path))
    document = sample_sig(f"im-{uuid.uuid4().hex[:8]}", {"north": 1})
    document["origin"] = {"scheme": "http", "host": "127.0.0.1", "port": origin.server_address[1]}
    live = ServiceInstanceGraph.from_dict(document)
    driver = LocalDriver()
    deployment = driver.deploy(live)
    try:
        before = {f.name: f for f in driver.metrics(deployment)}
        lb = deployment.region_endpoints["north"]
        with clients.client(live.vcdn_id, "north", "10.1.0.70") as viewer:
            command = ["curl", "-s"]
            for index in range(40):
                command += ["-o", "/dev/null", f"http://{lb}/objects/chunk-low?n={index % 5}"]
            viewer.run(command, timeout=60)
        after = {f.name: f for f in driver.metrics(deployment)}
    finally:
        driver.terminate(deployment)
    cache, balancer = after["north-cache-1"], after["north-lb"]
    assert balancer.requests - before["north-lb"].requests >= 40
    assert cache.requests - before["north-cache-1"].requests >= 5
    assert balancer.active_connections == 0  # the reading's own is not counted
    assert cache.cpu_seconds > before["north-cache-1"].cpu_seconds
    assert after["dns-1"].requests is None and after["dns-1"].cpu_seconds is not None


def test_ro_reads_health_figures_and_traffic_in_one_answer(ro):
    """``GET .../readings`` (what the IM reads each pass): health, figures and traffic as
    their own endpoints answer them; a cursor RO did not make loses the traffic, named,
    not the health and figures."""
    assert ro.get("/ro/v1/deployments/nope/readings").status_code == 404
    assert ro.put("/ro/v1/deployments/vcdn-1", json={"sig": sample_sig("vcdn-1")}).status_code == 202
    wait_active(ro, "vcdn-1")
    body = ro.get("/ro/v1/deployments/vcdn-1/readings").get_json()
    assert body["id"] == "vcdn-1" and body["traffic_error"] is None
    assert body["health"] == ro.get("/ro/v1/deployments/vcdn-1/health").get_json()
    metrics = ro.get("/ro/v1/deployments/vcdn-1/metrics").get_json()
    assert [v["name"] for v in body["metrics"]["vnfs"]] == [v["name"] for v in metrics["vnfs"]]
    assert next(v for v in body["metrics"]["vnfs"]
                if v["name"] == "north-lb")["active_connections"] == 10
    traffic = ro.get("/ro/v1/deployments/vcdn-1/traffic").get_json()
    assert body["traffic"]["more"] is False
    assert [r["vnf"] for r in body["traffic"]["regions"]] == [r["vnf"] for r in traffic["regions"]]
    later = ro.get("/ro/v1/deployments/vcdn-1/readings",
                   query_string={"cursor": body["traffic"]["cursor"]}).get_json()
    assert later["traffic"]["cursor"] and later["traffic_error"] is None

    for cursor in ("Zm9vYmFy", "A" * 8192):
        refused = ro.get("/ro/v1/deployments/vcdn-1/readings", query_string={"cursor": cursor})
        assert refused.status_code == 200, refused.get_json()
        refused = refused.get_json()
        assert refused["traffic"] is None and "cursor is not one" in refused["traffic_error"]
        assert refused["health"]["healthy"] and len(refused["metrics"]["vnfs"]) == len(
            metrics["vnfs"])
    assert ro.get("/ro/v1/deployments/vcdn-1/readings",
                  query_string={"cursor": "bad cursor\n"}).status_code == 400  # by the spec
    assert ro.delete("/ro/v1/deployments/vcdn-1").status_code == 202
    assert ro.get("/ro/v1/deployments/vcdn-1/readings").status_code == 409  # not ACTIVE
