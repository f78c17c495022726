"""The ``openstack`` VIM driver against a real mini OpenStack (``tests/openstack/``).

The session fixture starts keystone, glance, placement, nova (four fake compute
hosts, two in each of the availability zones ``north-az`` and ``south-az``), neutron and octavia
on loopback, installing what is missing (a few minutes the first time), and
stops them at the end. The driver contract runs on it as the ``[openstack]``
cases of ``tests/system/test_vim_contract.py``; here is what only a cloud shows: zones,
flavors, user-data, networks, ports, security groups, balancers and their
members, scaling, a new origin, cache rules and names by rolling rebuilds (undone, and restored
after an interruption), teardown by tag, a quota refusal mid-deployment rolled back,
servers on their planned hosts (or, where Nova's policy refuses, in their zone with
the difference recorded). The VNF image in qemu is `tests/system/test_vnf_image.py`.

Its tests that start no process are in tests/unit/test_openstack_driver_units.py (the unit
tier)."""
import base64
import dataclasses
import ipaddress
import uuid

import pytest
import yaml

from cdnaas.common import caching
from cdnaas.common.sig import Origin, ServiceInstanceGraph
from cdnaas.ro.vim.base import DeploymentFailed, VimError
from cdnaas.ro.vim.openstack import cloud, placement, plan, rebuild, userdata
from cdnaas.ro.vim.openstack.driver import OpenStackDriver
from cdnaas.ro.vim.pipeline import Undo
from tests.openstack import configs
from tests.openstack.caches_here import CachesHere
from tests.openstack.fixtures import ORIGIN
from tests.openstack.generator_here import UNIT, GeneratorsHere, exec_start, generator_files
from tests.support.sigs import sample_sig
from tests.unit.test_openstack_driver_units import make_sig


#: the SIGs' hosts (tests/support/sigs.py) as the mini cloud's compute hosts
HOSTS = "north-host-1=mc-north-1,north-host-2=mc-north-2,south-host-1=mc-south-1," \
    "south-host-2=mc-south-2"
ZONE_HOSTS = {zone: {h for h, z in configs.COMPUTE_HOSTS if z == zone}
              for _h, zone in configs.COMPUTE_HOSTS}
POLICY_REFUSALS = {
    placement.HOST: "403 Policy doesn't allow compute:servers:create:requested_destination "
                    "to be performed.",
    placement.FORCED: "403 Policy doesn't allow os_compute_api:servers:create:forced_host to "
                      "be performed."}


def tagged(admin_conn, vcdn_id):
    """Every resource carrying the vCDN's tag, by kind (names)."""
    tag = plan.vcdn_tag(vcdn_id)
    return {
        "servers": sorted(s.name for s in admin_conn.compute.servers(all_projects=True, tags=tag)),
        "ports": sorted(p.name for p in admin_conn.network.ports(tags=tag)),
        "networks": sorted(n.name for n in admin_conn.network.networks(tags=tag)),
        "subnets": sorted(n.name for n in admin_conn.network.subnets(tags=tag)),
        "security_groups": sorted(g.name for g in admin_conn.network.security_groups(tags=tag)),
        "load_balancers": sorted(lb.name for lb in admin_conn.load_balancer.load_balancers(
            tags=tag)),
    }


def nothing_left(admin_conn, vcdn_id):
    left = tagged(admin_conn, vcdn_id)
    # also by name, in case a tag was never set
    prefix = plan.resource_name(vcdn_id, "")
    left["by_name"] = sorted(
        [s.name for s in admin_conn.compute.servers(all_projects=True)
         if s.name.startswith(prefix)]
        + [n.name for n in admin_conn.network.networks() if (n.name or "").startswith(prefix)]
        + [lb.name for lb in admin_conn.load_balancer.load_balancers()
           if (lb.name or "").startswith(prefix)])
    return {kind: names for kind, names in left.items() if names}


