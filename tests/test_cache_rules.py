"""Cache rules: checked strictly (400 naming the field), rendered into real nginx caches
(TTL per path, query strings in the key, origin Cache-Control ignored) and changed on a
live vCDN by a PATCH that reloads every cache gracefully (local driver) or rebuilds
every cache (OpenStack driver: which servers here, the rebuild itself in
``tests/test_openstack_driver.py``)."""
import contextlib
import dataclasses
import os
import time

import pytest
import requests

from cdnaas.common import caching, errors
from cdnaas.common.ports import free_loopback_ports
from cdnaas.common.sig import Origin
from cdnaas.ro.vim.local import clients
from cdnaas.vnf import cache, endpoints, options
from cdnaas.vnf.fields import ConfigError
from tests.support.api import populate, vcdn_body
from tests.support.delivery import sample_origin
from tests.support.stack import running_stack
from tests.test_comforts_unit import openstack_sig, rebuilt
from tests.test_vnf_rendering import cache_values, need, start_nginx

HOSTILE = ["/a b", "/a;b", "/a{", "/$uri", "/a\nb", "/a\x00", '/a"', "/a'", "/../etc",
           "/é", "/" + "a" * 300, 7, None]


# --- validation -------------------------------------------------------------------------

def refused(value, field):
    with pytest.raises(errors.BadRequest) as caught:
        caching.cache_rules(value)
    assert caught.value.field == field, caught.value.message
    return caught.value.message


def test_defaults_are_filled_and_stored_as_nothing():
    assert caching.cache_rules(None) == caching.DEFAULTS
    assert caching.stored_rules({}) is None
    assert caching.stored_rules({"query_string": ["v", "lang", "v"]}) == \
        {**caching.DEFAULTS, "query_string": ["lang", "v"]}


@pytest.mark.parametrize("path", HOSTILE)
def test_hostile_rule_paths_are_refused(path):
    message = refused({"ttl": [{"match": "prefix", "path": path, "ttl": "1h"}]},
                      "cache_rules.ttl[0].path")
    assert "A-Z a-z 0-9" in message


@pytest.mark.parametrize("ttl", ["0s", "1y", "10", "1h;", "1h ", "366d", "9999999s", "", 3600,
                                 "1h\n", "$ttl"])
def test_bad_ttls_are_refused(ttl):
    refused({"ttl": [{"match": "exact", "path": "/a", "ttl": ttl}]}, "cache_rules.ttl[0].ttl")
    refused({"default_ttl": ttl}, "cache_rules.default_ttl")


@pytest.mark.parametrize("value,field", [
    ({"ttl": [{"match": "regex", "path": "/a", "ttl": "1h"}]}, "cache_rules.ttl[0].match"),
    ({"ttl": [{"match": "prefix", "path": "static/", "ttl": "1h"}]}, "cache_rules.ttl[0].path"),
    ({"ttl": [{"match": "prefix", "path": "/a", "ttl": "1h", "x": 1}]}, "cache_rules.ttl[0].x"),
    ({"ttl": [{"match": "prefix", "path": "/a"}]}, "cache_rules.ttl[0].ttl"),
    ({"ttl": [{"match": "exact", "path": "/a", "ttl": "1h"}] * 33}, "cache_rules.ttl"),
    ({"query_string": "drop"}, "cache_rules.query_string"),
    ({"query_string": []}, "cache_rules.query_string"),
    ({"query_string": ["a-b"]}, "cache_rules.query_string[0]"),
    ({"query_string": ["v", "$x"]}, "cache_rules.query_string[1]"),
    ({"query_string": [f"a{i}" for i in range(17)]}, "cache_rules.query_string"),
    ({"origin_cache_control": "obey"}, "cache_rules.origin_cache_control"),
    ({"surprise": 1}, "cache_rules.surprise"),
    ("ignore", "cache_rules"),
])
def test_each_refusal_names_its_field(value, field):
    refused(value, field)


def test_the_renderer_checks_again():
    with pytest.raises(ConfigError, match="cache_rules.ttl.0..path"):
        options.nginx_cache_rules({"ttl": [{"match": "prefix", "path": "/a;", "ttl": "1h"}]})


