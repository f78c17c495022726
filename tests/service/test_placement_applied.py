"""Placement applied on the local driver (root only): each VNF runs on its planned host's CPUs.

The operator maps hosts to CPU sets of this machine (``CDNAAS_LOCAL_HOST_CPUS``); every
process of a VNF may then run only on its planned host's CPUs (``Cpus_allowed_list`` of
``/proc/<pid>/status``), a VNF whose host is not mapped runs unpinned, and the SIG, the
deployment record and the IM's ``hosts power`` agree on where every VNF runs. The
calibration's load generator keeps working beside a pinned VNF. The OpenStack half
(servers on their planned compute hosts, a refused way falling back with the difference
recorded) is in ``tests/system/test_openstack_driver.py``.

Its tests that start no process are in tests/unit/test_placement_applied_units.py (the unit
tier)."""
import datetime
import os
import subprocess
import time
import uuid

import pytest
import requests

from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro.vim.base import LoadTest, VimError
from cdnaas.ro.vim.local import cgroups
from cdnaas.ro.vim.local.driver import LocalDriver
from tests.support.api import TEMPLATE, Api, vcdn_body
from tests.support.sigs import sample_sig
from tests.support.stack import running_stack
from tests.support.im import eventually
from tests.unit.test_placement_applied_units import CPUS

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")

FIRST, LAST = str(CPUS[0]), str(CPUS[-1])


def allowed(pid):
    """The CPUs process ``pid`` may run on (``Cpus_allowed_list``), as a set."""
    with open(f"/proc/{pid}/status") as status:
        line = next(l for l in status if l.startswith("Cpus_allowed_list:"))
    return cgroups.parse_cpu_list(line.split(":", 1)[1].strip())


def group_of(vcdn_id, vnf_name):
    [group] = [g for g in cgroups.names() if g.endswith(f"_{vcdn_id}_{vnf_name}")]
    return group


def test_a_group_is_pinned_to_its_hosts_cpus_and_unmapped_hosts_stay_unpinned(monkeypatch):
    monkeypatch.setenv("CDNAAS_LOCAL_HOST_CPUS", f"eu-1={LAST}; eu-2={FIRST}-{LAST}")
    assert cgroups.cpu_map() == {"eu-1": LAST, "eu-2": f"{FIRST}-{LAST}"}
    assert (cgroups.host_cpus("eu-1"), cgroups.host_cpus("us-1"), cgroups.host_cpus(None)) \
        == (LAST, None, None)
    name, unpinned = f"pintest_{uuid.uuid4().hex[:8]}", f"pintest_{uuid.uuid4().hex[:8]}"
    worker = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60"])
    try:
        time.sleep(0.2)  # its child is forked
        cgroups.create(name, 1, cgroups.host_cpus("eu-1"))
        cgroups.create(unpinned, 1, cgroups.host_cpus("us-1"))
        cgroups.adopt(name, worker.pid)
        members = cgroups.pids(name)
        assert worker.pid in members and len(members) == 3  # the shell and its two sleeps
        assert all(allowed(pid) == {CPUS[-1]} for pid in members)
        assert cgroups.pinned_cpus(name) == {CPUS[-1]}
        assert cgroups.pinned_cpus(unpinned) is None
        with pytest.raises(VimError, match="cannot pin"):
            cgroups.create(f"{name}-x", 1, "4095")
    finally:
        cgroups.remove(name, unpinned, f"{name}-x")
        worker.kill()
        worker.wait()
    assert not {name, unpinned, f"{name}-x"} & set(cgroups.names())