def test_two_regions_measure_scale_and_terminate(driver, admin_conn, minicloud_sql, monkeypatch):
    sig = make_sig({"north": 2, "south": 2})
    reports = []
    deployment = driver.deploy(sig, lambda *report: reports.append(report))
    try:
        records = deployment.resources
        by_name = {v.name: v for v in deployment.vnfs}
        servers = {s.name: admin_conn.compute.get_server(s.id) for s in
                   admin_conn.compute.servers(all_projects=True,
                                              tags=plan.vcdn_tag(sig.vcdn_id))}
        # servers ACTIVE, in their region's zone, with the smallest fitting flavor
        for vnf in sig.vnfs_in(role="cache") + sig.vnfs_in(role="dns"):
            server = servers[plan.resource_name(sig.vcdn_id, vnf.name)]
            assert server.status == "ACTIVE"
            assert server.availability_zone == sig.region(vnf.region).zone
            assert server.compute_host in ZONE_HOSTS[server.availability_zone]
            # a member may neither ask for a host nor see it: the zone, refusals recorded
            assert records["servers"][vnf.name]["placement"] == {
                "planned": vnf.host, "compute_host": vnf.host, "way": placement.ZONE,
                "refused": POLICY_REFUSALS, "actual": None, "as_planned": None}
            assert server.flavor.name == {2: "m1.medium", 1: "m1.small"}[vnf.vcpus]
            assert set(plan.tags(sig.vcdn_id)) <= set(server.tags)
            user_data = base64.b64decode(server.user_data).decode()
            assert user_data.startswith("#cloud-config")
            files = {f["path"]: f["content"] for f in yaml.safe_load(user_data)["write_files"]}
            if vnf.role == "cache":
                nginx = files[f"{userdata.CONF_DIR}/nginx.conf"]
                assert f"listen {by_name[vnf.name].address}:80" in nginx
                assert "server 192.0.2.10:8080;" in nginx
                assert f"X-Served-By {vnf.name}" in nginx
            else:  # one dnsmasq per region answering its balancer, steering by prefix
                for region in sig.regions:
                    lb = deployment.region_endpoints[region.name]
                    conf = files[f"{userdata.CONF_DIR}/dnsmasq-{region.name}.conf"]
                    assert f"host-record={sig.hostname},{lb}" in conf
                assert "10.2.0.0/16 udp dport 53 redirect" in files[
                    f"{userdata.CONF_DIR}/steering.nft"]
        # one network, subnet and load balancer per region; ports with RO's addresses
        for region in sig.regions:
            info = records["regions"][region.name]
            subnet = admin_conn.network.get_subnet(info["subnet_id"])
            assert subnet.cidr == info["cidr"] and subnet.network_id == info["network_id"]
            ports = {p.name: p for p in admin_conn.network.ports(network_id=info["network_id"],
                                                                   tags=plan.vcdn_tag(sig.vcdn_id))}
            for vnf in sig.vnfs_in(region.name):
                if vnf.role == "load_balancer":
                    continue
                port = ports[plan.resource_name(sig.vcdn_id, vnf.name)]
                assert port.fixed_ips[0]["ip_address"] == by_name[vnf.name].address
                assert port.status == "ACTIVE"
                assert port.security_group_ids == [info["security_groups"][vnf.role]]
            # security groups open only what each role serves
            for role, group_id in info["security_groups"].items():
                rules = {(r.protocol, r.port_range_min, r.remote_ip_prefix)
                         for r in admin_conn.network.security_group_rules(
                             security_group_id=group_id, direction="ingress")}
                assert rules == ({("tcp", 80, info["cidr"])} if role == "cache" else
                                 {("udp", 53, "0.0.0.0/0"), ("tcp", 53, "0.0.0.0/0")})
            lb = admin_conn.load_balancer.get_load_balancer(info["lb_id"])
            assert lb.provisioning_status == "ACTIVE"
            assert lb.vip_address == deployment.region_endpoints[region.name] == \
                by_name[f"{region.name}-lb"].address
            members = list(admin_conn.load_balancer.members(info["pool_id"]))
            assert sorted(m.address for m in members) == sorted(
                by_name[c.name].address for c in sig.vnfs_in(region.name, "cache"))
            assert all(m.provisioning_status == "ACTIVE" for m in members)
        steps = {step for step, _done, _total in reports}
        assert {"create networks", "boot servers", "register members"} <= steps

        # load figures: a balancer provider reports each listener's figures to Octavia,
        # which keeps them under the listener's id (the noop provider reports none)
        for region, connections in (("north", 42), ("south", 7)):
            listener = admin_conn.load_balancer.get_load_balancer(
                records["regions"][region]["lb_id"]).listeners[0]["id"]
            minicloud_sql(
                "REPLACE INTO octavia.listener_statistics (listener_id, amphora_id, bytes_in, "
                "bytes_out, active_connections, total_connections, request_errors) VALUES "
                f"('{listener}', '{listener}', 1000, 50000, {connections}, 300, 0)")
        figures = {m.name: m for m in driver.metrics(deployment)}
        assert list(figures) == [v.name for v in deployment.vnfs]
        assert (figures["north-lb"].active_connections, figures["south-lb"].active_connections,
                figures["north-lb"].requests) == (42, 7, None)  # Octavia counts no requests
        # Nova shows diagnostics to admins only: as a member, CPU time is not known,
        # and once refused it is not asked again
        assert figures["north-cache-1"].cpu_seconds is None
        asked = driver.cloud.calls[("compute", "GET")]
        assert driver.metrics(deployment)[0].name == deployment.vnfs[0].name
        assert driver.cloud.calls[("compute", "GET")] == asked
        with monkeypatch.context() as admin:
            admin.setenv("OS_CLOUD", "minicloud-admin")
            figures = {m.name: m for m in driver.metrics(deployment)}
        for vnf in sig.vnfs_in(role="cache") + sig.vnfs_in(role="dns"):
            assert figures[vnf.name].cpu_seconds == 17.3  # the fake hypervisor's vCPU time
            assert figures[vnf.name].active_connections is None

        # scale out north, in south: servers and pool members follow
        scaled = make_sig({"north": 3, "south": 1}, sig.vcdn_id)
        updated = driver.update(deployment, scaled)
        deployment = updated
        for region, count in (("north", 3), ("south", 1)):
            info = updated.resources["regions"][region]
            members = sorted(m.address for m in admin_conn.load_balancer.members(info["pool_id"]))
            assert members == sorted(v.address for v in updated.vnfs
                                     if v.region == region and v.role == "cache")
            assert len(members) == count
        names = tagged(admin_conn, sig.vcdn_id)["servers"]
        assert plan.resource_name(sig.vcdn_id, "north-cache-3") in names
        assert plan.resource_name(sig.vcdn_id, "south-cache-2") not in names
        assert len(names) == 5  # 4 caches + DNS
    finally:
        driver.terminate(deployment)
    assert nothing_left(admin_conn, sig.vcdn_id) == {}
    driver.terminate(deployment)  # gone already: still success


