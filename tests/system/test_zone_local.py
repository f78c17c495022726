"""Entry points that never move, on the embedded default: the stack's local zone server
(Knot DNS) delegates each vCDN's name to its DNS VNFs, and a recursive resolver (Debian's
unbound) in a region's client namespace follows that delegation to the region's
balancer, before, during and after regions are removed and added. Real nginx, dnsmasq,
knotd and unbound (root only)."""
import ipaddress
import os
import time

import pytest

from cdnaas.ro.vim.local import clients, network
from tests.support.api import populate, vcdn_body
from tests.support.stack import running_stack
from tests.support.zones import (CLIENT, Resolving, add_record, assert_answered_throughout,
                                 assert_names_kept, balancers, completed, local_zone_server,
                                 referral, region_resolver)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")

ZONE = "cdn.example.net"
#: the customer's own zone, where its hostname's CNAME appears (a second Knot server)
CUSTOMER_ZONE = "customer.example"


@pytest.fixture(scope="module")
def customer_zone(tmp_path_factory):
    """``(state dir, port)`` of the customer's zone server."""
    folder = tmp_path_factory.mktemp("customer-zone")
    with local_zone_server(folder, CUSTOMER_ZONE) as port:
        yield folder, port


@pytest.fixture(scope="module")
def stack(tmp_path_factory, customer_zone):
    tmp = tmp_path_factory.mktemp("zone-stack")
    extra = {"CDNAAS_VIM_DRIVER": "local", "CDNAAS_ZONE_PUBLISHER": "local",
             "CDNAAS_DNS_DOMAIN": ZONE, "CDNAAS_HOSTNAME_CHECK": "1",
             "CDNAAS_HOSTNAME_RESOLVER": f"127.0.0.1:{customer_zone[1]}",
             "CDNAAS_HOSTNAME_CHECK_INTERVAL": "0.5"}
    with running_stack(None, tmp, extra_env=extra) as running:
        yield populate(running)


def _resolver(stack, vcdn_id, region, folder):
    """A client of ``region`` with its recursive resolver, asking the stack's zone server."""
    return region_resolver(vcdn_id, region, folder, ZONE, stack.env["CDNAAS_LOCAL_ZONE_PORT"])


def test_the_name_answers_through_the_delegation_while_regions_go_and_come(
        stack, origin, tmp_path):
    body = vcdn_body("steady", (("eu-west", 10), ("us-east", 10)),
                     origin=f"http://127.0.0.1:{origin.server_address[1]}")
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
    name = f"steady.acme.{ZONE}"
    planned = accepted["vcdn"]["entry_point"]
    assert planned["hostname"] == name
    assert [ns["name"] for ns in planned["name_servers"]] == [f"dns-0.{name}"]
    vcdn = completed(stack, accepted)
    entry = vcdn["entry_point"]
    assert entry["hostname"] == name
    assert entry["name_servers"] == [{"name": f"dns-0.{name}",
                                      "addresses": sorted(entry["dns_servers"])}]
    by_region = balancers(vcdn)
    for region in ("eu-west", "us-east"):
        viewer, resolver = _resolver(stack, vcdn["id"], region, tmp_path)
        with viewer as client, resolver(client):
            assert client.resolve(client.address, name) == [by_region[region]]

    viewer, resolver = _resolver(stack, vcdn["id"], "us-east", tmp_path)
    with viewer as client, resolver(client), Resolving(client, name) as resolving:
        shrunk = completed(stack, stack.acme.ok("PATCH", f"/vcdns/{vcdn['id']}", 202,
                                            json={"remove_regions": ["eu-west"]}))
        grown = completed(stack, stack.acme.ok("PATCH", f"/vcdns/{vcdn['id']}", 202, json={
            "regions": [{"name": "eu-west", "demand": 10, "quality": {"min_mos": 4.0}}]}))
    assert_answered_throughout(resolving.answers, by_region["us-east"])
    # the same name and name server names throughout; only the glue followed the VNF
    assert_names_kept((shrunk, grown), name)
    assert shrunk["entry_point"]["name_servers"][0]["addresses"] == \
        sorted(shrunk["entry_point"]["dns_servers"])
    assert len(grown["entry_point"]["name_servers"][0]["addresses"]) == 2
    # the region added back is answered with its own (new) balancer through the delegation
    viewer, resolver = _resolver(stack, vcdn["id"], "eu-west", tmp_path / "again")
    with viewer as client, resolver(client):
        assert client.resolve(client.address, name) == [balancers(grown)["eu-west"]]

    ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn['id']}", 202)
    assert stack.acme.wait(ended["operation"]["id"], 120)["state"] == "COMPLETED"
    assert referral(("127.0.0.1", int(stack.env["CDNAAS_LOCAL_ZONE_PORT"])), name)[1] == {}


