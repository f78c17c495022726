"""The vCDN's origins (cdnaas.delivery.origins): checked strictly (400 naming the field,
nothing stored), rendered into a real nginx cache whose fetch server fails over to a
second sample origin (a killed primary, a hung one, chosen statuses), picks an origin
per path prefix and sends the vCDN's headers and Host; deployed on the local driver with
the secondary resolved as the primary is.

Its tests that start no process are in tests/unit/test_origin_group_units.py (the unit
tier)."""
import concurrent.futures
import contextlib
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest
import requests

from cdnaas import delivery
from cdnaas.common import config
from cdnaas.common.ports import free_loopback_ports
from cdnaas.common.sig import Origin, ServiceInstanceGraph
from cdnaas.origin import server as origin_server
from cdnaas.ro.vim.local import clients
from cdnaas.ro.vim.local.driver import LocalDriver
from cdnaas.vnf import cache, endpoints
from tests.support.api import vcdn_body
from tests.support.delivery import assert_api_refuses, local_stack, sample_origin
from tests.system.test_local_driver import (  # noqa: F401 (the fixture: a module's own state)
    state_dir)
from tests.system.test_origin_shield import fetch_through, shielded_sig
from tests.system.test_vnf_rendering import need, start_nginx, wait_until
from tests.unit.test_origin_group_units import SECRET


@pytest.fixture(autouse=True)
def loopback_allowed(monkeypatch):
    """The operator allows this machine's origins (the sample origins listen here)."""
    monkeypatch.setenv("CDNAAS_ORIGIN_ALLOW", "127.0.0.1")


# --- real nginx on loopback ---------------------------------------------------------------