# --- a new origin, cache rules or names: rolling rebuilds ---------------------------------

NEW_ORIGIN = Origin("http", "192.0.2.20", 8081)
NEW_NAME = "cdn.customer.example"
OTHER_NAME = "video.customer.example"


def reconfigured(sig):
    """``sig`` with a new origin, new cache rules and one more served name."""
    return dataclasses.replace(sig, origin=NEW_ORIGIN, service={
        "cache_rules": {**caching.DEFAULTS, "query_string": "ignore"}, "hostnames": [NEW_NAME]})


def servers_of(admin_conn, deployment):
    """``{VNF name: server}`` of the recorded servers, as Nova's admin sees them (user-data,
    compute host)."""
    return {name: admin_conn.compute.get_server(entry["server_id"])
            for name, entry in deployment.resources["servers"].items()}


def user_data(server):
    return base64.b64decode(server.user_data).decode()


def written(server):
    """The files the server's user-data writes: ``{path: content}``."""
    return written_by(user_data(server))


def written_by(text):
    """The files cloud-init user-data ``text`` writes: ``{path: content}``."""
    return {f["path"]: f["content"] for f in yaml.safe_load(text)["write_files"]}


def members_of(admin_conn, deployment):
    """``{region: sorted member addresses}`` of each region's HTTP pool (all ACTIVE)."""
    found = {}
    for region, info in deployment.resources["regions"].items():
        members = list(admin_conn.load_balancer.members(info["pool_id"]))
        assert all(m.provisioning_status == "ACTIVE" for m in members), region
        found[region] = sorted(m.address for m in members)
    return found


def caches_of(deployment):
    found = {}
    for vnf in deployment.vnfs:
        if vnf.role == "cache":
            found.setdefault(vnf.region, []).append(vnf.address)
    return {region: sorted(addresses) for region, addresses in found.items()}


def batches(monkeypatch):
    """Record every batch member update: a list of (pool id, member addresses)."""
    calls, real = [], cloud.batch_update_members

    def recording(conn, pool_id, members):
        calls.append((pool_id, sorted(m["address"] for m in members)))
        real(conn, pool_id, members)
    monkeypatch.setattr(cloud, "batch_update_members", recording)
    return calls


def boots(monkeypatch):
    """Record the servers created: ``{name: user-data}``."""
    from openstack.compute.v2 import _proxy
    created, real = {}, _proxy.Proxy.create_server

    def recording(self, **attrs):
        created[attrs["name"]] = base64.b64decode(attrs["user_data"]).decode()
        return real(self, **attrs)
    monkeypatch.setattr(_proxy.Proxy, "create_server", recording)
    return created


def rebuilds(monkeypatch):
    """Record the ids of the servers Nova is asked to rebuild."""
    from openstack.compute.v2 import _proxy
    asked, real = [], _proxy.Proxy.rebuild_server

    def recording(self, server, image, **attrs):
        asked.append(server)
        return real(self, server, image, **attrs)
    monkeypatch.setattr(_proxy.Proxy, "rebuild_server", recording)
    return asked