def test_rules_become_regex_locations_in_order(tmp_path):
    rules = {"ttl": [{"match": "exact", "path": "/index.html", "ttl": "5s"},
                     {"match": "prefix", "path": "/static/", "ttl": "1h"},
                     {"match": "suffix", "path": ".css", "ttl": "7d"}],
             "query_string": ["v"], "origin_cache_control": "ignore"}
    text = cache.cache_config(**cache_values(tmp_path, cache_rules=rules))
    positions = [text.index(f"location ~ {regex} {{") for regex in
                 (r"^/index\.html$", "^/static/", r"\.css$")]
    assert positions == sorted(positions) and positions[-1] < text.index("location / {")
    for ttl in ("5s", "1h", "7d", "10m"):
        assert f"proxy_cache_valid 200 206 301 302 {ttl};" in text
    assert text.count('proxy_cache_key "$uri?v=$arg_v$cdnaas_slice_range";') == 4
    assert text.count("proxy_ignore_headers Cache-Control Expires;") == 4
    assert 'proxy_cache_purge north-cache-1 "$uri?v=$arg_v$http_x_cdnaas_slice";' in text
    assert f"load_module {endpoints.PURGE_MODULE};" in text


def test_new_rules_rebuild_every_openstack_cache_and_nothing_else():
    sig = openstack_sig()
    rules = {**caching.DEFAULTS, "query_string": "ignore"}
    ruled = dataclasses.replace(sig, service={"cache_rules": rules})
    new = rebuilt(sig, ruled)
    assert sorted(new) == ["north-cache-1", "north-cache-2", "south-cache-1"]
    assert all('proxy_cache_key \\"$uri$cdnaas_slice_range\\";' in text for text in new.values())
    # the defaults written out render as no rules at all: the same user-data, no rebuild
    assert rebuilt(sig, dataclasses.replace(sig, service={"cache_rules": caching.DEFAULTS})) \
        == {}


# --- real nginx on loopback ---------------------------------------------------------------

class LoopbackCache:
    """The sample origin and one cache nginx with ``rules`` on loopback (stopped by the
    ``with``): :meth:`get` fetches through it, ``management`` is its management port."""

    def __init__(self, stack, tmp_path, rules):
        self.origin = sample_origin(stack)
        self.port, self.management = free_loopback_ports(2)
        text = cache.cache_config(
            name="loop-cache", workers=1, listen_address="127.0.0.1", listen_port=self.port,
            origin=Origin("http", "origin.example.com", self.origin.server_address[1]),
            origin_address="127.0.0.1", prefix_dir=str(tmp_path / "cache"), daemon=False,
            management_sources=["127.0.0.1"], management_port=self.management, user="root",
            cache_rules=rules)
        stack.enter_context(start_nginx(text, tmp_path / "cache", self.management))

    def get(self, path):
        answer = requests.get(f"http://127.0.0.1:{self.port}{path}", timeout=10)
        assert answer.status_code == 200, (path, answer.status_code)
        return answer.headers["X-Cache-Status"]


@contextlib.contextmanager
def loopback_cache(tmp_path, rules=None):
    need("nginx", root=True)
    with contextlib.ExitStack() as stack:
        yield LoopbackCache(stack, tmp_path, rules)


def test_a_ttl_rule_expires_its_paths_while_others_stay(tmp_path):
    rules = {"ttl": [{"match": "prefix", "path": "/plain/short/", "ttl": "2s"},
                     {"match": "prefix", "path": "/plain/", "ttl": "1h"},
                     {"match": "prefix", "path": "/objects/", "ttl": "2s"}]}
    with loopback_cache(tmp_path, rules) as cache:
        assert [cache.get("/plain/short/a"), cache.get("/plain/short/a")] == ["MISS", "HIT"]
        assert [cache.get("/plain/long/b"), cache.get("/plain/long/b")] == ["MISS", "HIT"]
        # the origin sends Cache-Control: public, max-age=3600 for /objects/small
        assert [cache.get("/objects/small"), cache.get("/objects/small")] == ["MISS", "HIT"]
        time.sleep(3.5)  # nginx counts whole seconds: stale once 2 s are past a second edge
        assert cache.get("/plain/short/a") == "EXPIRED"  # the first rule that matched: 2 s
        assert cache.get("/plain/long/b") == "HIT"
        # the origin's own lifetime still rules its answers (honour): an hour, not the
        # 2 s of the /objects/ rule that matches it
        assert cache.get("/objects/small") == "HIT"
        assert cache.origin.stats()["/objects/small"] == 1


