"""An origin shield on OpenStack, against the mini cloud (``tests/openstack/``): one server
with a port on each region's network at ``.4`` (its legs), each region's caches fetching
from its leg there; the caches and the shield run here as their user-data says
(``tests/openstack/caches_here.py``: the mini cloud's servers boot no guest), so a miss in
one region fills the shield and the other region's miss is the shield's hit, one origin
fetch for both, and a purge empties the shield first; a new origin rebuilds the shield
before the caches; a region added gives the shield a leg there (attached to its server)
and a region removed takes it away, an update that fails in the middle leaving the
previous vCDN as it was; what an update cannot do beside a shield (add, remove or move
it) is refused before anything changes; the legs go with the vCDN.

Its tests that start no process are in tests/unit/test_openstack_shield_units.py (the unit
tier)."""
import ipaddress

import pytest

from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro.vim.base import DeploymentFailed
from cdnaas.ro.vim.openstack import cloud, plan, rebuild, servers, userdata
from cdnaas.ro.vim.pipeline import Undo
from cdnaas.vnf import subnet
from cdnaas.vnf import endpoints
from tests.openstack.caches_here import CachesHere, cache_files
from tests.openstack.fixtures import ORIGIN
from tests.system.test_openstack_driver import nothing_left, rebuilds, reconfigured, tagged
from tests.unit.test_openstack_driver_units import make_sig
from tests.unit.test_openstack_shield_units import SHIELD, shielded

# the caches and the shield run here (tests/openstack/caches_here.py)
pytestmark = pytest.mark.usefixtures("caches_here_env")


def nginx_of(admin_conn, deployment, name):
    server = admin_conn.compute.get_server(deployment.resources["servers"][name]["server_id"])
    return cache_files(server)[f"{userdata.CONF_DIR}/nginx.conf"]


def leg_in(deployment, region):
    """The shield's address on ``region``'s network."""
    return str(ipaddress.ip_network(deployment.resources["regions"][region]["cidr"])
               [subnet.SHIELD_HOST])


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
                ("tcp", endpoints.MANAGEMENT_PORT, plan.pool().with_prefixlen)}
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
    fetching from the shield. Moving the shield or dropping it is refused before anything
    changes."""
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
        for refused in (ServiceInstanceGraph.from_dict(moved), unshielded):
            with pytest.raises(DeploymentFailed, match="origin shield.*nothing was changed"):
                driver.update(updated, refused, previous=reconfigured(sig))
        deployment = updated
    finally:
        driver.terminate(deployment)
    assert nothing_left(admin_conn, sig.vcdn_id) == {}


def interfaces(admin_conn, server_id):
    """The ports attached to Nova server ``server_id``."""
    return sorted(i.port_id for i in admin_conn.compute.server_interfaces(server_id))


def test_a_region_comes_to_and_goes_from_a_shielded_vcdn(driver, admin_conn):
    """South added to a vCDN shielded in north: the shield server gains a port on south's
    network at .4 in south's shield security group, is rebuilt to listen there before
    south's cache boots, and south's cache fetches from that leg: south's miss is the
    shield's hit, one origin fetch for both regions. South removed: once its cache is
    gone the shield is rebuilt without the leg, which is detached and deleted before
    south's network goes. The RO dying there, its removal done but not recorded: restore
    makes south again and gives the shield a new leg at the same address, listened on,
    which south's cache fetches from. Nothing of the vCDN is left once it ends."""
    north = shielded({"north": 1})
    both = shielded({"north": 1, "south": 1}, north.vcdn_id)
    deployment = driver.deploy(north)
    try:
        own = deployment.resources["servers"][SHIELD]
        assert "legs" not in own and interfaces(admin_conn, own["server_id"]) == [own["port_id"]]
        reports = []
        grown = driver.update(deployment, both, lambda *r: reports.append(r), previous=north)
        steps = [step for step, _done, _total in reports]
        assert steps.index("rebuild origin shield") < steps.index("boot servers")
        entry, south = grown.resources["servers"][SHIELD], grown.resources["regions"]["south"]
        assert entry["server_id"] == own["server_id"] and sorted(entry["legs"]) == ["south"]
        leg = admin_conn.network.get_port(entry["legs"]["south"])
        assert (leg.device_id, leg.network_id, leg.fixed_ips[0]["ip_address"],
                leg.security_group_ids) == (own["server_id"], south["network_id"],
                                            leg_in(grown, "south"),
                                            [south["security_groups"]["shield"]])
        assert set(plan.tags(north.vcdn_id)) <= set(leg.tags)
        assert interfaces(admin_conn, own["server_id"]) == sorted([own["port_id"], leg.id])
        nginx = nginx_of(admin_conn, grown, SHIELD)
        assert all(f"listen {leg_in(grown, r)}:80" in nginx for r in ("north", "south"))
        assert f"server {leg_in(grown, 'south')}:80;" in nginx_of(admin_conn, grown,
                                                                  "south-cache-1")
        with CachesHere(admin_conn, grown, (ORIGIN["host"], ORIGIN["port"])) as here:
            north_cache, south_cache = here.caches
            first, _body = here.get(north_cache, "/objects/small", "10.1.0.77")
            assert (first.status, first.getheader("X-Shield-Cache-Status")) == (200, "MISS")
            second, _body = here.get(south_cache, "/objects/small", "10.2.0.77")
            assert (second.status, second.getheader("X-Cache-Status"),
                    second.getheader("X-Shield-Cache-Status")) == (200, "MISS", "HIT")
            assert here.origin.stats() == {"/objects/small": 1}

        reports = []
        shrunk = driver.update(grown, north, lambda *r: reports.append(r), previous=both)
        steps = [step for step, _done, _total in reports]
        assert steps.index("remove servers") < steps.index("rebuild origin shield") < \
            steps.index("remove regions")
        rebuilt = shrunk.resources["servers"][SHIELD]  # with its new user-data's digest
        assert rebuilt == {**{k: v for k, v in entry.items() if k != "legs"},
                           **{key: rebuilt[key] for key in (rebuild.DIGEST_KEY,
                                                            rebuild.GENERATION_KEY)}}
        assert cloud.found(admin_conn.network.find_port, leg.id) is None
        assert interfaces(admin_conn, own["server_id"]) == [own["port_id"]]
        nginx = nginx_of(admin_conn, shrunk, SHIELD)
        assert f"listen {leg_in(grown, 'south')}:80" not in nginx
        assert f"listen {leg_in(shrunk, 'north')}:80" in nginx
        assert [name for names in tagged(admin_conn, north.vcdn_id).values()
                for name in names if "south" in name] == []
        deployment = shrunk

        restored = driver.restore(grown, both)  # the RO died before recording ``shrunk``
        deployment = restored
        entry, south = restored.resources["servers"][SHIELD], restored.resources["regions"]["south"]
        again = admin_conn.network.get_port(entry["legs"]["south"])
        assert again.id != leg.id
        assert (again.device_id, again.network_id, again.fixed_ips[0]["ip_address"],
                again.security_group_ids) == (own["server_id"], south["network_id"],
                                              leg_in(grown, "south"),
                                              [south["security_groups"]["shield"]])
        assert interfaces(admin_conn, own["server_id"]) == sorted([own["port_id"], again.id])
        assert f"listen {leg_in(grown, 'south')}:80" in nginx_of(admin_conn, restored, SHIELD)
        assert f"server {leg_in(grown, 'south')}:80;" in nginx_of(admin_conn, restored,
                                                                  "south-cache-1")
    finally:
        driver.terminate(deployment)
    assert nothing_left(admin_conn, north.vcdn_id) == {}