def test_a_new_origin_rules_and_name_rebuild_the_servers_while_pools_serve(
        driver, admin_conn, monkeypatch):
    """A new origin, new cache rules and a new name on a live vCDN: every cache and the
    DNS server rebuilt with new user-data, each the same server (id, port address,
    compute host); north's three caches leave their pool one at a time (it never
    empties); south's only cache is stood in for by a server booted with its new
    user-data at the region's next address, deleted afterwards. Then the same SIG again
    rebuilds nothing and touches no pool, and a new name alone rebuilds the DNS server
    only (the caches' user-data holds no names)."""
    monkeypatch.setenv("OS_CLOUD", "minicloud-admin")  # Nova shows compute hosts to admins
    monkeypatch.setenv("CDNAAS_OS_HOSTS", HOSTS)
    sig = make_sig({"north": 3, "south": 1})
    deployment = driver.deploy(sig)
    try:
        before = servers_of(admin_conn, deployment)
        calls, reports, booted = batches(monkeypatch), [], boots(monkeypatch)
        changed = reconfigured(sig)
        updated = driver.update(deployment, changed, lambda *r: reports.append(r), previous=sig)
        after = servers_of(admin_conn, updated)
        assert tagged(admin_conn, sig.vcdn_id)["servers"] == sorted(
            plan.resource_name(sig.vcdn_id, n) for n in after)
        assert set(after) == set(before) == {"north-cache-1", "north-cache-2", "north-cache-3",
                                             "south-cache-1", "dns-1"}
        for name, server in after.items():
            entry = updated.resources["servers"][name]
            assert (server.id, server.compute_host, server.status) == (
                before[name].id, before[name].compute_host, "ACTIVE"), name
            assert admin_conn.network.get_port(entry["port_id"]).fixed_ips[0]["ip_address"] \
                == next(v.address for v in deployment.vnfs if v.name == name)
            assert user_data(server) != user_data(before[name]), name
            digest = rebuild.digest(user_data(server))
            assert entry[rebuild.DIGEST_KEY] == server.metadata[rebuild.METADATA_KEY] == digest
            if name.startswith("dns"):
                for region in sig.regions:
                    lb = updated.region_endpoints[region.name]
                    assert f"host-record={sig.hostname},{NEW_NAME},{lb}" in written(server)[
                        f"{userdata.CONF_DIR}/dnsmasq-{region.name}.conf"]
            else:
                nginx = written(server)[f"{userdata.CONF_DIR}/nginx.conf"]
                assert "server 192.0.2.20:8081;" in nginx and "192.0.2.10" not in nginx
                assert 'proxy_cache_key "$uri$cdnaas_slice_range";' in nginx
        assert members_of(admin_conn, updated) == caches_of(updated) == caches_of(deployment)
        # the pools always had members: north's caches left theirs one at a time, south's
        # cache gave its place to the stand-in
        north, south = (updated.resources["regions"][r]["pool_id"] for r in ("north", "south"))
        assert calls and all(members for _pool, members in calls)
        assert {pool for pool, _members in calls} == {north, south}
        left = [set(caches_of(deployment)["north"]) - set(members) for pool, members in calls
                if pool == north]
        assert [len(out) for out in left] == [1, 0] * 3
        assert set().union(*left) == set(caches_of(deployment)["north"])
        (cache,) = caches_of(deployment)["south"]
        stand_in = str(ipaddress.ip_address(cache) + 1)  # the region's next cache address
        assert [members for pool, members in calls if pool == south] == [[stand_in], [cache]]
        assert list(booted) == [plan.resource_name(sig.vcdn_id, "south-cache-1-stand-in")]
        nginx = written_by(next(iter(booted.values())))[f"{userdata.CONF_DIR}/nginx.conf"]
        assert "server 192.0.2.20:8081;" in nginx and f"listen {stand_in}:80" in nginx
        assert ("boot caches", 1, 1) in reports and ("remove caches", 1, 1) in reports
        assert ("rebuild caches", 4, 4) in reports and ("rebuild DNS", 1, 1) in reports

        asked, calls[:] = rebuilds(monkeypatch), []
        same = driver.update(updated, changed, previous=changed)
        assert (asked, calls, same.resources) == ([], [], updated.resources)
        renamed = dataclasses.replace(changed, service={**changed.service,
                                                        "hostnames": [OTHER_NAME]})
        final = driver.update(same, renamed, previous=changed)
        assert asked == [final.resources["servers"]["dns-1"]["server_id"]] and calls == []
        now = {n: user_data(s) for n, s in servers_of(admin_conn, final).items()}
        assert sorted(n for n in now if now[n] != user_data(after[n])) == ["dns-1"]
        assert OTHER_NAME in now["dns-1"] and NEW_NAME not in now["dns-1"]
    finally:
        driver.terminate(deployment)
    assert nothing_left(admin_conn, sig.vcdn_id) == {}


