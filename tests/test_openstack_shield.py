"""An origin shield on OpenStack, against the mini cloud (``tests/openstack/``): one server
with a port on each region's network at ``.4`` (its legs), each region's caches fetching
from its leg there; the caches and the shield run here as their user-data says
(``tests/openstack/caches_here.py``: the mini cloud's servers boot no guest), so a miss in
one region fills the shield and the other region's miss is the shield's hit, one origin
fetch for both, and a purge empties the shield first; a new origin rebuilds the shield
before the caches; what an update cannot
do beside a shield is refused before anything changes; the legs go with the vCDN."""
import ipaddress

import pytest

from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro import vnfconfig
from cdnaas.ro.vim import hosts
from cdnaas.ro.vim.base import DeploymentFailed
from cdnaas.ro.vim.openstack import plan, rebuild, userdata
from cdnaas.ro.vim.openstack.driver import OpenStackDriver
from tests.openstack.caches_here import CachesHere, cache_files
from tests.openstack.fixtures import ORIGIN
from tests.test_openstack_driver import make_sig, nothing_left, rebuilds, reconfigured

SHIELD = "shield-0"


@pytest.fixture
def driver(caches_here_env):
    return OpenStackDriver()


def shielded(caches, vcdn_id=None):
    """A SIG of ``caches`` ({region: count}) with an origin shield in its default region."""
    document = make_sig(caches, vcdn_id).to_dict()
    region = document["default_region"]
    document["vnfs"].append({"name": SHIELD, "role": "shield", "region": region,
                             "host": f"{region}-host-2", "vcpus": 1, "ram_mb": 512,
                             "image": "cdnaas-vnf"})
    return ServiceInstanceGraph.from_dict(document)


def nginx_of(admin_conn, deployment, name):
    server = admin_conn.compute.get_server(deployment.resources["servers"][name]["server_id"])
    return cache_files(server)[f"{userdata.CONF_DIR}/nginx.conf"]


def leg_in(deployment, region):
    """The shield's address on ``region``'s network."""
    return str(ipaddress.ip_network(deployment.resources["regions"][region]["cidr"])
               [hosts.SHIELD_HOST])


def test_a_shield_has_a_leg_in_each_region_and_the_caches_fetch_through_it(driver, admin_conn):
    sig = shielded({"north": 1, "south": 1})
    deployment = driver.deploy(sig)
    try:
        regions = deployment.resources["regions"]
        entry = deployment.resources["servers"][SHIELD]
        assert sorted(entry["legs"]) == ["south"]  # north is its own region
        ports = {p.network_id: p for p in admin_conn.network.ports(device_id=entry["server_id"])}
        assert sorted(ports) == sorted(info["network_id"] for info in regions.values())
        for region, info in regions.items():
            port = ports[info["network_id"]]
            assert port.fixed_ips[0]["ip_address"] == leg_in(deployment, region)
            assert port.security_group_ids == [info["security_groups"]["shield"]]
            rules = admin_conn.network.security_group_rules(
                security_group_id=info["security_groups"]["shield"], direction="ingress")
            assert {(r.protocol, r.port_range_min, r.remote_ip_prefix) for r in rules} == {
                ("tcp", 80, info["cidr"]),
                ("tcp", vnfconfig.MANAGEMENT_PORT, plan.pool().with_prefixlen)}
        [shield] = [v for v in deployment.vnfs if v.role == "shield"]
        assert (shield.address, shield.region) == (leg_in(deployment, "north"), "north")

        nginx = nginx_of(admin_conn, deployment, SHIELD)
        assert "server 192.0.2.10:8080;" in nginx and "X-Shield-Cache-Status" in nginx
        assert all(f"listen {leg_in(deployment, r)}:80" in nginx for r in regions)
        for cache in (v for v in deployment.vnfs if v.role == "cache"):
            nginx = nginx_of(admin_conn, deployment, cache.name)
            assert f"server {leg_in(deployment, cache.region)}:80;" in nginx, cache.name
            assert "server 192.0.2.10:8080;" not in nginx  # the origin is its Host only

        with CachesHere(admin_conn, deployment, (ORIGIN["host"], ORIGIN["port"])) as here:
            north, south = here.caches
            first, _body = here.get(north, "/objects/small", "10.1.0.77")
            assert (first.status, first.getheader("X-Cache-Status"),
                    first.getheader("X-Shield-Cache-Status")) == (200, "MISS", "MISS")
            second, _body = here.get(south, "/objects/small", "10.2.0.77")
            assert (second.status, second.getheader("X-Cache-Status"),
                    second.getheader("X-Shield-Cache-Status")) == (200, "MISS", "HIT")
            assert second.getheader("X-Shield-Served-By") == SHIELD
            assert here.origin.stats() == {"/objects/small": 1}
            # a purge empties the shield first (at its own address), then the caches
            results = driver.invalidate(deployment, ["/objects/small"], [])
            assert [(r.name, r.ok, r.done) for r in results] == [
                (SHIELD, True, 1), (north.name, True, 1), (south.name, True, 1)]
            again, _body = here.get(south, "/objects/small", "10.2.0.77")
            assert (again.getheader("X-Cache-Status"),
                    again.getheader("X-Shield-Cache-Status")) == ("MISS", "MISS")
            assert here.origin.stats() == {"/objects/small": 2}
    finally:
        driver.terminate(deployment)
    assert nothing_left(admin_conn, sig.vcdn_id) == {}


