"""The vCDN's origins (cdnaas.delivery.origins): checked strictly (400 naming the field,
nothing stored), rendered into a real nginx cache whose fetch server fails over to a
second sample origin (a killed primary, a hung one, chosen statuses), picks an origin
per path prefix and sends the vCDN's headers and Host; deployed on the local driver with
the secondary resolved as the primary is."""
import concurrent.futures
import contextlib
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests

from cdnaas import delivery
from cdnaas.common import config
from cdnaas.common.ports import free_loopback_ports
from cdnaas.common.sig import Origin, ServiceInstanceGraph
from cdnaas.delivery import origins
from cdnaas.origin import server as origin_server
from cdnaas.ro.vim.local import clients
from cdnaas.ro.vim.local.driver import LocalDriver
from cdnaas.vnf import cache, endpoints, options, templates
from cdnaas.vnf.fields import ConfigError
from tests.support.api import vcdn_body
from tests.support.delivery import assert_api_refuses, local_stack, refused_field, sample_origin
from tests.test_cli import invoke
from tests.test_local_driver import state_dir  # noqa: F401 (the fixture: a module's own state)
from tests.test_origin_shield import fetch_through, shielded_sig
from tests.test_vnf_rendering import need, start_nginx, wait_until

SECRET = "t0ken-abc.123"


@pytest.fixture(autouse=True)
def loopback_allowed(monkeypatch):
    """The operator allows this machine's origins (the sample origins listen here)."""
    monkeypatch.setenv("CDNAAS_ORIGIN_ALLOW", "127.0.0.1")


def refused(value):
    return refused_field(origins, value)


# --- validation -------------------------------------------------------------------------

def test_defaults_are_stored_as_nothing_and_shown_whole():
    assert origins.check({}, "origins") is None
    assert origins.check({"failover": {"connect_timeout": 5}, "headers": []}, "origins") is None
    assert delivery.view({})["origins"] == origins.DEFAULTS


def test_a_stored_group_checks_again_to_itself_and_masks_its_secret():
    value = {"secondary": "HTTP://127.0.0.1:9/", "failover": {"statuses": [503, 404, 503]},
             "paths": [{"prefix": "/live/", "origin": "secondary", "ttl": "5s"}],
             "headers": [{"name": "X-Auth", "value": SECRET, "secret": True},
                         {"name": "X-Plain", "value": "a b=c"}],
             "host": "www.example.com"}
    stored = origins.check(value, "origins")
    assert stored["secondary"] == "http://127.0.0.1:9"
    assert stored["failover"]["statuses"] == [404, 503]
    assert origins.check(stored, "origins") == stored
    shown = origins.view(stored)["headers"]
    assert shown == [{"name": "X-Auth", "value": "****", "secret": True},
                     {"name": "X-Plain", "value": "a b=c", "secret": False}]
    assert SECRET not in repr(origins.view(stored))


HOSTILE = [
    ({"headers": [{"name": "X-A", "value": "x\r\nSet-Cookie: a"}]}, "origins.headers[0].value"),
    ({"headers": [{"name": "X-A: b", "value": "x"}]}, "origins.headers[0].name"),
    ({"headers": [{"name": "X-A", "value": "a;b"}]}, "origins.headers[0].value"),
    ({"headers": [{"name": "X-A", "value": "a{b}"}]}, "origins.headers[0].value"),
    ({"headers": [{"name": "X-A", "value": "$host"}]}, "origins.headers[0].value"),
    ({"headers": [{"name": "X-A", "value": 'a"b'}]}, "origins.headers[0].value"),
    ({"headers": [{"name": "X-A", "value": "é"}]}, "origins.headers[0].value"),
    ({"headers": [{"name": "X-A", "value": "a" * 257}]}, "origins.headers[0].value"),
    ({"headers": [{"name": "Host", "value": "a"}]}, "origins.headers[0].name"),
    ({"headers": [{"name": "X-A#", "value": "a"}]}, "origins.headers[0].name"),
    ({"headers": [{"name": "X-A", "value": "****", "secret": True}]},
     "origins.headers[0].value"),
    ({"headers": [{"name": "X-A", "value": "a", "secret": True},
                  {"name": "X-B", "value": "b", "secret": True}]}, "origins.headers"),
    ({"headers": [{"name": "X-A", "value": "a"}] * 2}, "origins.headers[1].name"),
    ({"headers": [{"name": f"X-{i}", "value": "a"} for i in range(9)]}, "origins.headers"),
    ({"secondary": "http://a b"}, "origins.secondary"),
    ({"secondary": "http://a.example/x;"}, "origins.secondary"),
    ({"secondary": "http://169.254.169.254"}, "origins.secondary"),
    ({"secondary": "http://127.0.0.1:9", "failover": {"statuses": [418]}},
     "origins.failover.statuses[0]"),
    ({"failover": {"statuses": [503]}}, "origins.failover.statuses"),
    ({"failover": {"connect_timeout": 0}}, "origins.failover.connect_timeout"),
    ({"failover": {"read_timeout": "30s;"}}, "origins.failover.read_timeout"),
    ({"paths": [{"prefix": "/a;b"}]}, "origins.paths[0].prefix"),
    ({"paths": [{"prefix": "/a{"}]}, "origins.paths[0].prefix"),
    ({"paths": [{"prefix": "/a", "origin": "secondary"}]}, "origins.paths[0].origin"),
    ({"paths": [{"prefix": "/a", "origin": "http://x"}]}, "origins.paths[0].origin"),
    ({"paths": [{"prefix": "/a", "ttl": "1h;"}]}, "origins.paths[0].ttl"),
    ({"host": "a b"}, "origins.host"),
    ({"host": "$host"}, "origins.host"),
    ({"host": "x.example;"}, "origins.host"),
    ({"hosts": "x"}, "origins.hosts"),
    ("x", "origins"),
]


