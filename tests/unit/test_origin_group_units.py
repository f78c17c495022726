"""The vCDN's origins (cdnaas.delivery.origins): the tests that start no process (the unit
tier); the others, and what the module covers, are in tests/service/test_origin_group.py."""
from pathlib import Path

import pytest

from cdnaas import delivery
from cdnaas.common.sig import Origin
from cdnaas.delivery import origins
from cdnaas.vnf import cache, options, templates
from cdnaas.vnf.fields import ConfigError
from tests.support.delivery import refused_field
from tests.service.test_cli import invoke

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


# --- the API and the local driver ---------------------------------------------------------


@pytest.mark.parametrize("option", [{"origins": {"host": "www.example.com"}},
                                    {"response_rules": {"cors": {"allow_origins": "*"}}}])
def test_a_flavor_template_that_ignores_an_option_is_refused(tmp_path, option):
    """A flavor's own cache template that renders neither the fetch server nor the response
    rules would break fetches or drop the rules silently: RO refuses to render it."""
    folder = (Path(__file__).parents[2] / "examples" / "cdnaas-small-objects"
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