def test_a_failed_rebuild_is_undone_and_an_interrupted_one_restored(
        driver, admin_conn, minicloud, monkeypatch, tmp_path):
    """A compute API held below 2.57 (``compute_api_version`` in clouds.yaml, as an older
    Nova) cannot rebuild with user-data: a new origin is refused, nothing changes. Then
    north-cache-2 is locked by the admin, so Nova refuses to rebuild it (409) after
    north-cache-1 and south-cache-1 were: the update is undone (each server rebuilt with
    its old user-data, members back, south's stand-in deleted). The same update, its undo
    lost (the RO died), leaves rebuilt servers that :meth:`restore` rebuilds with the
    recorded configuration, and the stand-in, which it deletes; south's cache, alone, is
    stood in for by a stand-in of the restore's own while it is rebuilt."""
    sig = make_sig({"north": 3, "south": 1})
    deployment = driver.deploy(sig)
    locked = deployment.resources["servers"]["north-cache-2"]["server_id"]
    try:
        before = {n: user_data(s) for n, s in servers_of(admin_conn, deployment).items()}
        clouds = yaml.safe_load(minicloud.read_text())
        (tmp_path / "clouds.yaml").write_text(yaml.safe_dump({"clouds": {"old-nova": {
            **clouds["clouds"]["minicloud"], "compute_api_version": "2.56"}}}))
        with monkeypatch.context() as older:
            older.setenv("OS_CLIENT_CONFIG_FILE", str(tmp_path / "clouds.yaml"))
            older.setenv("OS_CLOUD", "old-nova")
            asked = rebuilds(older)
            with pytest.raises(DeploymentFailed, match="needs compute API 2.57; region "
                                                       "default .*nothing was changed"):
                OpenStackDriver().update(deployment, reconfigured(sig), previous=sig)
        assert asked == []
        assert {n: user_data(s) for n, s in servers_of(admin_conn, deployment).items()} == before

        admin_conn.compute.lock_server(locked)
        with pytest.raises(DeploymentFailed, match="(?i)locked.*the previous caches still serve"):
            driver.update(deployment, reconfigured(sig), previous=sig)
        assert {n: user_data(s) for n, s in servers_of(admin_conn, deployment).items()} == before
        assert members_of(admin_conn, deployment) == caches_of(deployment)
        recorded = sorted(plan.resource_name(sig.vcdn_id, n) for n in before)
        assert tagged(admin_conn, sig.vcdn_id)["servers"] == recorded  # south's stand-in went

        with monkeypatch.context() as dying:
            dying.setattr(Undo, "run", lambda self: [])
            with pytest.raises(DeploymentFailed):
                driver.update(deployment, reconfigured(sig), previous=sig)
        now = {n: user_data(s) for n, s in servers_of(admin_conn, deployment).items()}
        assert sorted(n for n in now if now[n] != before[n]) == ["north-cache-1",
                                                                 "south-cache-1"]
        assert tagged(admin_conn, sig.vcdn_id)["servers"] == sorted(
            recorded + [plan.resource_name(sig.vcdn_id, "south-cache-1-stand-in")])
        calls = batches(monkeypatch)
        restored = driver.restore(deployment, sig)
        servers = servers_of(admin_conn, restored)
        assert {n: user_data(s) for n, s in servers.items()} == before
        assert all(restored.resources["servers"][n][rebuild.DIGEST_KEY] ==
                   s.metadata[rebuild.METADATA_KEY] == rebuild.digest(before[n])
                   for n, s in servers.items())
        assert all(members for _pool, members in calls)  # north-cache-1 left its pool alone
        (cache,) = caches_of(deployment)["south"]  # south's, alone, was stood in for
        south = restored.resources["regions"]["south"]["pool_id"]
        assert [members for pool, members in calls if pool == south][:2] == \
            [[str(ipaddress.ip_address(cache) + 1)], [cache]]
        assert members_of(admin_conn, restored) == caches_of(deployment)
        assert tagged(admin_conn, sig.vcdn_id)["servers"] == recorded
    finally:
        admin_conn.compute.unlock_server(locked)
        driver.terminate(deployment)
    assert nothing_left(admin_conn, sig.vcdn_id) == {}


def placed(admin_conn, vcdn_id):
    """``{VNF name: OS-EXT-SRV-ATTR:host}`` of the vCDN's servers, as Nova's admin sees them."""
    prefix = plan.resource_name(vcdn_id, "")
    return {s.name[len(prefix):]: s.compute_host for s in admin_conn.compute.servers(
        all_projects=True, tags=plan.vcdn_tag(vcdn_id))}


def test_servers_run_on_their_planned_hosts(driver, admin_conn, monkeypatch):
    """With Nova's policy allowing it (here: admin), each server is created with 2.74's
    ``host`` on its planned host, two hosts per zone; a host Nova does not know (no
    mapping) goes to its zone with the difference recorded."""
    monkeypatch.setenv("OS_CLOUD", "minicloud-admin")
    monkeypatch.setenv("CDNAAS_OS_HOSTS", HOSTS)
    sig = make_sig({"north": 3, "south": 2})  # north-cache-3 on north-host-1 again
    deployment = driver.deploy(sig)
    try:
        nova = placed(admin_conn, sig.vcdn_id)
        servers = deployment.resources["servers"]
        mapping = placement.host_map()
        for vnf in sig.vnfs_in(role="cache") + sig.vnfs_in(role="dns"):
            assert nova[vnf.name] == mapping[vnf.host], vnf.name
            assert servers[vnf.name]["placement"] == {
                "planned": vnf.host, "compute_host": mapping[vnf.host], "way": placement.HOST,
                "refused": {}, "actual": mapping[vnf.host], "as_planned": True}
        assert len({nova[v.name] for v in sig.vnfs_in(role="cache")}) == 4  # 2 per zone
        assert [(v.name, v.host) for v in deployment.vnfs] == [(v.name, v.host) for v in sig.vnfs]
        assert placement.differences(deployment.resources) == {}

        # an update's cache on a host the mapping does not name: Nova has no such compute
        # host (400 to 2.74's host; forcing it would fail the server), so its zone
        grown = make_sig({"north": 4, "south": 2}, sig.vcdn_id)
        [added] = [v for v in grown.vnfs if v.name == "north-cache-4"]
        added.host = "north-host-3"
        deployment = driver.update(deployment, grown)
        entry = deployment.resources["servers"]["north-cache-3"]["placement"]
        assert entry["as_planned"] is True
        moved = placement.differences(deployment.resources)
        assert list(moved) == ["north-cache-4"]
        assert moved["north-cache-4"]["way"] == placement.ZONE
        assert moved["north-cache-4"]["refused"] == {
            placement.HOST: "400 Compute host north-host-3 could not be found.",
            placement.FORCED: "not tried: Nova has no such compute host"}
        assert moved["north-cache-4"]["actual"] == placed(admin_conn, sig.vcdn_id)[
            "north-cache-4"] in ZONE_HOSTS["north-az"]
    finally:
        driver.terminate(deployment)
    assert nothing_left(admin_conn, sig.vcdn_id) == {}


