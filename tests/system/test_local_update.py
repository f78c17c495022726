"""Updates of a live vCDN on the local driver beyond caches: a new origin reaches every
cache (rolling reload, what they cached kept), a region added serves its clients, a
removed region leaves nothing and its clients get no answer, the DNS moves out of a
removed default region while clients keep resolving, and a failed region change puts
everything back. Real nginx, dnsmasq and clients in network namespaces (root only)."""
import copy
import os
import threading
import time
import uuid

import pytest

from cdnaas.common import config
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.origin.server import serve_in_thread
from cdnaas.ro.vim.base import DeploymentFailed
from cdnaas.ro.vim.local import clients, network, processes
from cdnaas.ro.vim.local.driver import LocalDriver
from tests.support.api import vcdn_body
from tests.support.faults import local_host_fails
from tests.support.sigs import sample_sig
from tests.system.test_local_driver import state_dir  # noqa: F401 (this module's own VNF owner)
from tests.system.test_local_stack import leftovers, stack  # noqa: F401 (a stack on the local driver)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")

CLIENT = {"north": "10.1.0.20", "south": "10.2.0.20"}


@pytest.fixture(scope="module")
def second_origin():
    """Another origin on this machine (the first is conftest's ``origin``)."""
    server, _thread = serve_in_thread("0.0.0.0", 0)
    yield server
    server.shutdown()
    server.server_close()


def document(origin, caches, vcdn_id):
    """A SIG document of ``caches`` ({region: count}; the DNS in the first region) whose
    regions keep their client prefixes whichever of north and south it holds."""
    both = sample_sig(vcdn_id, {"north": caches.get("north", 1), "south": caches.get("south", 1)})
    kept = [r for r in ("north", "south") if r in caches]
    both["regions"] = [r for r in both["regions"] if r["name"] in kept]
    both["vnfs"] = [v for v in both["vnfs"] if v["region"] in kept or v["role"] == "dns"]
    for vnf in both["vnfs"]:
        if vnf["role"] == "dns":
            vnf.update(region=kept[0], host=f"{kept[0]}-host-1")
    both["default_region"] = kept[0]
    both["origin"] = {"scheme": "http", "host": "127.0.0.1", "port": origin.server_address[1]}
    return both


def sig_of(doc):
    return ServiceInstanceGraph.from_dict(copy.deepcopy(doc))


def fetch(deployment, sig, region, path):
    """``(status, X-Cache-Status)`` of ``path`` fetched by a client of ``region`` through
    what the vCDN's DNS answers it."""
    status, headers = fetch_headers(deployment, sig, region, path)
    return status, headers.get("x-cache-status")


def fetch_headers(deployment, sig, region, path):
    """``(status, headers)`` of ``path`` fetched as :func:`fetch` does."""
    index = [r.name for r in sig.regions].index(region)
    with clients.client(sig.vcdn_id, region, CLIENT[region]) as viewer:
        answer = viewer.resolve(deployment.entry_point.dns_servers[index], sig.hostname)
        assert answer == [deployment.region_endpoints[region]], answer
        status, headers, _body = viewer.fetch(f"http://{sig.hostname}{path}",
                                              resolve=(sig.hostname, answer[0]))
        return status, headers


def owned(vcdn_id):
    """Namespaces and bridges of ``vcdn_id`` on this machine, by region or VNF."""
    return ({network.parse_namespace(n)[2] for n in network.list_namespaces()
             if network.parse_namespace(n) and network.parse_namespace(n)[1] == vcdn_id},
            {b[3] for b in network.list_bridges() if b[2] == vcdn_id})


def fetches(origin, path):
    return origin.stats().get(path, 0)


