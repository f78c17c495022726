"""The Instance Manager on the local driver, with real nginx and real clients (root only).

Video-like viewers in a client namespace of one region (each keeps one keep-alive
connection to the region's balancer and fetches a 2 s chunk every 2 s, bounded in
number and time) make the IM add caches there; when they leave, it removes one and
RO drains it without a failed request; a cache whose nginx is killed is built again in
place, at its address.
The flavor's model is scaled down so that a few dozen viewers load a 1-vCPU cache.
"""
import json
import os
import sys
import threading
import time

import pytest
import requests

from cdnaas.ro.vim.local import cgroups, clients, network
from tests.support.api import populate, vcdn_body
from tests.support.stack import running_stack
from tests.support.im import FLAVOR, small_model, template
from tests.service.test_im_stack import decisions, eventually

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")

#: A paced video audience: ``count`` viewers, each with one keep-alive connection,
#: fetching a chunk every 2 s until ``seconds`` pass or ``stop_file`` exists. A request
#: that fails on a connection the server had closed while idle is sent again once on a
#: new one (RFC 9112 9.3.1.1, as players do); every other failure is counted.
VIEWERS = r'''
import http.client, json, os, sys, threading, time
host, address, count, seconds, stop = sys.argv[1:6]
count, seconds, period = int(count), float(seconds), 2.0
deadline, lock = time.monotonic() + seconds, threading.Lock()
tally = {"ok": 0, "failed": [], "retried": 0}

def fetch(conn, path):
    conn.request("GET", path, headers={"Host": host})
    answer = conn.getresponse()
    answer.read()
    return answer.status

def viewer(index):
    conn, chunk = None, 0
    due = time.monotonic() + period * index / count
    while time.monotonic() < deadline and not os.path.exists(stop):
        time.sleep(max(0.0, due - time.monotonic()))
        due += period
        path = "/video/low/seg-%d.m4s" % ((index * 7 + chunk) % 300 + 1)
        chunk += 1
        reused = conn is not None
        conn = conn or http.client.HTTPConnection(address, 80, timeout=10)
        try:
            status = fetch(conn, path)
        except (http.client.HTTPException, OSError) as exc:
            conn.close()
            conn = http.client.HTTPConnection(address, 80, timeout=10)
            status = repr(exc)
            if reused:
                with lock:
                    tally["retried"] += 1
                try:
                    status = fetch(conn, path)
                except (http.client.HTTPException, OSError) as again:
                    conn.close()
                    conn, status = None, repr(again)
        with lock:
            if status == 200:
                tally["ok"] += 1
            else:
                tally["failed"].append(status)

threads = [threading.Thread(target=viewer, args=(i,)) for i in range(count)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps(tally))
'''


class Audience:
    """``count`` viewers in a client namespace of ``region`` until :meth:`stop` (at most ``seconds``)."""

    def __init__(self, tmp_path, vcdn, region, address, count, seconds=120):
        self.stop_file = tmp_path / f"stop-{address}"
        self.result = {}
        balancer = next(r["load_balancer"] for r in vcdn["regions"] if r["name"] == region)
        command = [sys.executable, "-c", VIEWERS, vcdn["entry_point"]["hostname"], balancer,
                   str(count), str(seconds), str(self.stop_file)]

        def watch():
            with clients.client(vcdn["id"], region, address) as host:
                self.result.update(json.loads(host.run(command, timeout=seconds + 30)))
        self.thread = threading.Thread(target=watch)
        self.thread.start()

    def stop(self):
        self.stop_file.touch()
        self.thread.join(timeout=60)
        return self.result


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("im-local")
    extra = {"CDNAAS_VIM_DRIVER": "local", "CDNAAS_IM_INTERVAL": "1",
             "CDNAAS_LOCAL_DRAIN_SECONDS": "10", "CDNAAS_MODEL_DIRS": str(tmp / "models")}
    with running_stack(None, tmp, extra_env=extra) as running:
        populate(running)
        document = template(small_model(tmp / "models"), technology="container",
                            caches=(1, 3), vcpus=(1, 1))
        sidr = running.operator.call("POST", "/templates", json=document)
        assert sidr.status_code == 201, sidr.text
        running.tmp = tmp
        yield running


@pytest.fixture(scope="module")
def vcdn(stack, origin):
    body = vcdn_body("watched", (("eu-west", 8), ("us-east", 4)), flavor=FLAVOR,
                     origin=f"http://127.0.0.1:{origin.server_address[1]}")
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
    assert stack.acme.wait(accepted["operation"]["id"], timeout=60)["state"] == "COMPLETED"
    yield accepted["vcdn"]["id"]
    ended = stack.acme.ok("DELETE", f"/vcdns/{accepted['vcdn']['id']}", 202)
    stack.acme.wait(ended["operation"]["id"], timeout=60)


