"""The data plane at its planned load: caches and balancers sized from the plan hold it.

Rendered configs carry limits sized from the VNF's vCPUs and the viewers its region
plans (and nginx accepts them); on the local driver (root) a cache of one vCPU holds
2,000 concurrent connections, straight and through its balancer, without a socket
error, an answer other than 2xx, or nginx running out of connections. Request
collapsing under the new configs: tests/test_local_driver.py.
"""
import os
import uuid
from pathlib import Path

import pytest

from cdnaas.common import config
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro import traffic
from cdnaas.ro.vim.base import LoadTest
from cdnaas.ro.vim.local import cgroups, network, processes
from cdnaas.ro.vim.local.driver import LocalDriver
from cdnaas.ro.vim.local.system import run
from cdnaas.vnf import fields, sizing, tools
from cdnaas.vnf.balancer import lb_config
from cdnaas.vnf.cache import cache_config
from tests.support.sigs import sample_sig

pytestmark = pytest.mark.system
CONNECTIONS = 2000
SECONDS = 3


def one_cache_sig(origin_port, demand, vcdn_id=None):
    document = sample_sig(vcdn_id or f"dp-{uuid.uuid4().hex[:8]}", {"north": 1})
    document["origin"] = {"scheme": "http", "host": "127.0.0.1", "port": origin_port}
    document["regions"][0]["demand"] = demand
    for vnf in document["vnfs"]:
        vnf["vcpus"] = 1
    return ServiceInstanceGraph.from_dict(document)


@pytest.mark.parametrize("demand", [2_000, 30_000])
def test_rendered_configs_carry_the_planned_limits_and_pass_nginx(tmp_path, demand):
    try:
        tools.tool_path("nginx")
    except fields.ConfigError as exc:
        pytest.skip(str(exc))
    sig = one_cache_sig(8080, demand)
    for vnf in sig.vnfs_in(role="cache") + sig.vnfs_in(role="load_balancer"):
        planned = sizing.planned_connections(sig, vnf)
        assert planned >= max(demand if vnf.role == "load_balancer" else 0,
                              sizing.CONNECTIONS_PER_VCPU * vnf.vcpus)
        common = {"name": vnf.name, "workers": vnf.vcpus, "listen_address": "127.0.0.1",
                  "listen_port": 8088, "prefix_dir": str(tmp_path / vnf.name),
                  "management_sources": ["127.0.0.1"], "planned_connections": planned,
                  "user": "root"}
        if vnf.role == "cache":
            text = cache_config(origin=sig.origin, origin_address="127.0.0.1",
                                          **common)
        else:
            text = lb_config(members=[("north-cache-1", "127.0.0.1", 8089)], **common)
        limits = sizing.nginx_limits(planned, vnf.vcpus)
        workers = int(_directive(text, "worker_processes"))
        connections = int(_directive(text, "worker_connections"))
        files = int(_directive(text, "worker_rlimit_nofile"))
        assert workers == limits.workers == vnf.vcpus
        # every planned connection and its second side, spread over the workers
        assert connections >= 2 * planned / workers
        assert files >= connections + planned / workers
        assert f"backlog={min(65535, planned)} reuseport;" in text
        tools.check_nginx(text, str(tmp_path / vnf.name))


def _directive(text, name):
    line = next(line for line in text.splitlines() if line.strip().startswith(name + " "))
    return line.strip().split()[1].rstrip(";")