def test_without_the_host_microversion_the_host_is_forced_in_the_zone(
        driver, admin_conn, minicloud, monkeypatch, tmp_path):
    """A compute API held below 2.74 (``compute_api_version`` in clouds.yaml, as an older
    Nova) cannot take ``host``: ``availability_zone=zone:host`` places the server."""
    clouds = yaml.safe_load(minicloud.read_text())
    entry = clouds["clouds"]["minicloud-admin"]
    entry["compute_api_version"] = "2.72"
    (tmp_path / "clouds.yaml").write_text(yaml.safe_dump({"clouds": {"old-nova": entry}}))
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(tmp_path / "clouds.yaml"))
    monkeypatch.setenv("OS_CLOUD", "old-nova")
    monkeypatch.setenv("CDNAAS_OS_HOSTS", HOSTS)
    sig = make_sig({"north": 2})
    deployment = driver.deploy(sig)
    try:
        nova = placed(admin_conn, sig.vcdn_id)
        for vnf in sig.vnfs_in(role="cache") + sig.vnfs_in(role="dns"):
            entry = deployment.resources["servers"][vnf.name]["placement"]
            assert nova[vnf.name] == entry["actual"] == placement.host_map()[vnf.host]
            assert (entry["way"], entry["refused"], entry["as_planned"]) == (
                placement.FORCED, {placement.HOST: "compute API below 2.74 here"}, True)
    finally:
        driver.terminate(deployment)
    assert nothing_left(admin_conn, sig.vcdn_id) == {}


def test_a_planned_host_that_cannot_take_its_server_fails_the_deployment(
        driver, admin_conn, monkeypatch):
    """SO's placement is not silently replaced: a planned host Nova's scheduler refuses
    (disabled here) fails its server, and the deployment is undone saying why."""
    monkeypatch.setenv("OS_CLOUD", "minicloud-admin")
    monkeypatch.setenv("CDNAAS_OS_HOSTS", HOSTS)
    [service] = admin_conn.compute.services(binary="nova-compute", host="mc-north-2")
    admin_conn.compute.disable_service(service, disabled_reason="cdnaas test: planned host")
    sig = make_sig({"north": 2})
    try:
        with pytest.raises(DeploymentFailed, match="No valid host.*planned hosts "
                                                   "mc-north-1, mc-north-2"):
            driver.deploy(sig)
    finally:
        admin_conn.compute.enable_service(service)
    assert nothing_left(admin_conn, sig.vcdn_id) == {}


@pytest.fixture
def quota_cloud(admin_conn, openstack_env, minicloud, monkeypatch, tmp_path):
    """A project of its own whose Nova quota allows ``limit`` servers: ``set(limit)``."""
    project = admin_conn.identity.create_project(name=f"cdnaas-quota-{uuid.uuid4().hex[:8]}",
                                                 domain_id="default")
    user = admin_conn.identity.find_user("cdnaas", domain_id="default", ignore_missing=False)
    for role in ("member", "load-balancer_member"):
        admin_conn.identity.assign_project_role_to_user(
            project, user, admin_conn.identity.find_role(role, ignore_missing=False))
    clouds = yaml.safe_load(minicloud.read_text())
    entry = clouds["clouds"]["minicloud"]
    entry["auth"]["project_name"] = project.name
    (tmp_path / "clouds.yaml").write_text(yaml.safe_dump({"clouds": {"quota": entry}}))
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(tmp_path / "clouds.yaml"))
    monkeypatch.setenv("OS_CLOUD", "quota")
    yield lambda limit: admin_conn.set_compute_quotas(project.id, instances=limit)
    admin_conn.identity.delete_project(project)


def test_requests_whose_connection_failed_are_retried(driver):
    """A gunicorn or Apache in front of an API closes idle kept-alive connections;
    a request that goes out on one just then is sent again, not failed."""
    conn = driver.cloud.conn()
    assert [getattr(conn, service).connect_retries for service in cloud.SERVICES] == \
        [cloud.CONNECT_RETRIES] * len(cloud.SERVICES)


def test_quota_refusal_mid_deployment_rolls_back(driver, admin_conn, quota_cloud):
    quota_cloud(3)  # networks, balancers, ports and 3 of the 5 servers are created first
    sig = make_sig({"north": 2, "south": 2})
    with pytest.raises(DeploymentFailed, match="(?i)quota"):
        driver.deploy(sig)
    assert nothing_left(admin_conn, sig.vcdn_id) == {}
    assert driver.cleanup(set()) == []


