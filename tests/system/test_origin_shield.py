"""The origin shield, a fourth VNF role a flavor may add: its template rules, its place in
the plan, its config, and on the local driver a real shield between two regions' caches
and the origin (one origin fetch for the whole vCDN, purged first, gone with the vCDN),
which follows the vCDN's regions as they come and go, moves with its region, and is put
back where it was when an update fails.

Its tests that start no process are in tests/unit/test_origin_shield_units.py (the unit
tier)."""
import contextlib
import copy
import ipaddress
import os
import threading
import time
import uuid

import pytest

from cdnaas.common import config
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro.vim.base import DeploymentFailed
from cdnaas.ro.vim.local import clients, network, processes
from cdnaas.ro.vim.local.driver import LocalDriver
from tests.support.faults import local_host_fails
from tests.system.test_local_driver import make_sig
from tests.system.test_local_driver import (  # noqa: F401 (the fixture: a module's own state)
    state_dir)


# --- template and plan ----------------------------------------------------------------------


def with_shield(document, region=None):
    document = copy.deepcopy(document)
    region = region or document["default_region"]
    document["vnfs"].append({"name": "shield-0", "role": "shield", "region": region,
                             "host": f"{region}-host-2", "vcpus": 1, "ram_mb": 256,
                             "image": "cdnaas-vnf"})
    return ServiceInstanceGraph.from_dict(document)


# --- a real shield on the local driver --------------------------------------------------------

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")
REGIONS = ("north", "south", "west")  # clients in 10.1, 10.2 and 10.3.0.0/16


def shielded_sig(origin, caches, vcdn_id):
    """A SIG of ``vcdn_id`` with ``caches`` ({region of :data:`REGIONS`: count}) and an
    origin shield: its first region is the default one, holding the DNS and the shield,
    and each region keeps its client prefix whichever others it is with."""
    document = make_sig(origin, {r: caches.get(r, 1) for r in REGIONS}, vcdn_id).to_dict()
    regions = {r["name"]: r for r in document["regions"]}
    document["regions"] = [regions[name] for name in caches]
    document["default_region"] = first = document["regions"][0]["name"]
    document["vnfs"] = [v for v in document["vnfs"] if v["region"] in caches or v["role"] == "dns"]
    for vnf in document["vnfs"]:
        if vnf["role"] == "dns":
            vnf.update(region=first, host=f"{first}-host-1")
    return with_shield(document)


def fetch_through(deployment, sig, region, probe, path):
    """``(status, X-Cache-Status, X-Shield-Cache-Status, X-Shield-Served-By)`` of ``path``
    fetched by a viewer of ``region`` at ``probe`` through what the vCDN's DNS answers it
    (its region's balancer)."""
    index = [r.name for r in sig.regions].index(region)
    with clients.client(sig.vcdn_id, region, probe) as viewer:
        answer = viewer.resolve(deployment.entry_point.dns_servers[index], sig.hostname)
        assert answer == [deployment.region_endpoints[region]], answer
        status, headers, _body = viewer.fetch(f"http://{sig.hostname}{path}",
                                              resolve=(sig.hostname, answer[0]))
    return (status, headers.get("x-cache-status"), headers.get("x-shield-cache-status"),
            headers.get("x-shield-served-by"))


def shield_legs(deployment):
    """The addresses of the shield's legs, read in its namespace."""
    return set(network.links_of(network.namespace_name(
        deployment.resources["owner"], deployment.deployment_id, "shield-0")))


def legs_in(deployment, regions):
    """The shield's address (.4) on each of ``regions``' bridges of ``deployment``."""
    layout = deployment.resources["layout"]
    return {str(ipaddress.ip_network(layout[r]["subnet"]).network_address + 4) for r in regions}


def bridges_of(vcdn_id):
    return {region for _name, _owner, dep, region in network.list_bridges() if dep == vcdn_id}


def vnfs_of(vcdn_id):
    return {parsed[2] for parsed in map(network.parse_namespace, network.list_namespaces())
            if parsed and parsed[1] == vcdn_id}


