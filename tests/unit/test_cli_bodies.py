"""The request bodies both CLIs build (:mod:`cdnaas.cli.bodies`), the catalog's URL check
and the OSC plugin's transport over a keystoneauth session, in-process."""
import datetime as dt

import click
import pytest

from cdnaas.cli import bodies, catalog
from cdnaas.osc.client import KeystoneTransport

START = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)


def test_a_request_gives_each_region_without_quality_the_default_and_a_lease_from_hours():
    body = bodies.vcdn_request("news", "static", "http://o.example",
                               [bodies.parse_region("eu-west:10"),
                                bodies.parse_region("us-east:5:p95=200")],
                               min_mos=4.1, lease_start=START, lease_hours=1.5)
    assert body["regions"] == [
        {"name": "eu-west", "demand": 10, "quality": {"min_mos": 4.1}},
        {"name": "us-east", "demand": 5,
         "quality": {"response_time": {"percentile": 95.0, "max_ms": 200.0}}}]
    assert body["lease"] == {"start": "2030-01-01T00:00:00Z", "end": "2030-01-01T01:30:00Z"}


@pytest.mark.parametrize("kwargs, message", [
    ({"lease_hours": 1, "lease_end": START}, "exactly one of --lease-end or --lease-hours"),
    ({}, "exactly one of --lease-end or --lease-hours"),
    ({"lease_start": START, "lease_end": START}, "--lease-end must come after"),
    ({"lease_hours": 1, "twice": True}, "each region may be named only once"),
])
def test_an_inconsistent_request_says_what_to_fix(kwargs, message):
    regions = [{"name": "eu-west", "demand": 1}] * (2 if kwargs.pop("twice", False) else 1)
    with pytest.raises(ValueError, match=message):
        bodies.vcdn_request("news", "static", "http://o.example", regions, **kwargs)


def test_a_change_holds_only_what_is_given():
    assert bodies.vcdn_change() == {}
    assert bodies.vcdn_change(hostnames=[]) == {"hostnames": []}
    assert bodies.vcdn_change([{"name": "eu-west", "demand": 2}], [{"name": "us-east",
                                                                    "demand": 1}],
                              ["doomed"], lease_end=START) == {
        "regions": [{"name": "eu-west", "demand": 2},
                    {"name": "us-east", "demand": 1, "quality": {"min_mos": 3.6}}],
        "remove_regions": ["doomed"], "lease": {"end": "2030-01-01T00:00:00Z"}}


@pytest.mark.parametrize("url", ["ftp://cdn.example.net", "cdn.example.net",
                                 "https://cdn.example.net/api/v1", "https://cdn.example.net/api/v1/",
                                 "https://cdn.example.net/?x=1"])
def test_the_catalog_takes_only_the_api_root_url(url):
    with pytest.raises(click.BadParameter):
        catalog.root_url(url, "--public-url")


def test_the_catalog_url_loses_its_trailing_slash():
    assert catalog.root_url("https://cdn.example.net:8700/", "--public-url") == \
        "https://cdn.example.net:8700"
    assert catalog.root_url("https://example.net/cdn", "--public-url") == \
        "https://example.net/cdn"


def test_the_transport_hands_error_statuses_back_and_drops_empty_arguments():
    calls = []

    class Session:  # keystoneauth1.session.Session.request's signature
        def request(self, url, method, **kwargs):
            calls.append((url, method, kwargs))
            return "response"

    transport = KeystoneTransport(Session())
    assert transport.request("PATCH", "http://api/x", json={"a": 1}, headers=None,
                             params=None, timeout=30) == "response"
    transport.get("http://api/y", params={"limit": 5})
    assert calls == [("http://api/x", "PATCH", {"raise_exc": False, "json": {"a": 1},
                                                 "timeout": 30}),
                     ("http://api/y", "GET", {"raise_exc": False, "params": {"limit": 5}})]