@pytest.fixture
def local_driver(monkeypatch, tmp_path):
    monkeypatch.setenv("CDNAAS_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("CDNAAS_ORIGIN_ALLOW", "127.0.0.1")
    driver = LocalDriver()
    driver.check_prerequisites()
    return driver


def test_each_vnf_runs_on_its_hosts_cpus_and_a_load_test_still_runs(local_driver, origin,
                                                                     monkeypatch):
    monkeypatch.setenv("CDNAAS_LOCAL_HOST_CPUS",
                       f"north-host-1={FIRST};north-host-2={LAST};south-host-1={LAST}")
    document = sample_sig(f"pin-{uuid.uuid4().hex[:8]}", {"north": 2, "south": 2})
    document["origin"] = {"scheme": "http", "host": "127.0.0.1",
                          "port": origin.server_address[1]}
    sig = ServiceInstanceGraph.from_dict(document)
    deployment = local_driver.deploy(sig)
    try:
        for vnf in sig.vnfs:
            pids = cgroups.pids(group_of(sig.vcdn_id, vnf.name))
            assert pids, vnf.name
            wanted = cgroups.parse_cpu_list(cgroups.host_cpus(vnf.host) or f"{FIRST}-{LAST}")
            assert {pid: allowed(pid) for pid in pids} == {pid: wanted for pid in pids}, \
                (vnf.name, vnf.host)
        assert [(v.name, v.host) for v in deployment.vnfs] == [(v.name, v.host) for v in sig.vnfs]
        report = local_driver.load_test(deployment, "north-cache-2", LoadTest(
            kind="http", path="/objects/small", connections=10, seconds=1.0))
        assert report.requests > 0 and report.errors == report.non_2xx == 0
        assert report.isolated == (len(CPUS) > 1)  # the generator ran off north-host-2's CPU
        cache = cgroups.pids(group_of(sig.vcdn_id, "north-cache-2"))
        assert all(allowed(pid) == {CPUS[-1]} for pid in cache)  # still on its host
    finally:
        local_driver.terminate(deployment)
    assert not [g for g in cgroups.names() if f"_{sig.vcdn_id}_" in g]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """A stack on the local driver whose hosts are CPUs of this machine: eu-west has two
    hosts of 2 vCPUs (its 4 VNFs need both), us-east one."""
    tmp = tmp_path_factory.mktemp("placement")
    extra = {"CDNAAS_VIM_DRIVER": "local", "CDNAAS_IM_INTERVAL": "1",
             "CDNAAS_LOCAL_HOST_CPUS": f"eu-1={FIRST};eu-2={LAST};us-1={FIRST}"}
    with running_stack(None, tmp, extra_env=extra) as running:
        operator = Api(running.urls["api"], running.operator_token)
        for name, prefix, default in (("eu-west", "10.1.0.0/16", True),
                                      ("us-east", "10.2.0.0/16", False)):
            operator.ok("POST", "/regions", 201, json={
                "name": name, "client_prefixes": [prefix], "zone": f"az-{name}",
                "default": default})
        for region, host, vcpus in (("eu-west", "eu-1", 2), ("eu-west", "eu-2", 2),
                                    ("us-east", "us-1", 4)):
            operator.ok("POST", f"/regions/{region}/hosts", 201,
                        json={"name": host, "vcpus": vcpus, "ram_mb": 32768})
        assert operator.call("POST", "/templates", data=TEMPLATE.read_bytes(), headers={
            "Content-Type": "application/yaml"}).status_code == 201
        operator.ok("POST", "/tenants", 201, json={"name": "acme"})
        token = operator.ok("POST", "/tenants/acme/tokens", 201, json={})["token"]
        running.operator, running.acme = operator, Api(running.urls["api"], token)
        yield running


def test_the_sig_the_record_the_cpus_and_hosts_power_agree(stack, origin):
    body = vcdn_body("placed", (("eu-west", 100), ("us-east", 100)),
                     origin=f"http://127.0.0.1:{origin.server_address[1]}")
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
    vcdn_id = accepted["vcdn"]["id"]
    try:
        assert stack.acme.wait(accepted["operation"]["id"], timeout=120)["state"] == "COMPLETED"
        deployed = datetime.datetime.now(datetime.timezone.utc)
        headers = stack.service_headers()
        sig = requests.get(f"{stack.urls['so']}/so/v1/instances/{vcdn_id}/sig",
                           headers=headers, timeout=10).json()
        record = requests.get(f"{stack.urls['ro']}/ro/v1/deployments/{vcdn_id}",
                              headers=headers, timeout=10).json()
        assert record["driver"] == "local" and record["status"] == "ACTIVE"
        planned = {v["name"]: v["host"] for v in sig["vnfs"]}
        assert {v["name"]: v["host"] for v in record["vnfs"]} == planned
        assert {planned[n] for n in planned if n.startswith("eu-west")} == {"eu-1", "eu-2"}
        cpus = {"eu-1": {CPUS[0]}, "eu-2": {CPUS[-1]}, "us-1": {CPUS[0]}}
        for name, host in planned.items():
            pids = cgroups.pids(group_of(vcdn_id, name))
            assert pids and all(allowed(pid) == cpus[host] for pid in pids), (name, host)
        vcpus = {}
        for vnf in sig["vnfs"]:
            vcpus[vnf["host"]] = vcpus.get(vnf["host"], 0) + vnf["vcpus"]

        def sampled():  # by an IM pass that saw the deployment
            hosts = {h["name"]: h for h in stack.operator.ok("GET", "/hosts/power")["hosts"]}
            return hosts if all(hosts[h]["sampled_at"] and datetime.datetime.fromisoformat(
                hosts[h]["sampled_at"].replace("Z", "+00:00")) > deployed for h in vcpus) \
                else None
        hosts = eventually(sampled, "every host carrying VNFs sampled", 60)
        assert {h: hosts[h]["reserved_vcpus"] for h in vcpus} == vcpus
        assert all(hosts[h]["watts"] > 0 and hosts[h]["enabled"] for h in vcpus)
        assert not [h for h in vcpus if (hosts[h]["mark"] or {}).get("state") == "power_down"]
    finally:
        ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn_id}", 202)
        stack.acme.wait(ended["operation"]["id"], timeout=120)
    assert not [g for g in cgroups.names() if f"_{vcdn_id}_" in g]
