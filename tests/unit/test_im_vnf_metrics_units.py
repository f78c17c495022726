"""What the Instance Manager reads through RO: the tests that start no process (the unit tier);
the others, and what the module covers, are in tests/service/test_im_vnf_metrics.py."""
import json
import os

import pytest

from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro.vim.local import cgroups
from cdnaas.ro.vim.noop import CHUNK_SECONDS, REQUESTS_PER_VCPU, NoopDriver
from tests.support.sigs import sample_sig


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
    monkeypatch.setenv("CDNAAS_TEST_NOOP_LOAD_FILE", str(path))
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