def test_missing_image_creates_nothing(driver, admin_conn):
    document = sample_sig(f"os-{uuid.uuid4().hex[:8]}", {"north": 1, "south": 1})
    document["origin"] = dict(ORIGIN)
    document["vnfs"][1]["image"] = "no-such-image"
    sig = ServiceInstanceGraph.from_dict(document)
    with pytest.raises(DeploymentFailed, match="no-such-image.*cdnaas image register"):
        driver.deploy(sig)
    assert nothing_left(admin_conn, sig.vcdn_id) == {}


def test_cleanup_removes_strays_by_tag(driver, admin_conn):
    sig = make_sig({"north": 1, "south": 1})
    driver.deploy(sig)  # the record is "lost"
    assert driver.cleanup({"some-other-vcdn"}) == [sig.vcdn_id]
    assert nothing_left(admin_conn, sig.vcdn_id) == {}
    assert driver.cleanup(set()) == []


def test_a_balancer_octavia_failed_to_delete_is_asked_again(driver, admin_conn,
                                                           minicloud_faults, caplog,
                                                           monkeypatch):
    """Octavia leaves a balancer whose delete flow failed in ERROR: terminate asks again.
    One that fails every time is named, left in ERROR; one Octavia's worker does not finish
    deleting is named with its PENDING_DELETE; the next terminate removes it."""
    sig = make_sig({"north": 1, "south": 1})
    deployment = driver.deploy(sig)
    south = deployment.resources["regions"]["south"]["lb_id"]
    asked_again = f"load balancer {south} went to ERROR while being deleted; asking again"

    def south_status():
        return cloud.load_balancer_status(admin_conn, south)
    minicloud_faults.vip_deallocation(south, cloud.LB_DELETE_ASKS)
    with pytest.raises(VimError, match=f"failed {cloud.LB_DELETE_ASKS} times to delete load "
                                       f"balancer {south}; it is in ERROR"):
        driver.terminate(deployment)
    assert caplog.text.count(asked_again) == cloud.LB_DELETE_ASKS - 1
    assert south_status() == "ERROR"
    assert [lb.id for lb in admin_conn.load_balancer.load_balancers(
        tags=plan.vcdn_tag(sig.vcdn_id))] == [south]  # the north one went

    minicloud_faults.vip_deallocation(south, "hold")
    monkeypatch.setenv("CDNAAS_OS_DELETE_TIMEOUT", "3")
    with pytest.raises(VimError, match=f"deletion of load balancer {south} did not happen "
                                       "within 3 s: Octavia still shows it PENDING_DELETE"):
        driver.terminate(deployment)
    monkeypatch.delenv("CDNAAS_OS_DELETE_TIMEOUT")
    minicloud_faults.vip_deallocation(south, 1)  # the held deletion now fails
    cloud.wait_until(lambda: south_status() == "ERROR", "the held deletion to fail", 30)

    minicloud_faults.vip_deallocation(south, 1)
    driver.terminate(deployment)
    assert caplog.text.count(asked_again) == cloud.LB_DELETE_ASKS
    assert nothing_left(admin_conn, sig.vcdn_id) == {}


def test_creates_a_flavor_when_allowed(driver, admin_conn, monkeypatch):
    monkeypatch.setenv("OS_CLOUD", "minicloud-admin")  # creating flavors is for admins
    monkeypatch.setenv("CDNAAS_OS_CREATE_FLAVORS", "1")
    document = sample_sig(f"os-{uuid.uuid4().hex[:8]}", {"north": 1})
    document["origin"] = dict(ORIGIN)
    document["vnfs"][1]["vcpus"] = 12  # more than any flavor of the mini cloud
    sig = ServiceInstanceGraph.from_dict(document)
    deployment = driver.deploy(sig)
    try:
        server = admin_conn.compute.get_server(deployment.resources["servers"]["north-cache-1"]
                                               ["server_id"])
        assert server.flavor.name == plan.flavor_name(12, 512)
    finally:
        driver.terminate(deployment)
    assert nothing_left(admin_conn, sig.vcdn_id) == {}


def test_cli_registers_an_image_in_glance(openstack_env, admin_conn, tmp_path):
    from click.testing import CliRunner

    from cdnaas.cli.image import image

    disk = tmp_path / "vnf.raw"
    disk.write_bytes(b"\0" * 65536)
    name = f"cdnaas-test-{uuid.uuid4().hex[:8]}"
    result = CliRunner().invoke(image, ["register", str(disk), "--name", name, "--tag", "test"])
    assert result.exit_code == 0, result.output
    image_id = result.output.strip().splitlines()[-1]
    try:
        registered = admin_conn.image.get_image(image_id)
        assert (registered.name, registered.status, registered.disk_format) == \
            (name, "active", "raw")
        assert {"cdnaas", "test"} <= set(registered.tags)
    finally:
        admin_conn.image.delete_image(image_id, ignore_missing=True)


# -- the load generator of a calibration (cdnaas.ro.vim.openstack.loadgen) ---------------