@pytest.mark.parametrize("value, field", HOSTILE)
def test_hostile_values_are_refused_naming_their_field(value, field):
    assert refused(value) == field


def test_the_renderer_checks_again():
    stored = {"origins": {**origins.DEFAULTS, "host": "a;b"}}
    with pytest.raises(ConfigError, match="origins.host"):
        options.delivery_values(stored)


def test_a_secondary_needs_its_address_and_a_shielded_cache_has_no_fetch_server(tmp_path):
    service = delivery.accept({"origins": {"secondary": "http://127.0.0.1:9"}})
    values = dict(name="c", workers=1, listen_address="127.0.0.1", listen_port=9000,
                  origin=Origin("http", "origin.example.com", 9001), origin_address="127.0.0.1",
                  prefix_dir=str(tmp_path), management_sources=["127.0.0.1"], service=service)
    with pytest.raises(ConfigError, match="secondary_address"):
        cache.cache_config(**values)
    shielded = cache.cache_config(**values, behind_shield=True)
    assert "origin_secondary" not in shielded and "server 127.0.0.1:9001;" in shielded
    assert "proxy_read_timeout 75s;" in shielded  # waits for the shield's failover


def test_prefix_lifetimes_come_before_the_cache_rules(tmp_path):
    service = delivery.accept({"origins": {"paths": [{"prefix": "/live/", "ttl": "5s"}]}})
    text = cache.cache_config(
        name="c", workers=1, listen_address="127.0.0.1", listen_port=9000,
        origin=Origin("http", "origin.example.com", 9001), origin_address="127.0.0.1",
        prefix_dir=str(tmp_path), management_sources=["127.0.0.1"], service=service,
        cache_rules={"ttl": [{"match": "prefix", "path": "/", "ttl": "1h"}]})
    assert text.index("location ~ ^/live/ {") < text.index("location ~ ^/ {")
    assert "origin_primary" not in text  # a lifetime alone needs no fetch server


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


@pytest.mark.parametrize("option", [{"origins": {"host": "www.example.com"}},
                                    {"response_rules": {"cors": {"allow_origins": "*"}}}])
def test_a_flavor_template_that_ignores_an_option_is_refused(tmp_path, option):
    """A flavor's own cache template that renders neither the fetch server nor the response
    rules would break fetches or drop the rules silently: RO refuses to render it."""
    folder = (Path(__file__).parent.parent / "examples" / "cdnaas-small-objects"
              / "cdnaas_small_objects" / "templates")
    flavor = templates.FlavorConfig(
        template="nginx-small-objects.conf.j2", folders=(folder,),
        extra={"keys_zone_mb": 16, "cache_valid": "1m", "asset_max_age": "7d",
               "gzip_types": ["text/css"]})
    values = dict(name="c", workers=1, listen_address="127.0.0.1", listen_port=9000,
                  origin=Origin("http", "origin.example.com", 9001), origin_address="127.0.0.1",
                  prefix_dir=str(tmp_path), management_sources=["127.0.0.1"], flavor=flavor)
    assert "upstream origin" in cache.cache_config(**values)
    with pytest.raises(ConfigError, match="nginx-small-objects.conf.j2 does not render"):
        cache.cache_config(**values, service=delivery.accept(option))


def test_the_cli_refuses_an_origins_file_that_is_not_yaml(tmp_path):
    written = tmp_path / "origins.yaml"
    written.write_text("secondary: [http://a\n")
    env = {"CDNAAS_CONFIG": str(tmp_path / "config.yaml"), "CDNAAS_API_URL": "http://127.0.0.1:9"}
    result = invoke(["vcdn", "update", "some-id", "--origins", str(written)], env, "token")
    assert result.exit_code == 2 and "--origins" in result.output