def test_a_client_asking_again_from_the_same_port_keeps_its_region_while_others_change(
        stack, origin):
    """The kernel sends a UDP flow on to the port its first query was steered to for 30 s
    after its last packet: a region's dnsmasq keeps its port while others go and come,
    or a client asking again from the same port would get another region's balancer."""
    body = vcdn_body("ports", (("eu-west", 10), ("us-east", 10)),
                     origin=f"http://127.0.0.1:{origin.server_address[1]}")
    vcdn = completed(stack, stack.acme.ok("POST", "/vcdns", 202, json=body))
    with clients.client(vcdn["id"], "us-east", CLIENT["us-east"]) as client:
        server = _leg_in(vcdn, "us-east")
        assert client.resolve(server, vcdn["entry_point"]["hostname"], source_port=40053) \
            == [balancers(vcdn)["us-east"]]
        changed = completed(stack, stack.acme.ok("PATCH", f"/vcdns/{vcdn['id']}", 202, json={
            "remove_regions": ["eu-west"],
            "regions": [{"name": "doomed", "demand": 10, "quality": {"min_mos": 4.0}}]}))
        assert [r["name"] for r in changed["regions"]] == ["us-east", "doomed"]
        assert _leg_in(changed, "us-east") == server
        assert client.resolve(server, vcdn["entry_point"]["hostname"], source_port=40053) \
            == [balancers(changed)["us-east"]]
    ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn['id']}", 202)
    assert stack.acme.wait(ended["operation"]["id"], 120)["state"] == "COMPLETED"


def _leg_in(vcdn, region):
    """The DNS VNF's address on ``region``'s bridge."""
    subnet = ipaddress.ip_network(network.find_bridge(vcdn["id"], region)[1], strict=False)
    return next(a for a in vcdn["entry_point"]["dns_servers"]
                if ipaddress.ip_address(a) in subnet)


def _hostname_status(stack, vcdn_id):
    return {h["hostname"]: h for h in stack.acme.ok("GET", f"/vcdns/{vcdn_id}")["custom_hostnames"]}


def test_a_custom_hostname_is_served_once_its_cname_appears(stack, origin, customer_zone):
    www = f"www.{CUSTOMER_ZONE}"
    body = vcdn_body("custom", (("us-east", 10),), hostnames=[www],
                     origin=f"http://127.0.0.1:{origin.server_address[1]}")
    vcdn = completed(stack, stack.acme.ok("POST", "/vcdns", 202, json=body))
    entry = vcdn["entry_point"]["hostname"]
    pending = _hostname_status(stack, vcdn["id"])[www]
    assert pending["status"] == "pending"
    assert {"type": "CNAME", "name": www, "value": entry} in pending["records"]
    assert any(r["type"] == "TXT" and r["name"] == f"_cdnaas.{www}" for r in pending["records"])
    balancer = balancers(vcdn)["us-east"]
    with clients.client(vcdn["id"], "us-east", CLIENT["us-east"]) as client:
        server = vcdn["entry_point"]["dns_servers"][0]
        assert client.resolve(server, www) == []  # not served while pending
        add_record(*customer_zone, CUSTOMER_ZONE, www, "CNAME", f"{entry}.")
        deadline = time.monotonic() + 120
        while _hostname_status(stack, vcdn["id"])[www]["status"] != "active":
            assert time.monotonic() < deadline, _hostname_status(stack, vcdn["id"])
            time.sleep(0.5)
        assert _hostname_status(stack, vcdn["id"])[www] == {"hostname": www, "status": "active",
                                                            "records": []}
        # the update SO started serves it: the DNS VNF answers the name now
        deadline = time.monotonic() + 300
        while client.resolve(server, www) != [balancer]:
            assert time.monotonic() < deadline, stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")
            time.sleep(1)
        while stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")["state"] != "ACTIVE":
            assert time.monotonic() < deadline
            time.sleep(1)
    ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn['id']}", 202)
    assert stack.acme.wait(ended["operation"]["id"], 120)["state"] == "COMPLETED"