def test_a_load_test_boots_a_generator_that_measures_and_goes_with_the_vcdn(
        driver, admin_conn, monkeypatch, tmp_path):
    """The generator: a server of the cache's image in its network and zone, at the
    subnet's last address, with the cache security group and the agent's user-data; the
    agent that user-data writes (run here in a namespace at that address, beside the
    cache's nginx run from its user-data) runs real wrk and viewers at the cache; the
    generator serves the next test too and goes with the vCDN."""
    from cdnaas.ro.calibration_campaign import VIDEO_PATH
    from cdnaas.ro.vim.base import LoadTest
    monkeypatch.setenv("CDNAAS_OS_POOL", "10.231.0.0/16")  # nothing else of this machine's
    monkeypatch.setenv("CDNAAS_OS_MANAGEMENT_CIDR", "10.231.0.0/24")
    sig = make_sig({"north": 1})
    deployment = driver.deploy(sig)
    try:
        cache = {v.name: v for v in deployment.vnfs}["north-cache-1"]
        name = plan.resource_name(sig.vcdn_id, "loadgen-north")
        with CachesHere(admin_conn, deployment, (ORIGIN["host"], ORIGIN["port"])) as caches, \
                GeneratorsHere(caches, tmp_path) as generators:
            http = driver.load_test(deployment, cache.name,
                                    LoadTest("http", "/objects/small", 4, 2))
            generators.started()
            assert http.requests > 0 and http.errors == http.non_2xx == 0
            assert http.tool.startswith("wrk") and http.isolated
            assert http.target_cpu_seconds is None  # Nova shows diagnostics to admins only
            generator = deployment.resources["generators"]["north"]
            watch = driver.load_test(deployment, cache.name, LoadTest(
                "viewers", VIDEO_PATH, 10, 4, chunk_seconds=0.5, segments=5, window_seconds=2))
            assert deployment.resources["generators"]["north"] == generator  # the same one
            assert len(watch.windows) == 10 and watch.errors == 0 and watch.requests > 0
        server = admin_conn.compute.get_server(generator["server_id"])
        assert (server.name, server.status, server.availability_zone) == (
            name, "ACTIVE", "north-az")
        assert set(plan.tags(sig.vcdn_id)) <= set(server.tags)
        assert server.flavor.name == "m1.medium"  # 2 vCPUs, 1 GB
        assert server.image.id == admin_conn.compute.get_server(cache.resource_id).image.id
        port = admin_conn.network.get_port(generator["port_id"])
        info = deployment.resources["regions"]["north"]
        assert port.fixed_ips[0]["ip_address"] == generator["address"] == "10.231.0.254"
        assert port.network_id == info["network_id"]
        assert port.security_group_ids == [info["security_groups"]["cache"]]
        assert set(plan.tags(sig.vcdn_id)) <= set(port.tags)
        argv = exec_start(generator_files(server)[UNIT])
        assert argv[argv.index("--address") + 1:] == [
            "10.231.0.254", "--port", "8081", "--management", "10.231.0.0/24",
            "--targets", "10.231.0.0/24"]
        assert len(tagged(admin_conn, sig.vcdn_id)["servers"]) == 3  # cache, DNS, generator
    finally:
        driver.terminate(deployment)
    assert nothing_left(admin_conn, sig.vcdn_id) == {}


def test_a_load_generator_that_never_answers_is_removed_in_bounded_time(
        driver, admin_conn, monkeypatch):
    """No agent answers at the generator's address (it is in this machine's namespace of
    the vCDN's caches, which refuses the connections): the test fails within
    CDNAAS_OS_BOOT_TIMEOUT (and the deletion), saying what, with no generator left;
    a deployment without a management prefix gets no generator at all."""
    import time

    from cdnaas.ro.vim.base import LoadTest
    monkeypatch.setenv("CDNAAS_OS_POOL", "10.233.0.0/16")
    monkeypatch.setenv("CDNAAS_OS_MANAGEMENT_CIDR", "10.233.0.0/24")
    sig = make_sig({"north": 1})
    deployment = driver.deploy(sig)
    try:
        before = tagged(admin_conn, sig.vcdn_id)
        monkeypatch.setenv("CDNAAS_OS_BOOT_TIMEOUT", "20")
        started = time.monotonic()
        with CachesHere(admin_conn, deployment, (ORIGIN["host"], ORIGIN["port"])) as caches, \
                GeneratorsHere(caches), \
                pytest.raises(VimError, match=r"agent of the load generator at "
                                              r"10\.233\.0\.254:8081 did not answer within \d+ s "
                                              r"\(last: .*ConnectionRefused.*the load generator "
                                              r"was removed"):
            driver.load_test(deployment, "north-cache-1", LoadTest("http", "/", 1, 1))
        assert time.monotonic() - started < 20 + 30
        assert tagged(admin_conn, sig.vcdn_id) == before
        assert deployment.resources["generators"] == {}
        deployment.resources["management_cidrs"] = []
        with pytest.raises(VimError, match="deployed without CDNAAS_OS_MANAGEMENT_CIDR"):
            driver.load_test(deployment, "north-cache-1", LoadTest("http", "/", 1, 1))
        with pytest.raises(VimError, match="has no VNF north-cache-9"):
            driver.load_test(deployment, "north-cache-9", LoadTest("http", "/", 1, 1))
        assert tagged(admin_conn, sig.vcdn_id) == before
    finally:
        driver.terminate(deployment)
    assert nothing_left(admin_conn, sig.vcdn_id) == {}