@contextlib.contextmanager
def killable_origin():
    """The sample origin as a process of its own (a real kill); yields (process, port)."""
    [port] = free_loopback_ports(1)
    process = subprocess.Popen([sys.executable, "-m", "cdnaas.origin.server", "--host",
                                "127.0.0.1", "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: _answers(port), "the primary origin answers")
        yield process, port
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def _answers(port):
    with contextlib.suppress(requests.RequestException):
        return requests.get(f"http://127.0.0.1:{port}/_stats", timeout=1).ok
    return False


class GroupCache:
    """A cache nginx on loopback with the vCDN's ``origins`` (its secondary a sample
    origin in a thread, :attr:`secondary`) in front of the primary at ``primary_port``."""

    def __init__(self, stack, tmp_path, primary_port, value):
        self.secondary = sample_origin(stack)
        value = {**value, "secondary": f"http://127.0.0.1:{self.secondary.server_address[1]}"}
        service = delivery.accept({"origins": value})
        self.port, self.management, fetch = free_loopback_ports(3)
        text = cache.cache_config(
            name="group-cache", workers=1, listen_address="127.0.0.1", listen_port=self.port,
            origin=Origin("http", "origin.example.com", primary_port),
            origin_address="127.0.0.1", prefix_dir=str(tmp_path / "cache"), daemon=False,
            management_sources=["127.0.0.1"], management_port=self.management, user="root",
            service=service, secondary_address="127.0.0.1", fetch_port=fetch)
        stack.enter_context(start_nginx(text, tmp_path / "cache", self.management))

    def get(self, path, timeout=20):
        return requests.get(f"http://127.0.0.1:{self.port}{path}", timeout=timeout)


@contextlib.contextmanager
def group_cache(tmp_path, primary_port, value):
    need("nginx", root=True)
    with contextlib.ExitStack() as stack:
        yield GroupCache(stack, tmp_path, primary_port, value)


def test_a_killed_primary_fails_over_with_no_error_under_load(tmp_path):
    """Three viewers fetch cached objects and misses (600 requests at most, 60 s at
    most); the primary origin is killed after the first 150: every answer is a 200 with
    the object's bytes, the misses after the kill come from the secondary at once."""
    cached = [f"/video/low/seg-{n}.m4s" for n in range(1, 11)]
    with killable_origin() as (primary, port), \
            group_cache(tmp_path, port, {"failover": {"connect_timeout": 1}}) as cache:
        for path in cached:
            assert cache.get(path).status_code == 200
        assert cache.secondary.stats() == {}
        done, errors_seen, miss_times, before = [0], [], [], []
        deadline = time.monotonic() + 60

        def viewer(index):
            for n in range(200):
                if time.monotonic() > deadline:
                    return
                path = cached[n % len(cached)] if n % 2 else f"/plain/v{index}-{n}"
                after_kill = primary.poll() is not None
                started = time.monotonic()
                answer = cache.get(path)
                took = time.monotonic() - started
                done[0] += 1
                expected = origin_server.body(path)
                if answer.status_code != 200 or answer.content != expected:
                    errors_seen.append((path, answer.status_code))
                elif not n % 2:
                    (miss_times if after_kill else before).append(took)
                if done[0] == 150:
                    primary.send_signal(signal.SIGKILL)
                    primary.wait(10)

        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            list(pool.map(viewer, range(3)))
        assert primary.poll() is not None, "the primary was never killed"
        assert errors_seen == []
        assert len(miss_times) > 50
        served = cache.secondary.stats()
        assert sum(served.values()) >= len(miss_times)
        assert not set(served) & set(cached)  # cached objects stayed in the cache
        assert max(miss_times) < 1.0  # refused at once: no timeout to wait for
        print(f"\nfailover: {done[0]} requests, 0 errors; misses before the kill "
              f"{len(before)}, median {sorted(before)[len(before) // 2] * 1000:.1f} ms; after "
              f"{len(miss_times)}, median {sorted(miss_times)[len(miss_times) // 2] * 1000:.1f}"
              f" ms, max {max(miss_times) * 1000:.1f} ms")


def test_a_hung_primary_fails_over_within_its_read_timeout(tmp_path):
    """The primary accepts connections and never answers: a miss waits the read timeout
    (1 s) and comes from the secondary."""
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(64)
        value = {"failover": {"connect_timeout": 1, "read_timeout": 1}}
        with group_cache(tmp_path, hung.getsockname()[1], value) as cache:
            started = time.monotonic()
            answer = cache.get("/objects/small")
            took = time.monotonic() - started
    assert answer.status_code == 200
    assert answer.content == origin_server.body("/objects/small")
    assert cache.secondary.stats() == {"/objects/small": 1}
    assert 1.0 <= took < 2.5, took
    print(f"\nhung primary: the miss took {took * 1000:.0f} ms (read timeout 1 s)")


def test_chosen_statuses_fail_over_and_others_pass(tmp_path):
    primary = contextlib.ExitStack()
    with primary:
        origin = sample_origin(primary)
        with group_cache(tmp_path, origin.server_address[1],
                         {"failover": {"statuses": [503, 404]}}) as cache:
            origin.failing = 503
            assert cache.get("/plain/a").status_code == 200
            assert cache.get("/nope").status_code == 404  # both answer 404: the secondary's
            origin.failing = 500
            assert cache.get("/plain/b").status_code == 500  # not chosen: passed on
            assert origin.stats() == {"/plain/a": 1, "/nope": 1, "/plain/b": 1}
            assert cache.secondary.stats() == {"/plain/a": 1, "/nope": 1}


def test_prefixes_choose_their_origin_and_every_fetch_carries_the_headers(tmp_path):
    value = {"paths": [{"prefix": "/plain/second/", "origin": "secondary"}],
             "headers": [{"name": "X-Origin-Auth", "value": SECRET, "secret": True},
                         {"name": "X-Tenant", "value": "acme (eu)"}],
             "host": "www.example.com"}
    primary = contextlib.ExitStack()
    with primary:
        origin = sample_origin(primary)
        with group_cache(tmp_path, origin.server_address[1], value) as cache:
            assert cache.get("/plain/first/a").status_code == 200
            assert cache.get("/plain/second/b").status_code == 200
            assert origin.stats() == {"/plain/first/a": 1}
            assert cache.secondary.stats() == {"/plain/second/b": 1}
            for seen in (origin.headers_of("/plain/first/a"),
                         cache.secondary.headers_of("/plain/second/b")):
                assert seen["X-Origin-Auth"] == SECRET
                assert seen["X-Tenant"] == "acme (eu)"
                assert seen["Host"] == "www.example.com"


# --- the API and the local driver ---------------------------------------------------------

@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    yield from local_stack(tmp_path_factory)


@pytest.mark.parametrize("value, field", [
    ({"headers": [{"name": "X-A", "value": "x\r\nSet-Cookie: a"}]}, "origins.headers[0].value"),
    ({"headers": [{"name": "X-A: b", "value": "x"}]}, "origins.headers[0].name"),
    ({"host": "a;b"}, "origins.host"),
    ({"secondary": "http://127.0.0.1:1", "failover": {"statuses": [200]}},
     "origins.failover.statuses[0]"),
])
def test_the_api_refuses_hostile_origins_and_stores_nothing(stack, value, field):
    assert_api_refuses(stack, "origins", value, field)


def test_a_deployed_vcdn_fails_over_to_its_secondary_and_masks_its_secret(stack, origin):
    secondary, thread = origin_server.serve_in_thread("0.0.0.0", 0)
    try:
        value = {"secondary": f"http://127.0.0.1:{secondary.server_address[1]}",
                 "failover": {"statuses": [503], "connect_timeout": 2},
                 "headers": [{"name": "X-Origin-Auth", "value": SECRET, "secret": True}]}
        body = vcdn_body("grouped", origin=f"http://127.0.0.1:{origin.server_address[1]}",
                         origins=value)
        accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
        assert stack.acme.wait(accepted["operation"]["id"], 90)["state"] == "COMPLETED"
        vcdn_id = accepted["vcdn"]["id"]
        vcdn = stack.acme.ok("GET", f"/vcdns/{vcdn_id}")
        assert vcdn["origins"]["headers"][0]["value"] == "****"
        assert vcdn["origins"]["failover"]["statuses"] == [503]
        balancer = vcdn["regions"][0]["load_balancer"]
        with clients.client(vcdn_id, "eu-west", "10.1.0.41") as viewer:
            assert viewer.fetch(f"http://{balancer}/plain/first")[0] == 200
            origin.failing = 503
            status, _headers, content = viewer.fetch(f"http://{balancer}/plain/second")
        assert (status, content) == (200, origin_server.body("/plain/second"))
        assert origin.stats()["/plain/second"] == 1
        assert secondary.stats() == {"/plain/second": 1}
        assert origin.headers_of("/plain/first")["X-Origin-Auth"] == SECRET
        assert secondary.headers_of("/plain/second")["X-Origin-Auth"] == SECRET
        ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn_id}", 202)
        assert stack.acme.wait(ended["operation"]["id"], 60)["state"] == "COMPLETED"
    finally:
        origin.failing = None
        secondary.shutdown()
        secondary.server_close()
        thread.join(5)


@pytest.mark.usefixtures("state_dir")
def test_the_origin_shield_fails_over_for_every_region(origin):
    """With a shield, the shield fetches from the origins and fails over; the caches behind
    it have no fetch server of their own, and they alone apply the response rules."""
    need("nginx", root=True)
    with contextlib.ExitStack() as stack:
        secondary, thread = origin_server.serve_in_thread("0.0.0.0", 0)
        stack.callback(thread.join, 5)
        stack.callback(secondary.server_close)
        stack.callback(secondary.shutdown)
        stack.callback(setattr, origin, "failing", None)
        sig = shielded_sig(origin, {"north": 1, "south": 1}, f"group-{uuid.uuid4().hex[:8]}")
        service = delivery.accept({"origins": {
            "secondary": f"http://127.0.0.1:{secondary.server_address[1]}",
            "failover": {"statuses": [503]}},
            "response_rules": {"add_headers": [{"name": "X-Frame-Options", "value": "DENY"}]}})
        sig = ServiceInstanceGraph.from_dict({**sig.to_dict(), "service": service})
        driver = LocalDriver()
        deployment = driver.deploy(sig)
        stack.callback(driver.terminate, deployment)
        prefixes = config.state_dir() / "local" / deployment.resources["owner"] / sig.vcdn_id
        configs = {p.parent.name: p.read_text() for p in prefixes.glob("*/nginx.conf")}
        assert "upstream origin_secondary" in configs["shield-0"]
        assert not [name for name, text in configs.items()
                    if name != "shield-0" and "origin_primary" in text]
        # the response rules are the viewer-facing caches' alone (once per answer)
        assert sorted(name for name, text in configs.items()
                      if endpoints.RESPONSE_RULES_MARK in text) == \
            sorted(name for name in configs if "-cache-" in name)
        origin.failing = 503
        assert fetch_through(deployment, sig, "south", "10.2.0.41", "/plain/shielded") == \
            (200, "MISS", "MISS", "shield-0")
        assert secondary.stats() == {"/plain/shielded": 1}
        assert origin.stats()["/plain/shielded"] == 1