def caches(stack, vcdn_id, region="eu-west"):
    vcdn = stack.acme.ok("GET", f"/vcdns/{vcdn_id}")
    return next(r["caches"] for r in vcdn["regions"] if r["name"] == region)


def cache_names(stack, vcdn_id):
    sig = requests.get(f"{stack.urls['so']}/so/v1/instances/{vcdn_id}/sig",
                       headers=stack.service_headers(), timeout=10).json()
    return sorted(v["name"] for v in sig["vnfs"] if v["role"] == "cache")


def test_viewers_make_the_im_add_caches_and_leaving_viewers_remove_one_without_failures(
        stack, vcdn):
    live = stack.acme.ok("GET", f"/vcdns/{vcdn}")
    assert caches(stack, vcdn) == 1
    crowd = Audience(stack.tmp, live, "eu-west", "10.1.0.50", count=30)
    try:
        [out] = eventually(lambda: decisions(stack, vcdn, "scale_out")[:1], "a scale out", 60)
        assert out["outcome"] == "started" and out["region"] == "eu-west"
        assert out["details"]["samples"][-1]["viewers"] >= 25  # the balancer's connections
        assert out["details"]["samples"][-1]["predicted_mos"] < 4.0
        assert out["details"]["counters"]["below"] >= 2
        assert stack.acme.wait(out["details"]["operation"], timeout=60)["state"] == "COMPLETED"
        grown = caches(stack, vcdn)
        assert grown == out["details"]["target_caches"] >= 2
        stayers = Audience(stack.tmp, live, "eu-west", "10.1.0.60", count=4)
    finally:
        crowd_result = crowd.stop()
    try:
        [back] = eventually(lambda: decisions(stack, vcdn, "scale_in")[:1], "a scale in", 90)
        assert back["outcome"] == "started" and back["details"]["target_caches"] == grown - 1
        assert stack.acme.wait(back["details"]["operation"], timeout=60)["state"] == "COMPLETED"
        time.sleep(4)  # the stayers keep fetching through the drained region
    finally:
        stayers_result = stayers.stop()
    assert caches(stack, vcdn) == grown - 1
    assert crowd_result["ok"] >= 30 and not crowd_result["failed"], crowd_result
    assert stayers_result["ok"] > 10 and not stayers_result["failed"], stayers_result
    points = stack.acme.ok("GET", f"/vcdns/{vcdn}/metrics", params={"scope": "region"})
    west = next(s["points"] for s in points["series"] if s["key"] == "eu-west")
    assert max(p["viewers"] for p in west) >= 25 and min(p["mos"] for p in west) < 4.0
    assert all(p["watts"] and p["watts"] > 0 for p in west[-3:])
    cache_points = stack.acme.ok("GET", f"/vcdns/{vcdn}/metrics", params={"scope": "cache"})
    assert any((p["cpu"] or 0) > 0 for s in cache_points["series"] for p in s["points"])
    assert any((p["requests_per_second"] or 0) > 5 for s in cache_points["series"]
               for p in s["points"])


def test_a_killed_cache_is_built_again_in_place(stack, vcdn):
    before = cache_names(stack, vcdn)
    victim = before[0]
    namespace = next(n for n in network.list_namespaces()
                     if (network.parse_namespace(n) or ())[1:] == (vcdn, victim))
    owner = network.parse_namespace(namespace)[0]
    cgroups.remove(f"{owner}_{vcdn}_{victim}")  # its nginx dies
    [healed] = eventually(lambda: [d for d in decisions(stack, vcdn, "heal")
                                   if d["details"]["vnf"] == victim], "a heal", 60)
    assert healed["outcome"] == "started" and healed["region"] == "eu-west"
    assert stack.acme.wait(healed["details"]["operation"], timeout=60)["state"] == "COMPLETED"
    assert healed["details"]["lasting"]  # its master is gone: healed in place
    assert cache_names(stack, vcdn) == before
    assert cgroups.pids(f"{owner}_{vcdn}_{victim}")  # it runs again
    health = requests.get(f"{stack.urls['ro']}/ro/v1/deployments/{vcdn}/health",
                          headers=stack.service_headers(), timeout=10)
    assert health.json()["healthy"] is True
    unhealthy = stack.acme.ok("GET", f"/vcdns/{vcdn}/decisions",
                              params={"kind": "health"})["decisions"]
    assert any(victim in d["details"]["unhealthy"] for d in unhealthy)