def shield_master(deployment):
    """The process id of the shield's nginx master (a reload keeps it, a restart does not)."""
    return processes.pid_in(config.state_dir() / "local" / deployment.resources["owner"]
                            / deployment.deployment_id / "shield-0" / "nginx.pid")


@contextlib.contextmanager
def fetching(deployment, sig, region, probe):
    """A viewer of ``region`` fetching objects no cache holds yet through its balancer, back
    to back while the block runs; yields its ``[(time.monotonic(), status)]`` (0: no
    answer), which grows meanwhile."""
    answers, stop = [], threading.Event()
    lb = deployment.region_endpoints[region]

    def loop():
        with clients.client(sig.vcdn_id, region, probe) as viewer:
            while not stop.is_set():
                status, _headers, _body = viewer.fetch(
                    f"http://{sig.hostname}/objects/small?during={uuid.uuid4().hex}",
                    resolve=(sig.hostname, lb), timeout=2)
                answers.append((time.monotonic(), status))
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield answers
    finally:
        stop.set()
        thread.join(30)


@needs_root
@pytest.mark.usefixtures("state_dir")
def test_two_regions_caches_fetch_through_one_shield(origin, monkeypatch):
    driver = LocalDriver()
    sig = shielded_sig(origin, {"north": 2, "south": 1}, f"shield-{uuid.uuid4().hex[:8]}")
    deployment = driver.deploy(sig)
    try:
        [shield] = [v for v in deployment.vnfs if v.role == "shield"]
        assert shield.region == "north" and shield.address.endswith(".4")
        path = f"/video/hd/seg-{uuid.uuid4().int % 300 + 1}.m4s"
        origin.reset()
        answers = []
        for region, probe in (("north", "10.1.0.31"), ("south", "10.2.0.31"),
                              ("north", "10.1.0.32")):
            lb = deployment.region_endpoints[region]
            with clients.client(sig.vcdn_id, region, probe) as viewer:
                status, headers, _body = viewer.fetch(f"http://{sig.hostname}{path}",
                                                      resolve=(sig.hostname, lb))
            answers.append((region, status, headers.get("x-cache-status"),
                            headers.get("x-shield-cache-status"),
                            headers.get("x-shield-served-by")))
        # the first cache fetched through the shield, the other region's from the shield's
        # copy: the origin served the vCDN once
        assert answers[0] == ("north", 200, "MISS", "MISS", "shield-0")
        assert answers[1] == ("south", 200, "MISS", "HIT", "shield-0")
        # north's balancer hashes by the key: the same cache answers again, from its copy
        assert answers[2][:3] == ("north", 200, "HIT"), answers[2]
        assert origin.stats().get(path) == 1

        # a purge empties the shield too (first): the next fetch goes to the origin again
        results = driver.invalidate(deployment, [path], [])
        assert [r.name for r in results][0] == "shield-0" and all(r.ok for r in results)
        with clients.client(sig.vcdn_id, "south", "10.2.0.33") as viewer:
            _status, headers, _body = viewer.fetch(
                f"http://{sig.hostname}{path}",
                resolve=(sig.hostname, deployment.region_endpoints["south"]))
        assert (headers["x-cache-status"], headers["x-shield-cache-status"]) == ("MISS", "MISS")
        assert origin.stats().get(path) == 2

        health = {h.name: h.healthy for h in driver.health(deployment)}
        assert health["shield-0"] is True

        # west comes and south goes: the shield gets a leg on west's bridge before west's
        # caches boot, and keeps serving its leg on south's while south's viewers, caches
        # and balancer drain, until south is gone
        monkeypatch.setenv("CDNAAS_LOCAL_DRAIN_SECONDS", "2")
        west = shielded_sig(origin, {"north": 2, "west": 1}, sig.vcdn_id)
        steps = []
        with fetching(deployment, sig, "south", "10.2.0.34") as during:
            grown = driver.update(deployment, west, previous=sig,
                                  progress=lambda *step: steps.append((time.monotonic(), step)))
        reshaped = next(at for at, step in steps if step == ("reshape origin shield", 1, 1))
        assert {status for _at, status in during} <= {0, 200}, during  # never a 502
        assert [at for at, status in during if status == 200 and at > reshaped], during
        path = f"/video/hd/seg-{uuid.uuid4().int % 300 + 1}.m4s"
        assert fetch_through(grown, west, "west", "10.3.0.31", path) == \
            (200, "MISS", "MISS", "shield-0")
        assert fetch_through(grown, west, "north", "10.1.0.33", path) == \
            (200, "MISS", "HIT", "shield-0")
        assert origin.stats().get(path) == 1
        assert shield_legs(grown) == legs_in(grown, ["north", "west"])
        assert [v.address for v in grown.vnfs if v.role == "shield"] == [shield.address]
        assert bridges_of(sig.vcdn_id) == {"north", "west"}
        assert not [name for name in vnfs_of(sig.vcdn_id) if name.startswith("south-")]
        assert all(h.healthy for h in driver.health(grown))
    finally:
        driver.terminate(deployment)
    assert not [n for n in network.list_namespaces() if sig.vcdn_id in n]