@pytest.fixture(scope="module")
def deployed(origin, tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the local driver needs root")
    state = tmp_path_factory.mktemp("dataplane-state")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CDNAAS_STATE_DIR", str(state))
        driver = LocalDriver()
        sig = one_cache_sig(origin.server_address[1], CONNECTIONS)
        deployment = driver.deploy(sig)
        try:
            for vnf in ("north-cache-1", "north-lb"):  # warm: every measured answer a HIT
                driver.load_test(deployment, vnf, LoadTest("http", "/objects/chunk-low", 1, 1))
            yield driver, sig, deployment
        finally:
            driver.terminate(deployment)


@pytest.mark.parametrize("target", ["north-cache-1", "north-lb"])
def test_a_cache_holds_2000_connections_direct_and_through_its_balancer(deployed, target):
    driver, sig, deployment = deployed
    report = driver.load_test(deployment, target,
                              LoadTest("http", "/objects/chunk-low", CONNECTIONS, SECONDS))
    assert report.requests > CONNECTIONS
    assert (report.errors, report.non_2xx) == (0, 0)
    root = config.state_dir() / "local" / deployment.resources["owner"] / sig.vcdn_id
    for vnf in ("north-cache-1", "north-lb"):
        log = (root / vnf / "logs" / "error.log").read_text(errors="replace")
        for trouble in ("worker_connections are not enough", "Too many open files",
                        "upstream timed out", "setrlimit"):
            assert trouble not in log, f"{vnf}: {trouble}"


def test_a_generator_host_stays_until_its_connections_are_closed(deployed):
    """A load generator's host is deleted only once it holds no connection (or after its
    bound): deleted at once, it would leave the cache's side of each connection still
    sending into the void, holding the kernel's TCP memory the next load needs (at
    10,000 connections of 435 KB objects, all of it: benchmarks/dataplane.py)."""
    import ipaddress
    import socket
    import time

    from cdnaas.ro.vim.local import clients, netns
    _driver, _sig, deployment = deployed
    cache = {v.name: v for v in deployment.vnfs}["north-cache-1"]
    subnet = network.find_bridge(deployment.deployment_id, "north")[1]
    address = ipaddress.ip_network(subnet).broadcast_address - 3  # no probe's, no generator's
    with clients.client(deployment.deployment_id, "north", address) as host:
        assert host.wait_closed(timeout=1) == 0  # a new host holds nothing
        with netns.entered(host.namespace):
            held = socket.create_connection((cache.address, 80), timeout=5)
        try:
            started = time.monotonic()
            assert host.wait_closed(timeout=0.5) == 1  # waits its bound, then says so
            assert time.monotonic() - started >= 0.5
        finally:
            held.close()
        started = time.monotonic()
        assert host.wait_closed(timeout=5) == 0  # closed: the wait ends at once
        assert time.monotonic() - started < 2


def test_the_cache_logs_misses_not_hits_and_the_balancer_every_request(deployed):
    _driver, sig, deployment = deployed
    owner = deployment.resources["owner"]
    prefix = config.state_dir() / "local" / owner / sig.vcdn_id / "north-cache-1"
    balancer = prefix.parent / "north-lb"
    # reopen: nginx writes out its log buffer first
    for vnf, folder in (("north-cache-1", prefix), ("north-lb", balancer)):
        run(processes.nginx_command(folder, str(folder / "nginx.conf"), "-s", "reopen"),
            namespace=network.namespace_name(owner, sig.vcdn_id, vnf))
    processes.wait_until(lambda: _flushed(prefix), "the cache's access log")
    lines = (prefix / "logs" / "access.log").read_text().splitlines()
    assert any("/objects/chunk-low" in line and "cache=MISS" in line for line in lines)
    assert not any("cache=HIT" in line for line in lines)
    # the balancer's log is the usage log: every request, HITs too (cdnaas.ro.traffic)
    processes.wait_until(lambda: _records(balancer), "the balancer's access log")
    assert "HIT" in {r.cache_status for r in _records(balancer) if r.uri == "/objects/chunk-low"}


def _records(folder):
    path = folder / "logs" / "access.log"
    return traffic.parse(path.read_bytes())[0] if path.exists() else []


def _flushed(prefix):
    path = prefix / "logs" / "access.log"
    return path.exists() and "cache=MISS" in path.read_text()


def test_nginx_runs_with_the_limits_its_config_asks(deployed):
    _driver, sig, deployment = deployed
    owner = deployment.resources["owner"]
    root = config.state_dir() / "local" / owner / sig.vcdn_id
    for vnf in ("north-cache-1", "north-lb"):
        wanted = sizing.host_limits((root / vnf / "nginx.conf").read_text())
        group = f"{owner}_{sig.vcdn_id}_{vnf}"
        pids = cgroups.pids(group)
        assert pids
        for pid in pids:  # master and workers
            soft, hard = next(line for line in Path(f"/proc/{pid}/limits").read_text()
                              .splitlines() if line.startswith("Max open files")).split()[3:5]
            assert int(soft) == min(wanted["nofile"], processes.open_file_limit())
            # a reload planned for more connections may raise it up to this host's most
            assert int(hard) == processes.open_file_limit()
        namespace = network.namespace_name(owner, sig.vcdn_id, vnf)
        somaxconn = run(["sysctl", "-n", "net.core.somaxconn"], namespace=namespace)
        assert int(somaxconn) >= wanted["somaxconn"]


def test_the_benchmark_sees_the_tcp_memory_a_run_holds():
    """benchmarks/dataplane.py tells a run at the kernel's TCP memory limit from the rest by
    the most TCP memory the kernel held while it ran: 8 MB queued and not read show."""
    import socket
    import time

    from benchmarks import dataplane
    assert dataplane.kernel_tcp_limit_mb() > 0
    with socket.create_server(("127.0.0.1", 0)) as server:
        sender = socket.create_connection(server.getsockname())
        receiver, _peer = server.accept()
        with sender, receiver:
            sender.setsockopt(socket.SOL_SOCKET, 32, 16 << 20)  # SO_SNDBUFFORCE (root)
            sender.setblocking(False)
            before = dataplane.kernel_tcp()[1]
            with dataplane.tcp_memory_peak(interval=0.05) as peak:
                queued = 0
                while queued < 8 << 20:
                    try:
                        queued += sender.send(b"x" * 65536)
                    except BlockingIOError:
                        break
                time.sleep(0.3)
                assert queued >= 4 << 20
                receiver.recv(1)
    assert peak["mb"] >= before + 4
