"""Cache rules: the tests that start no process (the unit tier); the others, and what the
module covers, are in tests/system/test_cache_rules.py."""
import dataclasses

import pytest

from cdnaas.common import caching, errors
from cdnaas.vnf import cache, endpoints, options
from cdnaas.vnf.fields import ConfigError
from tests.unit.test_comforts_unit import openstack_sig, rebuilt
from tests.unit.test_vnf_rendering_units import cache_values

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
