"""What the local driver's health sees of a VNF's processes, and how its restore mends them:
real nginx and dnsmasq in namespaces, a master killed with SIGKILL as an operator or a
crash would (root only)."""
import logging
import os
import signal
import socket
import subprocess

import pytest

from cdnaas.common import config
from cdnaas.ro.vim import dnsprobe, management
from cdnaas.ro.vim.local import cgroups, clients, netns, network, processes, vnfhealth
from cdnaas.ro.vim.local.driver import LocalDriver
from cdnaas.vnf import generation
from tests.test_local_driver import make_sig, running, state_dir  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")


@pytest.fixture(scope="module")
def live(origin, state_dir):  # noqa: F811
    """One region: a cache, its balancer and the DNS VNF; each test leaves it whole."""
    driver = LocalDriver()
    sig = make_sig(origin, {"north": 1})
    deployment = driver.deploy(sig)
    yield driver, sig, deployment
    driver.terminate(deployment)


def prefix_of(deployment, name):
    return config.state_dir() / "local" / deployment.resources["owner"] / \
        deployment.deployment_id / name


def group_of(deployment, name):
    return f"{deployment.resources['owner']}_{deployment.deployment_id}_{name}"


def health_of(driver, deployment, name):
    return next(c for c in driver.health(deployment) if c.name == name)


def fetches(sig, deployment):
    """A client of north resolves the vCDN at its DNS VNF and fetches through its balancer."""
    dns = next(v for v in deployment.vnfs if v.role == "dns")
    with clients.client(sig.vcdn_id, "north", "10.1.0.40") as viewer:
        answer = viewer.resolve(dns.address, sig.hostname)
        assert answer == [deployment.region_endpoints["north"]]
        return viewer.fetch(f"http://{sig.hostname}/objects/chunk-low",
                            resolve=(sig.hostname, answer[0]))[0]


def test_a_whole_vnf_reports_its_master_workers_and_the_generation_it_runs(live):
    driver, _sig, deployment = live
    checks = {c.name: c for c in driver.health(deployment)}
    assert all(c.healthy and not c.lasting for c in checks.values()), checks
    for name in ("north-cache-1", "north-lb"):
        prefix = prefix_of(deployment, name)
        master = processes.pid_in(prefix / "nginx.pid")
        written = generation.generation_of((prefix / "nginx.conf").read_text())
        assert written and checks[name].detail == (
            f"master {master} with {len(cgroups.children(master))} workers runs generation "
            f"{written}; answers HTTP")
    dns_prefix = prefix_of(deployment, "dns-1")
    master = processes.pid_in(dns_prefix / "dns-1-north.pid")
    written = generation.generation_of((dns_prefix / "dnsmasq-north.conf").read_text())
    assert checks["dns-1"].detail == \
        f"dnsmasq {master} (north) runs generation {written}; answers DNS"


def test_a_cache_whose_master_is_killed_is_reported_and_given_a_new_one_beside_its_workers(
        live):
    driver, sig, deployment = live
    prefix = prefix_of(deployment, "north-cache-1")
    master = processes.pid_in(prefix / "nginx.pid")
    workers = cgroups.children(master)
    os.kill(master, signal.SIGKILL)
    processes.wait_until(lambda: not running(master), "the master's end", 5)
    found = health_of(driver, deployment, "north-cache-1")
    assert not found.healthy and found.lasting
    assert found.detail == f"master {master} is gone; {len(workers)} orphan workers"
    assert fetches(sig, deployment) == 200  # the orphans still serve: only health sees it
    namespace = network.namespace_name(deployment.resources["owner"], sig.vcdn_id,
                                       "north-cache-1")
    inode = os.stat(f"{netns.NETNS_DIR}/{namespace}").st_ino
    driver.restore(deployment, sig)
    assert health_of(driver, deployment, "north-cache-1").healthy
    assert not any(running(pid) for pid in workers)  # the orphans ended once it served
    assert processes.pid_in(prefix / "nginx.pid") != master
    assert os.stat(f"{netns.NETNS_DIR}/{namespace}").st_ino == inode  # mended where it runs
    assert fetches(sig, deployment) == 200


def test_a_balancer_not_running_the_configuration_written_is_reported_and_reloaded(live):
    driver, sig, deployment = live
    conf = prefix_of(deployment, "north-lb") / "nginx.conf"
    running_generation = generation.generation_of(conf.read_text())
    changed = generation.stamp(conf.read_text().replace(
        running_generation, "pending").replace("# ", "# (edited) ", 1))
    conf.write_text(changed)  # written, never reloaded
    found = health_of(driver, deployment, "north-lb")
    assert not found.healthy and found.lasting
    assert found.detail == (f"runs configuration generation {running_generation}, RO wrote "
                            f"{generation.generation_of(changed)}")
    master = processes.pid_in(conf.parent / "nginx.pid")
    driver.restore(deployment, sig)  # reloaded on the config for the SIG
    assert health_of(driver, deployment, "north-lb").healthy
    assert processes.pid_in(conf.parent / "nginx.pid") == master
    assert generation.generation_of(conf.read_text()) == running_generation
    assert fetches(sig, deployment) == 200


