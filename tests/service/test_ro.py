"""The Resource Orchestrator's API against the noop driver, on SQLite and PostgreSQL."""
import concurrent.futures
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cdnaas.common import errors
from cdnaas.common.clients import RoClient
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.db import migrate
from cdnaas.db.engine import Database
from cdnaas.ro import reconciliation
from cdnaas.ro.models import DeploymentRecord
from cdnaas.ro.vim.base import RemovalIncomplete, VimError, no_progress
from cdnaas.ro.vim.noop import NoopDriver
from tests.support.ro import ro_apps
from tests.support.sigs import sample_sig
from tests.support.auth import signed

WAIT_SECONDS = 5


class GatedDriver(NoopDriver):
    """A noop driver whose deploys wait until the test opens ``gate``."""

    def __init__(self):
        self.gate = threading.Event()

    def deploy(self, sig, progress=no_progress):
        assert self.gate.wait(WAIT_SECONDS), "the test never opened the gate"
        return super().deploy(sig, progress)


class RefusingTerminateDriver(NoopDriver):
    """A noop driver whose first terminate fails, as a VIM that refuses once."""

    def __init__(self):
        self.refusals = 1

    def terminate(self, deployment, progress=no_progress):
        if self.refusals:
            self.refusals -= 1
            raise VimError("the VIM refused to delete servers")
        super().terminate(deployment, progress)


class LeavingDriver(NoopDriver):
    """A noop driver whose updates are done but cannot delete all they removed, as a VIM
    that refuses to delete a network still in use."""

    def update(self, deployment, sig, progress=no_progress, previous=None):
        done = super().update(deployment, sig, progress, previous)
        raise RemovalIncomplete("network south is in use; the update is done", done)


@pytest.fixture
def make_app(database_url):
    """``make_app(driver=None)``: an RO app over a migrated database, stopped at the end."""
    with ro_apps(database_url) as make:
        yield lambda driver=None: make(driver or NoopDriver())


@pytest.fixture
def client(make_app):
    return signed(make_app().test_client())


