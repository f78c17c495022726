"""The Instance Manager heals every role on the local driver: a cache's, a balancer's and
the DNS VNF's master killed with SIGKILL (workers left serving alone, or nothing answering)
is reported unhealthy with what is wrong and healed within two IM periods, in place: it
serves again, its process tree whole, no orphan left (real nginx, dnsmasq and clients; root only)."""
import os
import signal
import time

import pytest
import requests

from cdnaas.ro.vim.local import cgroups, clients, processes
from tests.support.api import populate, vcdn_body
from tests.support.stack import running_stack
from tests.service.test_im_stack import decisions

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")

#: seconds between two IM passes; a heal must be done within two
PERIOD = 3.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vnf-healing")
    extra = {"CDNAAS_VIM_DRIVER": "local", "CDNAAS_IM_INTERVAL": str(PERIOD),
             "CDNAAS_LOCAL_DRAIN_SECONDS": "1"}
    with running_stack(None, tmp, extra_env=extra) as running:
        yield populate(running)


@pytest.fixture(scope="module")
def vcdn(stack, origin):
    body = vcdn_body("mended", (("eu-west", 100),),
                     origin=f"http://127.0.0.1:{origin.server_address[1]}")
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
    assert stack.acme.wait(accepted["operation"]["id"], timeout=60)["state"] == "COMPLETED"
    yield stack.acme.ok("GET", f"/vcdns/{accepted['vcdn']['id']}")
    ended = stack.acme.ok("DELETE", f"/vcdns/{accepted['vcdn']['id']}", 202)
    stack.acme.wait(ended["operation"]["id"], timeout=60)


def ro_health(stack, vcdn_id):
    """RO's health of the vCDN, or None while it changes (409)."""
    answer = requests.get(f"{stack.urls['ro']}/ro/v1/deployments/{vcdn_id}/health",
                          headers=stack.service_headers(), timeout=10)
    return answer.json() if answer.status_code == 200 else None


def vnf_named(stack, vcdn_id, role):
    return next(v["name"] for v in ro_health(stack, vcdn_id)["vnfs"] if v["role"] == role)


def folder(stack, vcdn_id, name):
    [found] = stack.state_dir.glob(f"local/*/{vcdn_id}/{name}")
    return found


def serves(vcdn):
    """A client of eu-west resolves the vCDN at its DNS VNF and fetches through it."""
    entry = vcdn["entry_point"]
    with clients.client(vcdn["id"], "eu-west", "10.1.0.70") as viewer:
        answer = viewer.resolve(entry["dns_servers"][0], entry["hostname"])
        return bool(answer) and viewer.fetch(f"http://{entry['hostname']}/objects/chunk-low",
                                             resolve=(entry["hostname"], answer[0]))[0] == 200


def kill_and_heal(stack, vcdn, name, pid_file):
    """SIGKILL the master ``pid_file`` names; return ``(the master and its workers, RO's
    health of the VNF as the IM recorded it, the heal decision, seconds to healed)``."""
    master = processes.pid_in(pid_file)
    tree = [master, *cgroups.children(master)]
    seen = {d["id"] for d in decisions(stack, vcdn["id"], "heal")}
    killed = time.monotonic()
    os.kill(master, signal.SIGKILL)
    deadline = killed + 4 * PERIOD + 10
    while True:
        heals = [d for d in decisions(stack, vcdn["id"], "heal")
                 if d["id"] not in seen and d["details"]["vnf"] == name]
        health = ro_health(stack, vcdn["id"]) if heals else None
        if health and health["healthy"] and stack.acme.ok(
                "GET", f"/operations/{heals[0]['details']['operation']}")["state"] == "COMPLETED":
            healed = time.monotonic() - killed
            break
        assert time.monotonic() < deadline, f"{name} not healed: {heals}, {health}"
        time.sleep(0.1)
    [reported] = [v for d in decisions(stack, vcdn["id"], "health") if d["outcome"] == "unhealthy"
                  and name in d["details"]["unhealthy"]
                  for v in d["details"]["vnfs"] if v["name"] == name][:1]
    return tree, reported, heals[0], healed


def test_a_cache_whose_master_is_killed_is_mended_in_place_within_two_periods(stack, vcdn):
    """Its workers still serve: it gets a new master beside them where it runs (its
    content kept, its balancer's members unchanged) rather than a replacement."""
    name = vnf_named(stack, vcdn["id"], "cache")
    pid_file = folder(stack, vcdn["id"], name) / "nginx.pid"
    tree, reported, heal, seconds = kill_and_heal(stack, vcdn, name, pid_file)
    assert reported["detail"] == f"master {tree[0]} is gone; {len(tree) - 1} orphan workers"
    assert reported["lasting"] and heal["details"]["failed_passes"] == 1
    assert seconds <= 2 * PERIOD, f"healed in {seconds:.1f} s"
    assert name in [v["name"] for v in ro_health(stack, vcdn["id"])["vnfs"]]
    assert processes.pid_in(pid_file) not in tree
    assert not any(processes.running(pid) for pid in tree)  # no orphan left serving
    assert serves(vcdn)
    print(f"cache healed in {seconds:.2f} s")


def test_a_balancer_whose_master_is_killed_is_rebuilt_at_its_address(stack, vcdn):
    name = vnf_named(stack, vcdn["id"], "load_balancer")
    tree, reported, heal, seconds = kill_and_heal(
        stack, vcdn, name, folder(stack, vcdn["id"], name) / "nginx.pid")
    assert reported["detail"] == f"master {tree[0]} is gone; {len(tree) - 1} orphan workers"
    assert heal["outcome"] == "started" and heal["details"]["role"] == "load_balancer"
    assert seconds <= 2 * PERIOD, f"healed in {seconds:.1f} s"
    after = stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")
    assert after["regions"] == vcdn["regions"]  # the same entry point
    assert not any(processes.running(pid) for pid in tree)
    assert serves(vcdn)
    print(f"balancer healed in {seconds:.2f} s")


def test_a_killed_dnsmasq_is_restarted_at_the_dns_address(stack, vcdn):
    name = vnf_named(stack, vcdn["id"], "dns")
    pid_file = folder(stack, vcdn["id"], name) / f"{name}-eu-west.pid"
    tree, reported, heal, seconds = kill_and_heal(stack, vcdn, name, pid_file)
    assert reported["detail"] == \
        f"eu-west: master {tree[0]} is gone; no DNS answer"
    assert heal["details"]["role"] == "dns" and reported["lasting"]
    assert seconds <= 2 * PERIOD, f"healed in {seconds:.1f} s"
    assert stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")["entry_point"] == vcdn["entry_point"]
    assert not any(processes.running(pid) for pid in tree)
    assert serves(vcdn)
    print(f"DNS healed in {seconds:.2f} s")
