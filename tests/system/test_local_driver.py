"""The local driver with real processes and real queries: nginx caches and balancers,
dnsmasq geo-DNS, clients in network namespaces of each region (root only).

Its tests that start no process are in tests/unit/test_local_driver_units.py (the unit
tier)."""
import concurrent.futures
import ipaddress
import os
import threading
import time
import uuid

import pytest
import requests

from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.common import config
from cdnaas.ro.vim.base import LoadTest, VimError
from cdnaas.ro.vim.local import cgroups, clients, network, processes
from cdnaas.ro.vim.local.driver import LocalDriver
from cdnaas.ro.vim.local.system import run
from cdnaas.vnf import endpoints
from tests.support.sigs import sample_sig

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory):
    """A state dir of this module's own: its VNFs carry an owner no other test shares."""
    path = tmp_path_factory.mktemp("local-state")
    previous = os.environ.get("CDNAAS_STATE_DIR")
    os.environ["CDNAAS_STATE_DIR"] = str(path)
    yield path
    if previous is None:
        os.environ.pop("CDNAAS_STATE_DIR", None)
    else:
        os.environ["CDNAAS_STATE_DIR"] = previous


def running(pid):
    """Whether ``pid`` runs; a zombie (not reaped by this container's init) does not."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def make_sig(origin, caches, vcdn_id=None):
    document = sample_sig(vcdn_id or f"local-{uuid.uuid4().hex[:8]}", caches)
    document["origin"] = {"scheme": "http", "host": "127.0.0.1",
                          "port": origin.server_address[1]}
    return ServiceInstanceGraph.from_dict(document)


@pytest.fixture(scope="module")
def live(origin, state_dir):
    """One 2-region deployment (2 caches each) shared by the read-only tests."""
    driver = LocalDriver()
    sig = make_sig(origin, {"north": 2, "south": 2})
    deployment = driver.deploy(sig)
    yield driver, sig, deployment
    driver.terminate(deployment)


def dns_of(deployment, index):
    return deployment.entry_point.dns_servers[index]


def test_each_region_resolves_to_its_own_balancer_and_unknown_clients_to_the_default(live):
    _driver, sig, deployment = live
    with clients.client(sig.vcdn_id, "north", "10.1.0.20") as north, \
            clients.client(sig.vcdn_id, "south", "10.2.0.20") as south, \
            clients.client(sig.vcdn_id, "north", "10.99.0.20") as stranger:
        assert north.resolve(dns_of(deployment, 0), sig.hostname) == \
            [deployment.region_endpoints["north"]]
        assert south.resolve(dns_of(deployment, 1), sig.hostname) == \
            [deployment.region_endpoints["south"]]
        # the default region (north) answers clients of no registered prefix
        assert stranger.resolve(dns_of(deployment, 0), sig.hostname) == \
            [deployment.region_endpoints["north"]]
        assert north.resolve(dns_of(deployment, 0), "other.example.net") == []


def test_fetch_returns_the_origins_bytes_then_hits(live, origin):
    _driver, sig, deployment = live
    path = "/objects/chunk-hd"
    expected = requests.get(f"http://127.0.0.1:{origin.server_address[1]}{path}", timeout=5).content
    with clients.client(sig.vcdn_id, "south", "10.2.0.21") as viewer:
        lb = viewer.resolve(dns_of(deployment, 1), sig.hostname)[0]
        first = viewer.fetch(f"http://{sig.hostname}{path}?v=1", resolve=(sig.hostname, lb))
        second = viewer.fetch(f"http://{sig.hostname}{path}?v=1", resolve=(sig.hostname, lb))
    assert first[0] == second[0] == 200
    assert first[2] == second[2] == expected
    assert (first[1]["x-cache-status"], second[1]["x-cache-status"]) == ("MISS", "HIT")


def test_requests_spread_over_the_regions_caches(live):
    _driver, sig, deployment = live
    lb = deployment.region_endpoints["north"]
    with clients.client(sig.vcdn_id, "north", "10.1.0.22") as viewer:
        served_by = {viewer.fetch(f"http://{sig.hostname}/objects/small?spread={i}",
                                  resolve=(sig.hostname, lb))[1]["x-served-by"] for i in range(24)}
    assert served_by == {"north-cache-1", "north-cache-2"}


def test_200_concurrent_first_fetches_make_one_origin_fetch(live, origin):
    _driver, sig, deployment = live
    path = f"/video/hd/seg-{uuid.uuid4().int % 300 + 1}.m4s"
    origin.reset()
    url = f"http://{sig.hostname}{path}"
    command = ["curl", "-s", "-w", "%{http_code}\\n", "--parallel",
               "--parallel-immediate", "--parallel-max", "200", "--max-time", "20",
               "--resolve", f"{sig.hostname}:80:{deployment.region_endpoints['south']}"]
    with clients.client(sig.vcdn_id, "south", "10.2.0.23") as viewer:
        codes = viewer.run(command + ["-o", "/dev/null", url] * 200, timeout=40).split()
    assert codes == ["200"] * 200
    assert origin.stats().get(path) == 1


def test_health_reports_each_vnf(live):
    driver, _sig, deployment = live
    checks = driver.health(deployment)
    assert len(checks) == len(deployment.vnfs) and all(c.healthy for c in checks)


def test_status_pages_answer_ro_and_never_viewers(live):
    """A viewer gets 404 for the status page through its balancer and 403 on the
    balancer's management listener; caches, which viewers cannot reach at all, answer
    their balancer 404 on their public port and 403 on their management one. RO, in the
    root namespace (the bridge gateway), still reads every nginx's figures."""
    driver, sig, deployment = live
    lb = deployment.region_endpoints["north"]
    north = [v for v in deployment.vnfs if v.region == "north" and v.role != "dns"]
    lb_vnf = next(v for v in north if v.role == "load_balancer")
    caches = [v.address for v in north if v.role == "cache"]
    management = endpoints.MANAGEMENT_PORT
    before = {m.name: m for m in driver.metrics(deployment)}
    with clients.client(sig.vcdn_id, "north", "10.1.0.26") as viewer:
        for path in ["/nginx_status", "/nginx_status?full", "//nginx_status"]:
            status, headers, body = viewer.fetch(f"http://{sig.hostname}{path}",
                                                 resolve=(sig.hostname, lb))
            assert status == 404 and "x-lb" not in headers and b"Active" not in body, path
        assert viewer.fetch(f"http://{lb}:{management}/nginx_status")[0] == 403
        # caches have no route back to viewers: no answer at all (000), asked in parallel
        urls = [f"http://{a}{port}/nginx_status" for a in caches for port in ("", f":{management}")]
        codes = viewer.run(["curl", "-s", "--parallel", "--max-time", "1", "-w", "%{http_code}\\n"]
                           + [arg for url in urls for arg in ("-o", "/dev/null", url)], check=False)
        assert codes.split() == ["000"] * len(urls)
        for i in range(5):
            assert viewer.fetch(f"http://{sig.hostname}/objects/small?status={i}",
                                resolve=(sig.hostname, lb))[0] == 200

    def from_balancer(url):
        return run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5",
                    url], namespace=lb_vnf.resource_id, check=False)
    for address in caches:
        assert from_balancer(f"http://{address}/nginx_status") == "404"
        assert from_balancer(f"http://{address}:{management}/nginx_status") == "403"
    after = {m.name: m for m in driver.metrics(deployment)}
    for vnf in north:
        assert after[vnf.name].active_connections is not None, vnf.name
        assert after[vnf.name].requests > before[vnf.name].requests, vnf.name
    # the balancer counted the viewer's 3 + 5 requests, and the RO's reading
    assert after[lb_vnf.name].requests - before[lb_vnf.name].requests >= 9