def test_a_new_origin_reaches_every_cache_which_keeps_what_it_cached(origin, second_origin,
                                                                     state_dir):  # noqa: F811
    driver = LocalDriver()
    vcdn_id = f"origin-{uuid.uuid4().hex[:6]}"
    first = document(origin, {"north": 2}, vcdn_id)
    deployment = driver.deploy(sig_of(first))
    try:
        sig = sig_of(first)
        assert fetch(deployment, sig, "north", "/objects/small") == (200, "MISS")
        masters = {v.name: master(vcdn_id, v.name) for v in deployment.vnfs if v.role == "cache"}
        moved = {**first, "origin": {**first["origin"], "port": second_origin.server_address[1]}}
        steps = []
        updated = driver.update(deployment, sig_of(moved), lambda *step: steps.append(step),
                                previous=sig)
        assert ("reconfigure caches", 2, 2) in steps
        new_sig = sig_of(moved)
        before = fetches(origin, "/objects/chunk-low")
        # the balancer spreads keys (the query string is part of them) over the caches:
        # distinct ones until every cache has answered (bounded), each a MISS
        caches = {v.name for v in updated.vnfs if v.role == "cache" and v.region == "north"}
        assert len(caches) == 2
        served, asked = set(), 0
        while served != caches and asked < 32:
            status, headers = fetch_headers(updated, new_sig, "north",
                                            f"/objects/chunk-low?spread={asked}")
            asked += 1
            assert (status, headers.get("x-cache-status")) == (200, "MISS"), (status, headers)
            served.add(headers.get("x-served-by"))
        assert served == caches, (served, asked)  # every cache was asked...
        # ...and each of its answers came from the new origin, none from the old one
        assert fetches(second_origin, "/objects/chunk-low") == asked
        assert fetches(origin, "/objects/chunk-low") == before
        for vnf in (v for v in updated.vnfs if v.role == "cache"):
            text = (vnf_dir(vcdn_id, vnf.name) / "nginx.conf").read_text()
            assert f":{second_origin.server_address[1]}" in text
            assert f":{origin.server_address[1]};" not in text
        # reloaded, not restarted: the same masters, and what they cached still HITs
        assert {v.name: master(vcdn_id, v.name)
                for v in updated.vnfs if v.role == "cache"} == masters
        small = fetches(second_origin, "/objects/small")
        assert fetch(updated, new_sig, "north", "/objects/small") == (200, "HIT")
        assert fetches(second_origin, "/objects/small") == small
    finally:
        driver.terminate(deployment)


def vnf_dir(vcdn_id, vnf_name):
    """Where a VNF of ``vcdn_id`` keeps its files (config, pid file, cache)."""
    return config.state_dir() / "local" / network.owner() / vcdn_id / vnf_name


def master(vcdn_id, vnf_name):
    """The process id of a VNF's nginx master."""
    return processes.pid_in(vnf_dir(vcdn_id, vnf_name) / "nginx.pid")


def test_regions_come_and_go_and_clients_keep_resolving(origin, state_dir):  # noqa: F811
    driver = LocalDriver()
    vcdn_id = f"regions-{uuid.uuid4().hex[:6]}"
    north = document(origin, {"north": 1}, vcdn_id)
    both = document(origin, {"north": 1, "south": 1}, vcdn_id)
    south = document(origin, {"south": 1}, vcdn_id)
    deployment = driver.deploy(sig_of(north))
    try:
        resolving = Resolving(vcdn_id, deployment.entry_point.dns_servers[0], sig_of(north),
                              deployment.region_endpoints["north"])
        with resolving:
            grown = driver.update(deployment, sig_of(both), previous=sig_of(north))
        assert resolving.answers and resolving.failures == [], resolving.failures
        assert grown.entry_point.dns_servers[0] == deployment.entry_point.dns_servers[0]
        assert fetch(grown, sig_of(both), "south", "/objects/small") == (200, "MISS")
        assert fetch(grown, sig_of(both), "north", "/objects/small")[0] == 200
        assert owned(vcdn_id)[1] == {"north", "south"}

        shrunk = driver.update(grown, sig_of(south), previous=sig_of(both))
        assert [v.region for v in shrunk.vnfs if v.role == "dns"] == ["south"]
        assert shrunk.entry_point.dns_servers == grown.entry_point.dns_servers[1:]
        assert fetch(shrunk, sig_of(south), "south", "/objects/small") == (200, "HIT")
        namespaces, bridges = owned(vcdn_id)
        assert bridges == {"south"} and not any(n.startswith("north-") for n in namespaces)
        assert shrunk.resources["layout"].keys() == {"south"}
        # the removed region's clients are gone with its bridge: nothing answers them
        with pytest.raises(Exception, match="no bridge"):
            with clients.client(vcdn_id, "north", CLIENT["north"]):
                pass
        assert driver.health(shrunk) and all(h.healthy for h in driver.health(shrunk))
    finally:
        driver.terminate(deployment)
    assert owned(vcdn_id) == (set(), set())


