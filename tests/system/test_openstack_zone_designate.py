"""Entry points in Designate: a stack on the local driver (real nginx, dnsmasq) whose RO
publishes each vCDN's delegation with the ``designate`` publisher into the mini cloud's
Designate, which pushes it to its BIND; a recursive resolver (Debian's unbound) in each
region's client namespace follows BIND's delegation to the vCDN's DNS VNF and gets its
region's balancer, for the entry point and for the customer's CNAME to it (a zone of its
own in Designate), before, during and after regions are removed and added (root only)."""
import os
import time

import pytest

from tests.openstack.fixtures import BIND
from tests.support.api import populate, vcdn_body
from tests.support.stack import running_stack
from tests.support.zones import (Resolving, assert_answered_throughout, assert_names_kept,
                                 balancers, completed, referral, region_resolver)

#: Keystone and Designate only, each test with projects, regions or zones of its own
pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root"),
              pytest.mark.minicloud_services]

#: the resolvers send every name below it to BIND (the operator's and the customer's zone;
#: not below ``test.``, which unbound answers itself, RFC 6761)
PARENT = "minicloud.example"


@pytest.fixture(scope="module")
def customer_zone(minicloud):
    """``(connection, zone)``: the customer's own zone in Designate, deleted after."""
    from openstack import config as os_config
    from openstack import connection
    conn = connection.Connection(config=os_config.OpenStackConfig(
        config_files=[str(minicloud)]).get_one("minicloud"))
    zone = conn.dns.create_zone(name=f"shop{os.getpid()}.{PARENT}.",
                                email=f"hostmaster@shop.{PARENT}", ttl=60)
    yield conn, zone
    conn.dns.delete_zone(zone, ignore_missing=True)
    conn.close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory, minicloud, designate_zone):
    tmp = tmp_path_factory.mktemp("designate-stack")
    extra = {"CDNAAS_VIM_DRIVER": "local", "CDNAAS_ZONE_PUBLISHER": "designate",
             "CDNAAS_DNS_DOMAIN": designate_zone, "CDNAAS_DESIGNATE_CLOUD": "minicloud",
             "OS_CLIENT_CONFIG_FILE": str(minicloud), "CDNAAS_OS_POLL_INTERVAL": "0.25",
             "CDNAAS_HOSTNAME_CHECK": "1", "CDNAAS_HOSTNAME_CHECK_INTERVAL": "0.5",
             "CDNAAS_HOSTNAME_RESOLVER": f"{BIND[0]}:{BIND[1]}"}
    with running_stack(None, tmp, extra_env=extra) as running:
        yield populate(running)


def _resolver(vcdn_id, region, folder):
    """A client of ``region`` and its recursive resolver asking BIND (at the region
    bridge's gateway: BIND listens on every address of this machine)."""
    return region_resolver(vcdn_id, region, folder, PARENT, BIND[1])


def _served(stack, vcdn_id, hostname, deadline):
    while {h["hostname"]: h["status"] for h in stack.acme.ok(
            "GET", f"/vcdns/{vcdn_id}")["custom_hostnames"]}.get(hostname) != "active" \
            or stack.acme.ok("GET", f"/vcdns/{vcdn_id}")["state"] != "ACTIVE":
        assert time.monotonic() < deadline, stack.acme.ok("GET", f"/vcdns/{vcdn_id}")
        time.sleep(1)


def test_entry_point_and_cname_answer_through_designate_while_regions_go_and_come(
        stack, origin, customer_zone, designate_zone, tmp_path):
    conn, zone = customer_zone
    www = f"www.{zone.name.rstrip('.')}"
    name = f"steady.acme.{designate_zone}"
    conn.dns.create_recordset(zone, name=f"{www}.", type="CNAME", records=[f"{name}."], ttl=1)
    body = vcdn_body("steady", (("eu-west", 10), ("us-east", 10)), hostnames=[www],
                     origin=f"http://127.0.0.1:{origin.server_address[1]}")
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
    assert accepted["vcdn"]["entry_point"]["hostname"] == name
    vcdn = completed(stack, accepted)
    assert [ns["name"] for ns in vcdn["entry_point"]["name_servers"]] == [f"dns-0.{name}"]
    assert referral(BIND, name)[1] == {f"dns-0.{name}": sorted(vcdn["entry_point"]["dns_servers"])}
    _served(stack, vcdn["id"], www, time.monotonic() + 300)  # SO saw the CNAME at BIND
    by_region = balancers(vcdn)
    for region in ("eu-west", "us-east"):
        viewer, resolver = _resolver(vcdn["id"], region, tmp_path)
        with viewer as client, resolver(client):
            assert client.resolve(client.address, name) == [by_region[region]]
            assert client.resolve(client.address, www) == [by_region[region]]

    viewer, resolver = _resolver(vcdn["id"], "us-east", tmp_path / "loop")
    with viewer as client, resolver(client), Resolving(client, name) as by_name, \
            Resolving(client, www) as by_cname:
        shrunk = completed(stack, stack.acme.ok("PATCH", f"/vcdns/{vcdn['id']}", 202,
                                            json={"remove_regions": ["eu-west"]}))
        assert referral(BIND, name)[1] == {
            f"dns-0.{name}": sorted(shrunk["entry_point"]["dns_servers"])}
        grown = completed(stack, stack.acme.ok("PATCH", f"/vcdns/{vcdn['id']}", 202, json={
            "regions": [{"name": "eu-west", "demand": 10, "quality": {"min_mos": 4.0}}]}))
    for answers in (by_name.answers, by_cname.answers):
        assert_answered_throughout(answers, by_region["us-east"])
    assert_names_kept((shrunk, grown), name)
    assert referral(BIND, name)[1] == {f"dns-0.{name}": sorted(grown["entry_point"]["dns_servers"])}
    viewer, resolver = _resolver(vcdn["id"], "eu-west", tmp_path / "again")
    with viewer as client, resolver(client):
        assert client.resolve(client.address, name) == [balancers(grown)["eu-west"]]
        assert client.resolve(client.address, www) == [balancers(grown)["eu-west"]]

    ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn['id']}", 202)
    assert stack.acme.wait(ended["operation"]["id"], 180)["state"] == "COMPLETED"
    assert referral(BIND, name)[1] == {}