def test_every_process_of_a_vnf_runs_in_its_cpu_group_with_its_vcpus(live):
    """nginx and dnsmasq join their group once they answer: the master, its workers,
    cache manager and loader, and nothing of the VNF is left outside."""
    _driver, sig, deployment = live
    version, base = cgroups._hierarchy()
    for vnf in deployment.vnfs:
        group = f"{network.owner()}_{sig.vcdn_id}_{vnf.name}"
        in_namespace = {int(p) for p in run(["ip", "netns", "pids", vnf.resource_id]).split()}
        expected = 2 + vnf.vcpus + 1 if vnf.role == "cache" else 2 if vnf.role == "dns" else 1 + vnf.vcpus
        assert len(in_namespace) >= expected, vnf.name
        assert in_namespace <= set(cgroups.pids(group)), vnf.name
        quota = ((base / group / "cpu.max").read_text().split()[0] if version == "v2"
                 else (base / group / "cpu.cfs_quota_us").read_text().strip())
        assert int(quota) == vnf.vcpus * cgroups.PERIOD_US


def test_a_killed_cache_is_routed_around_and_reported(origin, state_dir):
    driver = LocalDriver()
    sig = make_sig(origin, {"north": 2, "south": 1})
    deployment = driver.deploy(sig)
    try:
        victim = next(v for v in deployment.vnfs if v.name == "north-cache-1")
        cgroups.remove(f"{network.owner()}_{sig.vcdn_id}_{victim.name}")  # its nginx dies
        with clients.client(sig.vcdn_id, "north", "10.1.0.24") as viewer:
            answers = [viewer.fetch(f"http://{sig.hostname}/objects/small?k={i}",
                                    resolve=(sig.hostname, deployment.region_endpoints["north"]))
                       for i in range(20)]
        assert [a[0] for a in answers] == [200] * 20
        assert {a[1]["x-served-by"] for a in answers} == {"north-cache-2"}
        health = {c.name: c.healthy for c in driver.health(deployment)}
        assert health["north-cache-1"] is False and health["north-cache-2"] is True
    finally:
        driver.terminate(deployment)