def test_ignoring_the_query_string_makes_one_object(tmp_path):
    with loopback_cache(tmp_path, {"query_string": "ignore"}) as cache:
        assert [cache.get("/objects/small?x=1"), cache.get("/objects/small?x=2"),
                cache.get("/objects/small")] == ["MISS", "HIT", "HIT"]
        assert cache.origin.stats() == {"/objects/small": 1}


def test_listed_arguments_alone_make_the_key(tmp_path):
    with loopback_cache(tmp_path, {"query_string": ["v"]}) as cache:
        assert [cache.get("/objects/small?v=1&utm=a"), cache.get("/objects/small?utm=b&v=1"),
                cache.get("/objects/small?v=2")] == ["MISS", "HIT", "MISS"]


def test_the_default_keeps_each_query_string_apart(tmp_path):
    with loopback_cache(tmp_path) as cache:
        assert [cache.get("/objects/small?x=1"), cache.get("/objects/small?x=2"),
                cache.get("/objects/small?x=1")] == ["MISS", "MISS", "HIT"]


def test_ignoring_origin_cache_control_caches_no_store_answers(tmp_path):
    with loopback_cache(tmp_path, {"origin_cache_control": "ignore"}) as cache:
        assert [cache.get("/nocache/live"), cache.get("/nocache/live")] == ["MISS", "HIT"]
        assert cache.origin.stats() == {"/nocache/live": 1}


# --- a PATCH on a live vCDN of the local driver -----------------------------------------

@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """The five services on the local driver, with the sample regions, hosts and tenants
    (one per test module that uses it)."""
    if os.geteuid() != 0:
        pytest.skip("the local driver needs root")
    with running_stack(None, tmp_path_factory.mktemp("local-stack"),
                       extra_env={"CDNAAS_VIM_DRIVER": "local"}) as running:
        yield populate(running)


def master_pids(vcdn_id, state_dir):
    return {p.parent.name: p.read_text().strip()
            for p in (state_dir / "local").glob(f"*/{vcdn_id}/*-cache-*/nginx.pid")}


def test_a_patch_of_cache_rules_alone_reloads_every_cache(stack, origin):
    body = vcdn_body("ruled", origin=f"http://127.0.0.1:{origin.server_address[1]}")
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
    assert stack.acme.wait(accepted["operation"]["id"], 90)["state"] == "COMPLETED"
    vcdn_id = accepted["vcdn"]["id"]
    assert stack.acme.ok("GET", f"/vcdns/{vcdn_id}")["cache_rules"] == caching.DEFAULTS
    pids = master_pids(vcdn_id, stack.state_dir)
    assert len(pids) == 2

    bad = stack.acme.call("PATCH", f"/vcdns/{vcdn_id}",
                          json={"cache_rules": {"ttl": [{"match": "prefix", "path": "/a;b",
                                                         "ttl": "1h"}]}})
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "cache_rules.ttl[0].path"

    rules = {"query_string": "ignore", "origin_cache_control": "ignore"}
    changed = stack.acme.ok("PATCH", f"/vcdns/{vcdn_id}", 202, json={"cache_rules": rules})
    operation = stack.acme.wait(changed["operation"]["id"], 60)
    assert operation["state"] == "COMPLETED", operation
    vcdn = stack.acme.ok("GET", f"/vcdns/{vcdn_id}")
    assert vcdn["cache_rules"] == {**caching.DEFAULTS, **rules}
    assert master_pids(vcdn_id, stack.state_dir) == pids  # reloaded, not restarted
    assert vcdn["state"] == "ACTIVE"
    balancer = vcdn["regions"][0]["load_balancer"]
    with clients.client(vcdn_id, "eu-west", "10.1.0.40") as viewer:
        seen = [viewer.fetch(f"http://{balancer}{path}")[1].get("x-cache-status")
                for path in ("/nocache/q?x=1", "/nocache/q?x=2")]
    assert seen == ["MISS", "HIT"]  # one object, no-store kept: both rules apply
    ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn_id}", 202)
    assert stack.acme.wait(ended["operation"]["id"], 60)["state"] == "COMPLETED"