def test_a_new_origin_rebuilds_the_shield_first_and_regions_stay_beside_it(
        driver, admin_conn, monkeypatch):
    """A new origin: the shield is rebuilt (before the caches) with it; the caches keep
    fetching from the shield. Moving the shield, dropping it, or changing the regions
    of a vCDN with one is refused before anything changes."""
    sig = shielded({"north": 2, "south": 1})
    deployment = driver.deploy(sig)
    try:
        asked, reports = rebuilds(monkeypatch), []
        updated = driver.update(deployment, reconfigured(sig), lambda *r: reports.append(r),
                                previous=sig)
        steps = [step for step, _done, _total in reports]
        assert steps.index("rebuild origin shield") < steps.index("rebuild caches")
        shield_id = deployment.resources["servers"][SHIELD]["server_id"]
        assert asked[0] == shield_id and len(asked) == 5  # the shield, 3 caches, the DNS
        nginx = nginx_of(admin_conn, updated, SHIELD)
        assert "server 192.0.2.20:8081;" in nginx
        assert updated.resources["servers"][SHIELD][rebuild.DIGEST_KEY] != \
            deployment.resources["servers"][SHIELD][rebuild.DIGEST_KEY]
        assert updated.resources["servers"][SHIELD]["legs"] == \
            deployment.resources["servers"][SHIELD]["legs"]
        for name in ("north-cache-1", "south-cache-1"):
            region = name.split("-")[0]
            assert f"server {leg_in(updated, region)}:80;" in nginx_of(admin_conn, updated, name)

        moved = shielded({"north": 2, "south": 1}, sig.vcdn_id).to_dict()
        next(v for v in moved["vnfs"] if v["role"] == "shield").update(region="south",
                                                                       host="south-host-2")
        unshielded = make_sig({"north": 2, "south": 1}, sig.vcdn_id)
        for refused in (ServiceInstanceGraph.from_dict(moved), unshielded,
                        shielded({"north": 2}, sig.vcdn_id),
                        shielded({"north": 2, "south": 1, "west": 1}, sig.vcdn_id)):
            with pytest.raises(DeploymentFailed, match="origin shield.*nothing was changed"):
                driver.update(updated, refused, previous=reconfigured(sig))
        deployment = updated
    finally:
        driver.terminate(deployment)
    assert nothing_left(admin_conn, sig.vcdn_id) == {}


def test_a_shield_across_openstack_regions_is_refused_before_anything():
    document = shielded({"north": 1, "south": 1}).to_dict()
    document["regions"][1]["vim_region"] = "RegionTwo"
    with pytest.raises(DeploymentFailed, match="OpenStack region.*nothing was created"):
        OpenStackDriver().deploy(ServiceInstanceGraph.from_dict(document))