def test_two_dns_vnfs_each_answer_every_region_and_one_stands_when_the_other_dies(
        origin, state_dir):
    """A flavor of two DNS instances: each DNS VNF has its own address in every region
    (``.3``, ``.5``), all in the entry point; each answers each region's clients with
    their balancer; with the first one's dnsmasq dead, the second still does."""
    driver = LocalDriver()
    document = make_sig(origin, {"north": 1, "south": 1}).to_dict()
    document["vnfs"].append({**next(v for v in document["vnfs"] if v["role"] == "dns"),
                             "name": "dns-2"})
    sig = ServiceInstanceGraph.from_dict(document)
    deployment = driver.deploy(sig)
    try:
        subnets = [ipaddress.ip_network(deployment.resources["layout"][r]["subnet"])
                   for r in ("north", "south")]
        assert deployment.entry_point.dns_servers == [
            str(subnet.network_address + host) for host in (3, 5) for subnet in subnets]
        with clients.client(sig.vcdn_id, "north", "10.1.0.21") as north, \
                clients.client(sig.vcdn_id, "south", "10.2.0.21") as south:
            for region, viewer, leg in (("north", north, 0), ("south", south, 1)):
                for dns in ("dns-1", "dns-2"):
                    server = deployment.entry_point.dns_servers[
                        leg + (2 if dns == "dns-2" else 0)]
                    assert viewer.resolve(server, sig.hostname) == \
                        [deployment.region_endpoints[region]], (dns, region)
            cgroups.remove(f"{network.owner()}_{sig.vcdn_id}_dns-1")  # its dnsmasq dies
            assert north.resolve(deployment.entry_point.dns_servers[0], sig.hostname) == []
            assert north.resolve(deployment.entry_point.dns_servers[2], sig.hostname) == \
                [deployment.region_endpoints["north"]]
        health = {c.name: c.healthy for c in driver.health(deployment)}
        assert (health["dns-1"], health["dns-2"]) == (False, True)
    finally:
        driver.terminate(deployment)
    assert sig.vcdn_id not in driver.cleanup(set())


def test_scale_out_and_in_keeps_serving_without_a_failed_request(origin, state_dir, monkeypatch):
    monkeypatch.setenv("CDNAAS_LOCAL_DRAIN_SECONDS", "5")
    driver = LocalDriver()
    sig = make_sig(origin, {"north": 2, "south": 1})
    deployment = driver.deploy(sig)
    failures, codes, stop = [], [], threading.Event()

    def viewer_loop(viewer):
        deadline = time.monotonic() + 60  # bounded in time and count
        for i in range(2000):
            if stop.is_set() or time.monotonic() > deadline:
                return
            status, _h, _b = viewer.fetch(f"http://{sig.hostname}/objects/chunk-low?n={i % 50}",
                                          resolve=(sig.hostname, deployment.region_endpoints["north"]))
            (codes if status == 200 else failures).append(status)
    try:
        with clients.client(sig.vcdn_id, "north", "10.1.0.25") as viewer:
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                running = [pool.submit(viewer_loop, viewer) for _ in range(2)]
                time.sleep(0.5)
                grown = driver.update(deployment, make_sig(origin, {"north": 4, "south": 1},
                                                           sig.vcdn_id))
                assert sorted(v.name for v in grown.vnfs if v.region == "north" and v.role == "cache") \
                    == ["north-cache-1", "north-cache-2", "north-cache-3", "north-cache-4"]
                time.sleep(0.5)
                shrunk = driver.update(grown, make_sig(origin, {"north": 1, "south": 1}, sig.vcdn_id))
                time.sleep(0.5)
                stop.set()
                for future in running:
                    future.result()
        assert not failures, f"{len(failures)} failed requests during scaling: {failures[:5]}"
        assert len(codes) > 20
        names = [v.name for v in shrunk.vnfs if v.role == "cache" and v.region == "north"]
        assert names == ["north-cache-1"]
        alive = {n for n in network.list_namespaces() if sig.vcdn_id in n}
        assert not any(f"north-cache-{k}" in n for n in alive for k in (2, 3, 4))
        deployment = shrunk
    finally:
        stop.set()
        driver.terminate(deployment)