def test_a_failed_or_interrupted_region_change_beside_a_shield_is_undone(
        driver, admin_conn, monkeypatch):
    """South's cache fails to boot, after the shield got its leg on south's network and
    was rebuilt to listen there: the shield is rebuilt back, the leg
    detached and deleted, south's network goes, the record is as it was. The RO dying at
    the same point (its undo lost) leaves the same to :meth:`restore`, which puts the
    vCDN back as recorded."""
    north = shielded({"north": 1})
    both = shielded({"north": 1, "south": 1}, north.vcdn_id)
    deployment = driver.deploy(north)

    def as_recorded():
        assert admin_conn.compute.get_server(own["server_id"]).user_data == had
        assert interfaces(admin_conn, own["server_id"]) == [own["port_id"]]
        assert tagged(admin_conn, north.vcdn_id)["ports"] == ports
        assert tagged(admin_conn, north.vcdn_id)["networks"] == [
            plan.resource_name(north.vcdn_id, "north")]

    def fails(*_args, **_kwargs):
        raise RuntimeError("south's cache does not boot")
    try:
        own = deployment.resources["servers"][SHIELD]
        had = admin_conn.compute.get_server(own["server_id"]).user_data
        ports = tagged(admin_conn, north.vcdn_id)["ports"]
        asked = rebuilds(monkeypatch)
        with monkeypatch.context() as failing:
            failing.setattr(servers, "boot", fails)  # once the shield has its leg
            with pytest.raises(DeploymentFailed, match="does not boot.*previous caches"):
                driver.update(deployment, both, previous=north)
            assert asked == [own["server_id"]] * 2  # for its leg, then back
            as_recorded()
            failing.setattr(Undo, "run", lambda self: [])  # the RO dies there
            with pytest.raises(DeploymentFailed, match="does not boot"):
                driver.update(deployment, both, previous=north)
        assert len(interfaces(admin_conn, own["server_id"])) == 2
        restored = driver.restore(deployment, north)
        assert restored.resources == deployment.resources
        assert asked == [own["server_id"]] * 4  # and for its leg again, then back
        as_recorded()
    finally:
        driver.terminate(deployment)
    assert nothing_left(admin_conn, north.vcdn_id) == {}
