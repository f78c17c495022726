"""Regions added to and removed from a live vCDN by the ``openstack`` VIM driver, against
the mini cloud (``tests/openstack/``): a new region's network, subnet, security groups,
balancer and caches; the DNS server rebuilt with the new set of regions, or booted again
in the new default region when its own goes; a removed region's servers, balancer and
network deleted; a failed change undone; a change the RO did not live to record
restored (what it made deleted, what it deleted made again).

Its tests that start no process are in tests/unit/test_openstack_regions_units.py (the unit
tier)."""
import ipaddress

import pytest

from cdnaas.ro.vim.base import DeploymentFailed, RemovalIncomplete
from cdnaas.ro.vim.openstack import balancers, cloud, plan, rebuild, userdata
from cdnaas.ro.vim.pipeline import Undo
from cdnaas.vnf import subnet
from tests.system.test_openstack_driver import (caches_of, members_of, nothing_left, servers_of,
                                                tagged, written)
from tests.unit.test_openstack_driver_units import make_sig
from tests.unit.test_openstack_regions_units import NORTH

BOTH = {"north": 1, "south": 1}
SOUTH = {"south": 1}


def dns_regions(admin_conn, deployment):
    """``{region: the balancer address its dnsmasq answers}`` of the DNS server's
    user-data, and the server's address."""
    (name,) = [v.name for v in deployment.vnfs if v.role == "dns"]
    files = written(servers_of(admin_conn, deployment)[name])
    answers = {}
    for path, text in files.items():
        if path.startswith(f"{userdata.CONF_DIR}/dnsmasq-"):
            region = path.rsplit("dnsmasq-", 1)[1].removesuffix(".conf")
            answers[region] = next(line.rsplit(",", 1)[1] for line in text.splitlines()
                                   if line.startswith("host-record="))
    return answers


def regions_in_cloud(admin_conn, vcdn_id):
    """Networks and balancers carrying the vCDN's tag, by name."""
    tag = plan.vcdn_tag(vcdn_id)
    return {"networks": sorted(n.name for n in admin_conn.network.networks(tags=tag)),
            "balancers": sorted(lb.name for lb in admin_conn.load_balancer.load_balancers(
                tags=tag))}


def assert_serves(admin_conn, deployment, sig):
    """Each of ``sig``'s regions has its network, balancer and cache members as recorded,
    the DNS answers each region with its balancer, and nothing else carries the tag."""
    regions = sorted(r.name for r in sig.regions)
    assert sorted(deployment.resources["regions"]) == regions
    assert sorted(deployment.region_endpoints) == regions
    assert members_of(admin_conn, deployment) == caches_of(deployment)
    assert dns_regions(admin_conn, deployment) == {
        r: deployment.region_endpoints[r] for r in regions}
    names = [plan.resource_name(sig.vcdn_id, r) for r in regions]
    assert regions_in_cloud(admin_conn, sig.vcdn_id) == {
        "networks": names, "balancers": [plan.resource_name(sig.vcdn_id, f"{r}-lb")
                                         for r in regions]}
    assert tagged(admin_conn, sig.vcdn_id)["servers"] == sorted(
        plan.resource_name(sig.vcdn_id, v.name) for v in sig.vnfs if v.role != "load_balancer")
    for info in deployment.resources["regions"].values():
        lb = admin_conn.load_balancer.get_load_balancer(info["lb_id"])
        assert (lb.provisioning_status, lb.vip_address) == ("ACTIVE", info["vip_address"])


def test_regions_come_and_go_and_the_dns_follows_the_default_region(driver, admin_conn):
    north = make_sig(NORTH)
    vcdn_id = north.vcdn_id
    both, south = make_sig(BOTH, vcdn_id), make_sig(SOUTH, vcdn_id)
    deployment = driver.deploy(north)
    try:
        dns_before = deployment.resources["servers"]["dns-1"]
        reports = []
        grown = driver.update(deployment, both, lambda *r: reports.append(r), previous=north)
        assert_serves(admin_conn, grown, both)
        assert ("boot servers", 1, 1) in reports and ("rebuild DNS", 1, 1) in reports
        # the DNS server stays where it was, rebuilt with both regions
        dns_after = grown.resources["servers"]["dns-1"]
        assert dns_after["server_id"] == dns_before["server_id"]
        assert dns_after[rebuild.DIGEST_KEY] != dns_before[rebuild.DIGEST_KEY]
        assert grown.entry_point.dns_servers == deployment.entry_point.dns_servers
        assert grown.resources["regions"]["north"] == deployment.resources["regions"]["north"]
        assert ipaddress.ip_address(grown.region_endpoints["south"]) in ipaddress.ip_network(
            grown.resources["regions"]["south"]["cidr"])

        # north, the default region, goes: the DNS server is booted again in south
        reports = []
        shrunk = driver.update(grown, south, lambda *r: reports.append(r), previous=both)
        assert_serves(admin_conn, shrunk, south)
        assert ("remove regions", 1, 1) in reports and ("remove servers", 2, 2) in reports
        moved = shrunk.resources["servers"]["dns-1"]
        assert moved["server_id"] != dns_after["server_id"] and moved["region"] == "south"
        south_net = ipaddress.ip_network(shrunk.resources["regions"]["south"]["cidr"])
        assert shrunk.entry_point.dns_servers == [str(south_net[subnet.DNS_HOSTS[0]])]
        assert sorted(shrunk.resources["regions"]["south"]["security_groups"]) == \
            ["cache", "dns"]
        north_info = grown.resources["regions"]["north"]
        assert cloud.found(admin_conn.network.find_network, north_info["network_id"]) is None
        assert cloud.found(admin_conn.load_balancer.find_load_balancer, north_info["lb_id"]) is None
        assert all(cloud.found(admin_conn.network.find_security_group, g) is None
                   for g in north_info["security_groups"].values())
        deployment = shrunk
    finally:
        driver.terminate(deployment)
    assert nothing_left(admin_conn, vcdn_id) == {}