def test_terminate_leaves_nothing(origin, state_dir):
    driver = LocalDriver()
    sig = make_sig(origin, {"north": 1, "south": 1})
    deployment = driver.deploy(sig)
    groups = [g for g in cgroups.names() if sig.vcdn_id in g]
    pids = [pid for g in groups for pid in cgroups.pids(g)]
    assert groups and pids
    driver.terminate(deployment)
    assert not [n for n in network.list_namespaces() if sig.vcdn_id in n]
    assert not [b for b in network.list_bridges() if b[2] == sig.vcdn_id]
    assert not [g for g in cgroups.names() if sig.vcdn_id in g]
    assert not [p for p in pids if running(p)]
    assert not (state_dir / "local" / network.owner() / sig.vcdn_id).exists()


def test_a_crashed_ros_strays_are_found_and_removed(origin, state_dir):
    sig = make_sig(origin, {"north": 1, "south": 1})
    LocalDriver().deploy(sig)  # then the RO "crashes": its record is lost
    removed = LocalDriver().cleanup(known_ids=set())
    assert sig.vcdn_id in removed
    assert not [n for n in network.list_namespaces() if sig.vcdn_id in n]


def test_an_origin_that_comes_up_while_the_vcdn_is_verified_is_waited_for(
        state_dir, monkeypatch):
    """The deploy's check fetches through each region again until its deadline: an origin
    that answers only two seconds in (the caches' first fetches get 502) is waited for."""
    import socket
    from cdnaas.origin.server import serve_in_thread
    monkeypatch.setenv("CDNAAS_ORIGIN_ALLOW", "127.0.0.1")
    with socket.socket() as spare:  # a free port, for an origin that is not up yet
        spare.bind(("0.0.0.0", 0))
        port = spare.getsockname()[1]
    started = []
    timer = threading.Timer(2.0, lambda: started.append(serve_in_thread("0.0.0.0", port)[0]))
    document = sample_sig(f"local-{uuid.uuid4().hex[:8]}", {"north": 1})
    document["origin"] = {"scheme": "http", "host": "127.0.0.1", "port": port}
    driver = LocalDriver()
    begun = time.monotonic()
    timer.start()
    try:
        deployment = driver.deploy(ServiceInstanceGraph.from_dict(document))
        assert started and time.monotonic() - begun >= 2.0
        driver.terminate(deployment)
    finally:
        timer.cancel()
        for server in started:
            server.shutdown()
            server.server_close()


def test_an_origin_off_this_machine_is_refused_and_nothing_is_left(state_dir):
    document = sample_sig(f"local-{uuid.uuid4().hex[:8]}", {"north": 1})
    document["origin"] = {"scheme": "http", "host": "192.0.2.10", "port": 80}  # TEST-NET-1
    sig = ServiceInstanceGraph.from_dict(document)
    with pytest.raises(Exception, match="not on this machine"):
        LocalDriver().deploy(sig)
    assert not [n for n in network.list_namespaces() if sig.vcdn_id in n]
    assert not [b for b in network.list_bridges() if b[2] == sig.vcdn_id]


def test_nginx_refuses_a_config_it_rejects_with_its_own_words(tmp_path):
    """Caches start without a separate ``nginx -t``: nginx checks its config as it
    starts, so a bad one still runs nothing and says why."""
    namespace = f"cdnt_{uuid.uuid4().hex[:8]}"
    (tmp_path / "logs").mkdir()
    conf = tmp_path / "nginx.conf"
    conf.write_text("pid nginx.pid;\nevents {}\n"
                    "http { server { listen 127.0.0.1:8080; no_such_directive on; } }\n")
    run(["ip", "netns", "add", namespace])
    try:
        with pytest.raises(VimError, match="unknown directive \"no_such_directive\""):
            processes.start_daemon(namespace, processes.nginx_command(str(tmp_path), str(conf)))
        assert run(["ip", "netns", "pids", namespace]).split() == []
        assert not (tmp_path / "nginx.pid").exists()
    finally:
        network.delete_namespace(namespace)


def test_a_stray_bridge_of_another_ro_with_the_same_deployment_id_is_not_taken(origin, state_dir):
    """Another RO on this machine (or one that has gone) left a bridge named after the same
    deployment id and region: RO's load generator still stands on its own bridge (it stood
    on the stray's subnet and could not reach its VNF: "Network is unreachable"), and a
    look-up that names no RO says that the id is ambiguous."""
    sig = make_sig(origin, {"north": 1})
    stray = network.bridge_name("0ther0", sig.vcdn_id, "north")
    network.create_bridges([(stray, network.bridge_alias("0ther0", sig.vcdn_id, "north"))],
                           config.local_pool())
    driver = LocalDriver()
    try:
        deployment = driver.deploy(sig)
        try:
            report = driver.load_test(deployment, "north-cache-1",
                                      LoadTest("http", "/objects/chunk-low", 1, 1))
            assert report.requests > 0 and report.errors == 0
            with pytest.raises(VimError, match="has a bridge of each of the ROs"):
                network.find_bridge(sig.vcdn_id, "north")
        finally:
            driver.terminate(deployment)
    finally:
        network.delete_bridges([stray])