def test_a_failed_region_change_puts_everything_back(origin, state_dir,  # noqa: F811
                                                     monkeypatch):
    driver = LocalDriver()
    vcdn_id = f"undo-{uuid.uuid4().hex[:6]}"
    north = document(origin, {"north": 1}, vcdn_id)
    both = document(origin, {"north": 1, "south": 1}, vcdn_id)
    deployment = driver.deploy(sig_of(north))
    try:
        # its balancer fails (its host maps to a CPU this machine lacks)
        monkeypatch.setenv("CDNAAS_LOCAL_HOST_CPUS", local_host_fails("south-host-1"))
        with pytest.raises(DeploymentFailed, match="previous deployment still serves"):
            driver.update(deployment, sig_of(both), previous=sig_of(north))
        monkeypatch.delenv("CDNAAS_LOCAL_HOST_CPUS")
        namespaces, bridges = owned(vcdn_id)
        assert bridges == {"north"} and not any(n.startswith("south-") for n in namespaces)
        assert fetch(deployment, sig_of(north), "north", "/objects/small")[0] == 200
    finally:
        driver.terminate(deployment)


class Resolving:
    """A client of a region asking the vCDN's DNS its name back to back while it runs
    (each ``dig`` waits 1 s and tries twice, as a stub resolver retries)."""

    def __init__(self, vcdn_id, server, sig, expected, region="north", seconds=120):
        self.args = (vcdn_id, server, sig, expected, region)
        self.seconds = seconds
        self.answers, self.failures = 0, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        vcdn_id, server, sig, expected, region = self.args
        deadline = time.monotonic() + self.seconds
        with clients.client(vcdn_id, region, CLIENT[region]) as viewer:
            while not self.stop.is_set() and time.monotonic() < deadline:
                answer = viewer.resolve(server, sig.hostname)
                if answer == [expected]:
                    self.answers += 1
                else:
                    self.failures.append((time.monotonic(), answer))

    def __enter__(self):
        self.thread.start()
        time.sleep(0.3)
        return self

    def __exit__(self, *exc):
        time.sleep(0.3)
        self.stop.set()
        self.thread.join(30)


def test_a_patch_through_the_api_moves_the_origin_and_adds_a_region(stack, origin,  # noqa: F811
                                                                    second_origin):
    """The whole path: the customer API, SO (plan, reservations), RO (the previous SIG)
    and the local driver; a fetch after the PATCH reaches the new origin."""
    body = vcdn_body("moving", (("eu-west", 10),),
                     origin=f"http://127.0.0.1:{origin.server_address[1]}")
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
    assert stack.acme.wait(accepted["operation"]["id"], 120)["state"] == "COMPLETED"
    vcdn_id = accepted["vcdn"]["id"]
    new_origin = f"http://127.0.0.1:{second_origin.server_address[1]}"
    changed = stack.acme.ok("PATCH", f"/vcdns/{vcdn_id}", 202, json={
        "origin": new_origin,
        "regions": [{"name": "us-east", "demand": 10, "quality": {"min_mos": 4.0}}]})
    operation = stack.acme.wait(changed["operation"]["id"], 120)
    assert operation["state"] == "COMPLETED", operation
    vcdn = stack.acme.ok("GET", f"/vcdns/{vcdn_id}")
    entry, balancers = vcdn["entry_point"], {r["name"]: r["load_balancer"] for r in vcdn["regions"]}
    assert vcdn["origin"] == new_origin and len(entry["dns_servers"]) == 2
    with clients.client(vcdn_id, "us-east", "10.2.0.30") as viewer:
        answer = viewer.resolve(entry["dns_servers"][1], entry["hostname"])
        assert answer == [balancers["us-east"]]
        status, headers, _ = viewer.fetch(f"http://{entry['hostname']}/video/low/seg-7.m4s",
                                          resolve=(entry["hostname"], answer[0]))
    assert (status, headers["x-cache-status"]) == (200, "MISS")
    assert fetches(second_origin, "/video/low/seg-7.m4s") == 1
    assert fetches(origin, "/video/low/seg-7.m4s") == 0
    ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn_id}", 202)
    assert stack.acme.wait(ended["operation"]["id"], 120)["state"] == "COMPLETED"
    assert leftovers(vcdn_id) == []