def test_a_killed_dnsmasq_is_reported_and_the_dns_vnf_rebuilt_at_its_address(live):
    driver, sig, deployment = live
    prefix = prefix_of(deployment, "dns-1")
    master = processes.pid_in(prefix / "dns-1-north.pid")
    os.kill(master, signal.SIGKILL)
    processes.wait_until(lambda: not running(master), "dnsmasq's end", 5)
    found = health_of(driver, deployment, "dns-1")
    assert not found.healthy and found.lasting
    assert found.detail == f"north: master {master} is gone; no DNS answer"
    driver.restore(deployment, sig)
    after = health_of(driver, deployment, "dns-1")
    assert after.healthy, after
    assert fetches(sig, deployment) == 200
    dns = next(v for v in deployment.vnfs if v.role == "dns")
    assert dnsprobe.resolves(dns.address, sig.hostname) == [deployment.region_endpoints["north"]]


def test_only_the_daemons_program_counts_and_a_reused_process_id_names_no_master(live,
                                                                              tmp_path):
    """A balancer's group also holds its log shipper when the vCDN streams logs: no orphan.
    A pid file naming a process of another program (its id reused) names no master, and
    every nginx process of the group is then an orphan."""
    _driver, _sig, deployment = live
    pid_file = prefix_of(deployment, "north-lb") / "nginx.pid"
    group = group_of(deployment, "north-lb")
    other = subprocess.Popen(["sleep", "30"])
    try:
        cgroups.adopt(group, other.pid)
        problems, masters, descendants = vnfhealth.tree({"": pid_file}, group, "nginx")
        assert problems == [] and masters == {"": processes.pid_in(pid_file)}
        assert len(descendants[masters[""]]) >= 1
        stale = tmp_path / "stale.pid"
        stale.write_text(f"{other.pid}\n")
        nginx = [p for p in cgroups.pids(group) if processes.program(p) == "nginx"]
        assert vnfhealth.tree({"": stale}, group, "nginx")[0] == [
            f"master {other.pid} is gone", f"{len(nginx)} orphan workers"]
    finally:
        other.kill()
        other.wait()


def kill_workers_holding_connections(deployment, vnf, count=6):
    """Open ``count`` connections to cache ``vnf`` from its balancer's namespace, each
    read by a worker, then kill its workers: the kernel ends the connections, nginx's
    ``stub_status`` keeps counting them (asserted)."""
    owner = deployment.resources["owner"]
    namespace = network.namespace_name(owner, deployment.deployment_id, vnf.name)
    with netns.entered(network.namespace_name(owner, deployment.deployment_id, "north-lb")):
        held = [socket.create_connection((vnf.address, 80), timeout=5) for _ in range(count)]
    for connection in held:  # each is being read by a worker
        connection.sendall(b"GET /objects/chunk-low HTTP/1.1\r\n")
    master = processes.pid_in(prefix_of(deployment, vnf.name) / "nginx.pid")
    processes.wait_until(lambda: management.stub_status(vnf.address)["reading"]
                         >= len(held), "the workers' reading of the requests")
    for worker in cgroups.children(master):
        os.kill(worker, signal.SIGKILL)
    processes.wait_until(lambda: netns.established(namespace, (80,)) == 0,
                         "the end of the killed workers' connections")
    assert management.stub_status(vnf.address)["active"] > len(held)  # never taken off
    for connection in held:
        connection.close()


def test_a_cache_whose_workers_were_killed_drains_at_once(origin, state_dir, caplog,
                                                           monkeypatch):  # noqa: F811
    """A worker killed with connections open never takes them off nginx's ``stub_status``
    figures; the drain of a removed cache counts what the kernel has established, so it
    does not wait its whole bound for connections that are long gone, and the IM's
    metrics count no viewer that is not there."""
    monkeypatch.setenv("CDNAAS_LOCAL_DRAIN_SECONDS", "5")
    driver = LocalDriver()
    sig = make_sig(origin, {"north": 2}, "drained")
    deployment = driver.deploy(sig)
    try:
        [gone] = [v for v in deployment.vnfs if v.name == "north-cache-2"]
        kill_workers_holding_connections(deployment, gone)
        [measured] = [m for m in driver.metrics(deployment) if m.name == gone.name]
        assert measured.active_connections == 0
        caplog.set_level(logging.INFO, logger="cdnaas.ro.vim.local.driver")
        deployment = driver.update(deployment, make_sig(origin, {"north": 1}, sig.vcdn_id))
        assert [v.name for v in deployment.vnfs if v.role == "cache"] == ["north-cache-1"]
        assert "still had connections" not in caplog.text
    finally:
        driver.terminate(deployment)
