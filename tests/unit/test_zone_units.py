"""Entry points without a server: names and values checked before they reach a DNS
server's configuration or an update, the delegation's records, the label of a hostname,
and custom hostnames served only once verified."""
from pathlib import Path

import pytest

from cdnaas.common.entry_points import planned
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro.zones import knot
from cdnaas.ro.zones.base import NameServer, ZoneRefused, check_zone, plan
from cdnaas.ro.zones.delegations import label_of
from cdnaas.so import hostname_checks, tls
from tests.support.sigs import sample_sig

SECRET = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI="


@pytest.mark.parametrize("zone", [
    "example", "", ".", "cdn..example", "cdn.example.;", "cdn example.net",
    'cdn.example.net"\ninclude: /etc/passwd', "*.example.net", "_x.example.net", None,
    "a" * 64 + ".net", ".".join(["abcdefghi"] * 26)])
def test_hostile_zones_are_refused(zone):
    with pytest.raises(ZoneRefused):
        check_zone(zone)


def test_a_zone_is_lower_cased_without_its_dot():
    assert check_zone("CDN.Example.NET.") == "cdn.example.net"


@pytest.mark.parametrize("folder, port, secret", [
    ("/tmp/has space", 10053, SECRET), ('/tmp/q"uote', 10053, SECRET),
    ("relative/dir", 10053, SECRET), ("/tmp/ok", 0, SECRET), ("/tmp/ok", 70000, SECRET),
    ("/tmp/ok", True, SECRET), ("/tmp/ok", 10053, "c2hvcnQ="),
    ("/tmp/ok", 10053, SECRET + "\nacl:")])
def test_the_zone_server_config_refuses_what_it_could_misread(folder, port, secret):
    with pytest.raises(ZoneRefused):
        knot.config_text(knot.ServerFiles(Path(folder) / "cdnaas-zone"), "cdn.example.net",
                         port, secret)


def test_the_zone_server_config_and_zone_file():
    files = knot.ServerFiles(Path("/var/lib/x/cdnaas-zone"))
    text = knot.config_text(files, "cdn.example.net", 10053, SECRET)
    assert "listen: 0.0.0.0@10053" in text and "domain: cdn.example.net." in text
    assert "action: update" in text and f"secret: {SECRET}" in text
    zone = knot.zone_text("cdn.example.net", 60)
    assert "$ORIGIN cdn.example.net." in zone and "SOA ns hostmaster 1 3600 600 86400 60" in zone
    with pytest.raises(ZoneRefused):
        knot.zone_text("cdn.example.net", 0)


def test_a_delegation_names_each_dns_vnf_and_its_glue():
    delegation = plan("Web.Acme", [NameServer("dns-1", ("2001:db8::1", "198.18.3.3")),
                                   NameServer("dns-0", ("198.18.2.3",))], "cdn.example.net", 60)
    assert delegation.records() == [
        ("web.acme.cdn.example.net", "NS", ["dns-0.web.acme.cdn.example.net",
                                            "dns-1.web.acme.cdn.example.net"]),
        ("dns-0.web.acme.cdn.example.net", "A", ["198.18.2.3"]),
        ("dns-1.web.acme.cdn.example.net", "A", ["198.18.3.3"]),
        ("dns-1.web.acme.cdn.example.net", "AAAA", ["2001:db8::1"])]
    with pytest.raises(ZoneRefused):
        plan("web", [NameServer("dns-0", ("198.18.2.3",))], "cdn.example.net", 0)


def test_the_planned_entry_point_names_the_name_servers_before_deployment():
    sig = ServiceInstanceGraph.from_dict(sample_sig("web", {"north": 1}))
    assert planned(sig) == {"hostname": "web.cdn.example.net", "dns_servers": [],
                            "name_servers": [{"name": "dns-1.web.cdn.example.net",
                                              "addresses": []}]}


@pytest.mark.parametrize("hostname, label", [
    ("web.acme.cdn.example.net", "web.acme"), ("WEB.acme.cdn.example.net.", "web.acme"),
    ("web.acme.cdn.example.org", None), ("cdn.example.net", None),
    ("web.acmecdn.example.net", None)])
def test_the_label_of_a_hostname_in_the_zone(monkeypatch, hostname, label):
    monkeypatch.setenv("CDNAAS_DNS_DOMAIN", "cdn.example.net")
    assert label_of(hostname) == label


def test_custom_hostnames_are_served_once_verified(monkeypatch):
    monkeypatch.setenv("CDNAAS_HOSTNAME_CHECK", "1")
    service = {"hostnames": ["a.shop.example", "b.shop.example"], "cache_rules": {"x": 1}}
    assert tls.sig_service(service) == {"cache_rules": {"x": 1}}
    view = hostname_checks.view("v1", service, "web.acme.cdn.example.net")
    assert [v["status"] for v in view] == ["pending", "pending"]
    assert view[0]["records"][0] == {"type": "CNAME", "name": "a.shop.example",
                                     "value": "web.acme.cdn.example.net"}
    assert view[0]["records"][1]["name"] == "_cdnaas.a.shop.example"
    assert view[0]["records"][1]["value"] == \
        f"cdnaas-verification={hostname_checks.token('v1', 'a.shop.example')}"
    assert hostname_checks.token("v1", "a.shop.example") != hostname_checks.token(
        "v2", "a.shop.example")
    verified = tls.record_verified(service, ["b.shop.example"])
    assert tls.sig_service(verified) == {"cache_rules": {"x": 1}, "hostnames": ["b.shop.example"]}
    # a name removed and listed again is checked again
    again = tls.record(tls.record(verified, ["a.shop.example"], None),
                       ["a.shop.example", "b.shop.example"], None)
    assert hostname_checks.active(again) == []
    monkeypatch.setenv("CDNAAS_HOSTNAME_CHECK", "0")
    assert tls.sig_service(service)["hostnames"] == ["a.shop.example", "b.shop.example"]
