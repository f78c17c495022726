"""What the Instance Manager reads through RO: each VNF's load figures from the VIM driver
(the no-op driver's model, the local driver's nginx and cgroups) and RO's metrics endpoint.

Its tests that start no process are in tests/unit/test_im_vnf_metrics_units.py (the unit
tier)."""
import os
import time
import uuid

import pytest

from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.db import migrate
from cdnaas.db.engine import Database
from cdnaas.ro.app import create_app
from cdnaas.ro.vim.local import clients
from cdnaas.ro.vim.local.driver import LocalDriver
from cdnaas.ro.vim.noop import NoopDriver
from tests.support.sigs import sample_sig
from tests.support.auth import signed


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