def wait_for(client, deployment_id, status):
    """Poll the deployment until it has ``status`` (at most :data:`WAIT_SECONDS`)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        body = client.get(f"/ro/v1/deployments/{deployment_id}").get_json()
        if body["status"] == status or time.monotonic() > deadline:
            assert body["status"] == status, body
            return body
        time.sleep(0.02)


def put(client, sig):
    return client.put(f"/ro/v1/deployments/{sig['vcdn_id']}", json={"sig": sig})


def vnf_names(body):
    return sorted(v["name"] for v in body["vnfs"])


def test_deploy_update_delete(client):
    sig = sample_sig("vcdn-1")
    answer = put(client, sig)
    assert answer.status_code == 202
    assert answer.get_json()["status"] == "DEPLOYING"

    active = wait_for(client, "vcdn-1", "ACTIVE")
    assert active["entry_point"]["hostname"] == "vcdn-1.cdn.example.net"
    assert active["entry_point"]["dns_servers"] == ["198.18.0.53"]
    assert active["region_endpoints"] == {"north": "198.18.0.2", "south": "198.18.1.2"}
    assert vnf_names(active) == sorted(v["name"] for v in sig["vnfs"])
    assert (active["error"], active["last_error"], active["driver"]) == (None, None, "noop")
    assert {s["name"] for s in active["steps"]} >= {"boot caches", "configure DNS"}
    assert all(s["state"] == "COMPLETED" for s in active["steps"])

    health = client.get("/ro/v1/deployments/vcdn-1/health")
    assert health.status_code == 200 and health.get_json()["healthy"] is True

    changed = sample_sig("vcdn-1", {"north": 3, "south": 1})
    answer = put(client, changed)
    assert answer.status_code == 202 and answer.get_json()["status"] == "UPDATING"
    updated = wait_for(client, "vcdn-1", "ACTIVE")
    assert vnf_names(updated) == sorted(v["name"] for v in changed["vnfs"])
    assert [d["id"] for d in client.get("/ro/v1/deployments").get_json()["deployments"]] == \
        ["vcdn-1"]

    answer = client.delete("/ro/v1/deployments/vcdn-1")
    assert answer.status_code == 202 and answer.get_json()["status"] == "DELETING"
    deleted = wait_for(client, "vcdn-1", "DELETED")
    assert deleted["vnfs"] == [] and deleted["entry_point"] is None
    again = client.delete("/ro/v1/deployments/vcdn-1")
    assert again.status_code == 200 and again.get_json()["status"] == "DELETED"
    assert "vcdn-1" not in NoopDriver().cleanup(set())


def test_unhealthy_host_is_reported(client, monkeypatch):
    put(client, sample_sig("vcdn-1"))
    wait_for(client, "vcdn-1", "ACTIVE")
    monkeypatch.setenv("CDNAAS_TEST_NOOP_UNHEALTHY_HOSTS", "south-host-2")
    health = client.get("/ro/v1/deployments/vcdn-1/health").get_json()
    assert health["healthy"] is False
    assert [v["name"] for v in health["vnfs"] if not v["healthy"]] == ["south-cache-2"]


def test_invalid_sig_names_the_field(client):
    sig = sample_sig("vcdn-1")
    sig["vnfs"][1]["role"] = "proxy"
    answer = put(client, sig)
    assert answer.status_code == 400
    assert answer.get_json()["error"]["field"] == "sig.vnfs.1.role"

    sig = sample_sig("vcdn-1")
    sig["vnfs"][1]["region"] = "east"
    answer = put(client, sig)
    assert answer.status_code == 400
    assert answer.get_json()["error"]["field"] == "sig.vnfs.1.region"

    answer = client.put("/ro/v1/deployments/vcdn-1", json={"graph": sig})
    assert answer.status_code == 400
    assert client.get("/ro/v1/deployments/vcdn-1").status_code == 404


def test_sig_of_another_vcdn_is_refused(client):
    answer = client.put("/ro/v1/deployments/vcdn-2", json={"sig": sample_sig("vcdn-1")})
    assert answer.status_code == 400
    assert answer.get_json()["error"]["field"] == "sig.vcdn_id"


def test_failing_host_ends_in_error_then_redeploys(client, monkeypatch):
    monkeypatch.setenv("CDNAAS_TEST_NOOP_FAIL_HOSTS", "south-host-2")
    put(client, sample_sig("vcdn-1"))
    failed = wait_for(client, "vcdn-1", "ERROR")
    assert "south-host-2" in failed["error"] and failed["last_error"] == failed["error"]
    assert failed["vnfs"] == [] and failed["entry_point"] is None
    assert any(s["state"] == "FAILED" for s in failed["steps"])
    assert client.get("/ro/v1/deployments/vcdn-1/health").status_code == 409
    assert "vcdn-1" not in NoopDriver().cleanup(set()), "the driver kept something"

    monkeypatch.delenv("CDNAAS_TEST_NOOP_FAIL_HOSTS")
    assert put(client, sample_sig("vcdn-1")).status_code == 202
    active = wait_for(client, "vcdn-1", "ACTIVE")
    assert (active["error"], active["last_error"]) == (None, None)


def test_failed_update_keeps_the_previous_deployment(client, monkeypatch):
    put(client, sample_sig("vcdn-1"))
    before = wait_for(client, "vcdn-1", "ACTIVE")
    monkeypatch.setenv("CDNAAS_TEST_NOOP_FAIL_HOSTS", "north-host-3")
    grown = sample_sig("vcdn-1", {"north": 3, "south": 2}, cache_hosts=3)
    assert put(client, grown).get_json()["status"] == "UPDATING"
    after = wait_for(client, "vcdn-1", "ACTIVE")
    assert after["error"] is None and "north-host-3" in after["last_error"]
    assert after["vnfs"] == before["vnfs"]
    assert client.get("/ro/v1/deployments/vcdn-1/health").get_json()["healthy"] is True


def test_an_update_done_with_something_left_to_delete_records_what_serves(make_app):
    client = signed(make_app(LeavingDriver()).test_client())
    put(client, sample_sig("vcdn-1"))
    wait_for(client, "vcdn-1", "ACTIVE")
    shrunk = sample_sig("vcdn-1", {"north": 1, "south": 1})
    assert put(client, shrunk).get_json()["status"] == "UPDATING"
    after = wait_for(client, "vcdn-1", "ACTIVE")
    assert vnf_names(after) == sorted(v["name"] for v in shrunk["vnfs"]), "the new VNFs serve"
    assert after["error"] is None and after["last_error"] == \
        "network south is in use; the update is done"
    assert put(client, shrunk).status_code in (200, 202)  # the same SIG again: nothing new


def test_failed_terminate_keeps_the_record_until_removed(make_app):
    client = signed(make_app(RefusingTerminateDriver()).test_client())
    put(client, sample_sig("vcdn-1"))
    wait_for(client, "vcdn-1", "ACTIVE")
    assert client.delete("/ro/v1/deployments/vcdn-1").status_code == 202
    failed = wait_for(client, "vcdn-1", "ERROR")
    assert "terminate failed" in failed["error"] and failed["vnfs"], "resources stay recorded"

    assert put(client, sample_sig("vcdn-1")).status_code == 202  # leftovers go first
    active = wait_for(client, "vcdn-1", "ACTIVE")
    assert [s["name"] for s in active["steps"]][0] == "remove VNFs"
    assert {v["address"] for v in active["vnfs"]} == {v["address"] for v in failed["vnfs"]}


def test_busy_deployment_answers_conflict(make_app):
    driver = GatedDriver()
    client = signed(make_app(driver).test_client())
    sig = sample_sig("vcdn-1")
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: put(client, sig).status_code, range(8)))
    assert sorted(answers) == [202] + [409] * 7
    assert client.delete("/ro/v1/deployments/vcdn-1").status_code == 409
    assert client.get("/ro/v1/deployments/vcdn-1/health").status_code == 409
    driver.gate.set()
    wait_for(client, "vcdn-1", "ACTIVE")
    assert client.delete("/ro/v1/deployments/vcdn-1").status_code == 202


def test_unknown_deployment(client):
    answer = client.get("/ro/v1/deployments/nope")
    assert answer.status_code == 404 and answer.get_json()["error"]["code"] == 404
    assert client.get("/ro/v1/deployments/nope/health").status_code == 404
    answer = client.delete("/ro/v1/deployments/nope")
    assert answer.status_code == 200 and answer.get_json() == {"id": "nope", "status": "DELETED"}
    assert client.get("/ro/v1/deployments").get_json() == {"deployments": []}


def test_restart_finishes_or_undoes_interrupted_work(make_app, database_url):
    client = signed(make_app().test_client())
    for vcdn_id in ("updating", "deleting", "serving"):
        put(client, sample_sig(vcdn_id))
        wait_for(client, vcdn_id, "ACTIVE")
    before = client.get("/ro/v1/deployments/updating").get_json()
    database = Database(database_url)
    with database.transaction() as session:  # what a crash mid-work leaves behind
        session.get(DeploymentRecord, "updating").status = "UPDATING"
        session.get(DeploymentRecord, "deleting").status = "DELETING"
        session.add(DeploymentRecord(id="deploying", driver="noop", status="DEPLOYING",
                                     sig=sample_sig("deploying"), steps=[]))
    database.dispose()
    NoopDriver().deploy(ServiceInstanceGraph.from_dict(sample_sig("deploying")))  # half-built, never recorded
    NoopDriver._running["updating"]["noop-added"] = "added-by-the-update"  # never recorded

    client = signed(make_app().test_client())
    for vcdn_id, status in (("updating", "ACTIVE"), ("deleting", "DELETED"),
                            ("deploying", "ERROR"), ("serving", "ACTIVE")):
        body = client.get(f"/ro/v1/deployments/{vcdn_id}").get_json()
        assert body["status"] == status, body
        if status == "ERROR":
            assert "interrupted by a restart" in body["error"] and body["vnfs"] == []
    updating = client.get("/ro/v1/deployments/updating").get_json()
    assert updating["vnfs"] == before["vnfs"], "the update was undone, the deployment serves"
    assert "update was interrupted by a restart" in updating["last_error"]
    assert "noop-added" not in NoopDriver._running["updating"]
    assert NoopDriver().cleanup(set()) == ["serving", "updating"]


class RestoreFailingDriver(NoopDriver):
    """A noop driver that cannot bring deployment ``failing`` back to its record."""

    def restore(self, deployment, sig, progress=no_progress):
        if deployment.deployment_id == "failing":
            raise VimError("the VIM refused to boot servers")
        return super().restore(deployment, sig, progress)


def test_after_a_restore_the_next_start_brings_what_runs_back_to_the_records(make_app,
                                                                             database_url):
    client = signed(make_app().test_client())
    for vcdn_id in ("kept", "failing"):
        put(client, sample_sig(vcdn_id))
        wait_for(client, vcdn_id, "ACTIVE")
    NoopDriver._running["kept"]["noop-later"] = "added-after-the-backup"
    reconciliation.request(database_url, "the restore of a test backup")

    client = signed(make_app(RestoreFailingDriver()).test_client())
    report, = client.get("/ro/v1/reconciliations").get_json()["reconciliations"]
    assert (report["status"], report["cause"]) == ("FAILED", "the restore of a test backup")
    assert report["error"] == "deployment failing: the VIM refused to boot servers"
    kept = client.get("/ro/v1/deployments/kept").get_json()
    assert kept["status"] == "ACTIVE" and "noop-later" not in NoopDriver._running["kept"]
    assert kept["steps"][-1] == {"name": "reconcile after restore", "done": 1, "total": 1,
                                 "state": "COMPLETED"}
    failing = client.get("/ro/v1/deployments/failing").get_json()
    assert failing["status"] == "ERROR" and failing["error"] == (
        "could not be brought back to its record after the restore of a test backup: "
        "the VIM refused to boot servers")
    done = {(a["deployment"], a["vnf"]): a["action"] for a in report["actions"]}
    assert done == {**{(d["id"], v["name"]): "adopt" for d in (kept, failing)
                       for v in d["vnfs"]}, ("kept", "added-after-the-backup"): "remove"}

    client = signed(make_app().test_client())  # owed once: the next start changes nothing
    assert [r["id"] for r in client.get("/ro/v1/reconciliations").get_json()[
        "reconciliations"]] == [report["id"]]
    assert client.get("/ro/v1/deployments/failing").get_json()["status"] == "ERROR"


def test_cdnaas_ro_process(tmp_path):
    database_url = f"sqlite:///{tmp_path / 'ro.db'}"
    migrate.upgrade("ro", database_url)
    base_url = f"http://127.0.0.1:{_free_port()}"
    env = dict(os.environ, CDNAAS_RO_URL=base_url, CDNAAS_DATABASE_URL=database_url,
               CDNAAS_VIM_DRIVER="noop", CDNAAS_STATE_DIR=str(tmp_path))
    env.pop("CDNAAS_RO_BIND", None)
    with open(tmp_path / "ro.log", "wb") as log:
        process = subprocess.Popen([str(Path(sys.executable).parent / "cdnaas-ro")], env=env,
                                   stdout=log, stderr=subprocess.STDOUT)
    try:
        ro = RoClient(base_url=base_url, timeout=5)
        _wait_until(lambda: ro.get("/healthz"), process)
        assert ro.deploy("vcdn-1", sample_sig("vcdn-1")).status == "DEPLOYING"
        active = _wait_until(lambda: _with_status(ro.get_deployment("vcdn-1"), "ACTIVE"), process)
        assert active.entry_point["hostname"] == "vcdn-1.cdn.example.net"
        assert ro.health("vcdn-1").healthy is True
        assert ro.undeploy("vcdn-1")["status"] == "DELETING"
        _wait_until(lambda: _with_status(ro.get_deployment("vcdn-1"), "DELETED"), process)
        assert ro.undeploy("vcdn-1")["status"] == "DELETED"
        with pytest.raises(errors.NotFound):
            ro.get_deployment("nope")
    finally:
        process.terminate()
        process.wait(timeout=10)


def _with_status(deployment, status):
    assert deployment.status == status, deployment
    return deployment


def _wait_until(attempt, process, seconds=15):
    """Return ``attempt()`` once it stops raising; fail if ``process`` dies or time runs out."""
    deadline = time.monotonic() + seconds
    while True:
        assert process.poll() is None, f"cdnaas-ro exited with {process.returncode}"
        try:
            return attempt()
        except (AssertionError, errors.CdnaasError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