@needs_root
@pytest.mark.usefixtures("state_dir")
def test_a_shield_moves_with_its_region_and_a_failed_move_is_put_back(origin, monkeypatch):
    """Its region removed, the shield moves in place to the new default region: an update
    that fails on the way (a new region's cache does not start) puts it back on its old
    legs, managed where it was, the same nginx with what it cached; the same update then
    succeeds and RO manages and purges it at its leg in its new region."""
    driver = LocalDriver()
    sig = shielded_sig(origin, {"north": 1, "south": 1}, f"moving-{uuid.uuid4().hex[:8]}")
    moved = shielded_sig(origin, {"south": 1, "west": 1}, sig.vcdn_id)
    assert [v.region for v in moved.vnfs_in(role="shield")] == ["south"]
    deployment = driver.deploy(sig)
    try:
        path = f"/video/hd/seg-{uuid.uuid4().int % 300 + 1}.m4s"
        origin.reset()
        assert fetch_through(deployment, sig, "north", "10.1.0.31", path) == \
            (200, "MISS", "MISS", "shield-0")
        master = shield_master(deployment)

        # west's cache fails (its host maps to a CPU this machine lacks)
        monkeypatch.setenv("CDNAAS_LOCAL_HOST_CPUS", local_host_fails("west-host-1"))
        with pytest.raises(DeploymentFailed, match="previous deployment still serves"):
            driver.update(deployment, moved, previous=sig)
        monkeypatch.delenv("CDNAAS_LOCAL_HOST_CPUS")
        assert shield_legs(deployment) == legs_in(deployment, ["north", "south"])
        assert shield_master(deployment) == master
        assert bridges_of(sig.vcdn_id) == {"north", "south"}
        assert all(h.healthy for h in driver.health(deployment))  # the shield at north's leg
        assert fetch_through(deployment, sig, "south", "10.2.0.31", path) == \
            (200, "MISS", "HIT", "shield-0")
        assert fetch_through(deployment, sig, "north", "10.1.0.32", "/objects/small") == \
            (200, "MISS", "MISS", "shield-0")

        settled = driver.update(deployment, moved, previous=sig)
        [shield] = [v for v in settled.vnfs if v.role == "shield"]
        assert (shield.region, {shield.address}) == ("south", legs_in(settled, ["south"]))
        assert shield_legs(settled) == legs_in(settled, ["south", "west"])
        assert shield_master(settled) == master
        assert bridges_of(sig.vcdn_id) == {"south", "west"}
        assert all(h.healthy for h in driver.health(settled))
        assert fetch_through(settled, moved, "west", "10.3.0.31", path) == \
            (200, "MISS", "HIT", "shield-0")
        assert origin.stats().get(path) == 1
        results = driver.invalidate(settled, [path], [])
        assert [r.name for r in results][0] == "shield-0" and all(r.ok for r in results)
        assert fetch_through(settled, moved, "south", "10.2.0.32", path) == \
            (200, "MISS", "MISS", "shield-0")  # from the origin, through south's bridge
        assert origin.stats().get(path) == 2
    finally:
        driver.terminate(deployment)
    assert not [n for n in network.list_namespaces() if sig.vcdn_id in n]