def test_a_failed_region_change_is_undone(driver, admin_conn, fail_host_openstack):
    """South's zone takes no server: the update fails after south's network and balancer
    were made; they go, the DNS keeps its configuration, the record is unchanged."""
    north = make_sig(NORTH)
    deployment = driver.deploy(north)
    try:
        before = servers_of(admin_conn, deployment)
        fail_host_openstack("south-host-1")
        with pytest.raises(DeploymentFailed, match="(?i)availability zone.*previous caches"):
            driver.update(deployment, make_sig(BOTH, north.vcdn_id), previous=north)
        assert_serves(admin_conn, deployment, north)
        assert {n: s.user_data for n, s in servers_of(admin_conn, deployment).items()} == \
            {n: s.user_data for n, s in before.items()}
    finally:
        driver.terminate(deployment)
    assert nothing_left(admin_conn, north.vcdn_id) == {}


def test_what_a_done_update_could_not_delete_goes_with_the_next_update(
        driver, admin_conn, monkeypatch):
    """Someone else's port on south's network: Neutron will not delete the network (409,
    in use). The update removing south is done all the same: its deployment, north alone,
    comes with the error, the record says something is left; once the port is gone, the
    next update deletes south's network first."""
    both = make_sig(BOTH)
    north = make_sig(NORTH, both.vcdn_id)
    deployment = driver.deploy(both)
    south = deployment.resources["regions"]["south"]
    blocker = admin_conn.network.create_port(network_id=south["network_id"],
                                             name="someone-elses")
    try:
        monkeypatch.setenv("CDNAAS_OS_DELETE_TIMEOUT", "20")
        with pytest.raises(RemovalIncomplete, match="(?i)in use.*update is done") as caught:
            driver.update(deployment, north, previous=both)
        deployment = caught.value.deployment
        assert sorted(deployment.resources["regions"]) == ["north"]
        assert deployment.resources["leftovers"] is True
        assert members_of(admin_conn, deployment) == caches_of(deployment)
        assert dns_regions(admin_conn, deployment) == {
            "north": deployment.region_endpoints["north"]}
        assert regions_in_cloud(admin_conn, both.vcdn_id) == {
            "networks": [plan.resource_name(both.vcdn_id, r) for r in ("north", "south")],
            "balancers": [plan.resource_name(both.vcdn_id, "north-lb")]}
        assert cloud.found(admin_conn.network.find_network, south["network_id"]) is not None

        admin_conn.network.delete_port(blocker)
        grown = make_sig({"north": 2}, both.vcdn_id)
        reports = []
        deployment = driver.update(deployment, grown, lambda *r: reports.append(r),
                                   previous=north)
        assert_serves(admin_conn, deployment, grown)  # south's network went first
        assert "leftovers" not in deployment.resources
        steps = [step for step, _done, _total in reports]
        assert steps.index("remove VNFs the update added") < steps.index("boot caches")
    finally:
        admin_conn.network.delete_port(blocker, ignore_missing=True)
        driver.terminate(deployment)
    assert nothing_left(admin_conn, both.vcdn_id) == {}


def test_a_region_change_the_ro_did_not_record_is_restored(driver, admin_conn, monkeypatch):
    """The RO dies in two region changes (its undo lost, its new record never stored):
    adding south, dying as it registers south's cache, leaves south's network, balancer
    and server, which :meth:`restore` deletes; removing south, done to the end, leaves
    north alone, and restore makes south again as recorded (network at its prefix,
    balancer at its VIP, its cache booted again, the DNS given both regions back)."""
    north = make_sig(NORTH)
    both = make_sig(BOTH, north.vcdn_id)
    deployment = driver.deploy(north)

    def dies(*_args, **_kwargs):
        raise RuntimeError("the RO dies")
    try:
        with monkeypatch.context() as dying:
            dying.setattr(Undo, "run", lambda self: [])
            dying.setattr(balancers, "register_members", dies)
            with pytest.raises(DeploymentFailed, match="the RO dies"):
                driver.update(deployment, both, previous=north)
        names = [plan.resource_name(north.vcdn_id, n) for n in ("north", "south")]
        assert regions_in_cloud(admin_conn, north.vcdn_id)["networks"] == names
        assert plan.resource_name(north.vcdn_id, "south-cache-1") in \
            tagged(admin_conn, north.vcdn_id)["servers"]
        restored = driver.restore(deployment, north)
        assert_serves(admin_conn, restored, north)
        assert restored.resources == deployment.resources
        assert driver.restore(restored, north).resources == deployment.resources  # twice

        grown = driver.update(deployment, both, previous=north)
        driver.update(grown, north, previous=both)
        assert regions_in_cloud(admin_conn, north.vcdn_id)["networks"] == names[:1]
        restored = driver.restore(grown, both)
        assert_serves(admin_conn, restored, both)
        south_was, south = grown.resources["regions"]["south"], \
            restored.resources["regions"]["south"]
        assert south["network_id"] != south_was["network_id"]
        assert (south["cidr"], south["vip_address"]) == (south_was["cidr"],
                                                         south_was["vip_address"])
        assert restored.region_endpoints == grown.region_endpoints
        assert {v.name: v.address for v in restored.vnfs} == \
            {v.name: v.address for v in grown.vnfs}
        assert restored.resources["regions"]["north"] == grown.resources["regions"]["north"]
        deployment = restored
    finally:
        driver.terminate(deployment)
    assert nothing_left(admin_conn, north.vcdn_id) == {}
