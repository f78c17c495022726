"""Host power actions: the tests that start no process (the unit tier); the others, and what
the module covers, are in tests/service/test_power_actions.py."""
import dataclasses
import datetime as dt
import logging
import time
import types

import pytest

from cdnaas.common import answers
from cdnaas.db import migrate
from cdnaas.db.engine import Database
from cdnaas.ro.app import create_app
from cdnaas.ro.power import load
from cdnaas.ro.power.base import HostUnknown, PowerFailed
from cdnaas.ro.power.local import LocalPowerDriver
from cdnaas.ro.power.log import NoopPowerDriver
from cdnaas.ro.power.openstack import OpenStackPowerDriver
from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.local import cgroups
from cdnaas.ro.vim.noop import NoopDriver
from tests.support.auth import signed
from tests.support.sigs import sample_sig
from tests.service.test_im_reconcile import World, hosts

PERIOD = dt.timedelta(seconds=10)


# -- drivers ------------------------------------------------------------------------------------

def test_drivers_are_entry_points_and_log_is_the_default(monkeypatch):
    monkeypatch.delenv("CDNAAS_POWER_DRIVER", raising=False)
    assert load().name == "log"
    assert [load(n).name for n in ("noop", "openstack", "local")] == ["noop", "openstack", "local"]
    with pytest.raises(LookupError):
        load("ipmi")


def test_noop_and_log_record_each_action_and_switch_nothing(caplog):
    driver = load("log")
    with caplog.at_level(logging.WARNING):
        off = driver.power_off("eu-2", "empty")
    assert (off.state, off.applied) == ("off", False) and "recorded" in off.steps[0]
    assert "power_off eu-2" in caplog.text
    assert driver.state("eu-2") == "off" and driver.state("eu-9") == "unknown"
    driver.power_on("eu-2", "lease")
    assert driver.calls == [("power_off", "eu-2", "empty"), ("power_on", "eu-2", "lease")]
    assert driver.state("eu-2") == "on"


def fake_sysfs(root, cpus, offline=(), hotplug=True):
    for cpu in range(cpus):
        (root / f"cpu{cpu}").mkdir(parents=True)
        if hotplug and cpu:
            (root / f"cpu{cpu}" / "online").write_text("0\n" if cpu in offline else "1\n")


def test_local_takes_free_cpus_offline_never_cpu0_nor_one_in_use_and_brings_them_back(
        tmp_path, monkeypatch):
    fake_sysfs(tmp_path / "cpu", 6)
    monkeypatch.setenv("CDNAAS_POWER_LOCAL_CPUS", "eu-1=0-1,eu-2=2-3,eu-3=4")
    driver = LocalPowerDriver(sysfs=tmp_path / "cpu", in_use=lambda: {3})  # a VNF pinned to 3
    off = driver.power_off("eu-1", "empty")
    assert off.applied and "cpu0 stays online (the boot CPU)" in off.steps
    assert (tmp_path / "cpu/cpu1/online").read_text() == "0"
    off = driver.power_off("eu-2", "empty")
    assert (tmp_path / "cpu/cpu2/online").read_text() == "0"
    assert (tmp_path / "cpu/cpu3/online").read_text().strip() == "1"
    assert "cpu3 is in a VNF's CPU set: stays online" in off.steps
    assert driver.state("eu-1") == "off" and driver.state("eu-2") == "on"  # cpu3 still on
    on = driver.power_on("eu-1", "lease")
    assert on.applied and (tmp_path / "cpu/cpu1/online").read_text() == "1"
    unmapped = driver.power_off("us-1", "empty")
    assert not unmapped.applied and "maps to no CPU" in unmapped.steps[0]
    monkeypatch.setenv("CDNAAS_POWER_LOCAL_CPUS", "eu-1:2")
    with pytest.raises(VimError, match="CDNAAS_POWER_LOCAL_CPUS item 'eu-1:2'"):
        driver.power_off("eu-1")


def test_pinning_and_power_read_one_host_map_of_cpu_lists(monkeypatch):
    """Both settings take kernel CPU lists; the power driver follows the pinning's map."""
    monkeypatch.setenv("CDNAAS_POWER_LOCAL_CPUS", "eu-1=0-1,4,eu-2=5")
    assert cgroups.cpu_map() == {"eu-1": "0-1,4", "eu-2": "5"}
    assert LocalPowerDriver._cpus("eu-1") == [0, 1, 4]
    monkeypatch.setenv("CDNAAS_LOCAL_HOST_CPUS", "eu-1=2-3;eu-2=1,6")
    assert cgroups.cpu_map() == {"eu-1": "2-3", "eu-2": "1,6"}
    assert LocalPowerDriver._cpus("eu-2") == [1, 6]
    for bad in ("eu-1=3-2", "=1", "eu-1=x"):
        monkeypatch.setenv("CDNAAS_LOCAL_HOST_CPUS", bad)
        with pytest.raises(VimError, match="CDNAAS_LOCAL_HOST_CPUS"):
            cgroups.cpu_map()


def test_local_records_where_the_kernel_has_no_hotplug(tmp_path, monkeypatch):
    fake_sysfs(tmp_path, 2, hotplug=False)
    monkeypatch.setenv("CDNAAS_POWER_LOCAL_CPUS", "eu-1=1")
    found = LocalPowerDriver(sysfs=tmp_path, in_use=set).power_off("eu-1")
    assert not found.applied and "no hotplug" in found.steps[0]


class FakeBaremetal:
    """openstacksdk's baremetal proxy as far as the driver uses it (the mini cloud has no
    Ironic): nodes by name, ``set_node_power_state`` recorded."""

    def __init__(self, nodes):
        self.nodes, self.calls = nodes, []

    def find_node(self, name, ignore_missing=True):
        from openstack import exceptions
        if name not in self.nodes and not ignore_missing:
            raise exceptions.NotFoundException(f"No Node found for {name}")
        return self.nodes.get(name)

    def set_node_power_state(self, node, target, wait=False, timeout=None):
        self.calls.append((node.id, target, wait))
        node.power_state = target


class FakeConn:
    def __init__(self, services=(), nodes=None):
        self._services = list(services)
        self.baremetal = FakeBaremetal(nodes or {})
        self.compute = types.SimpleNamespace(services=self.services, calls=[],
                                             disable_service=self.disable,
                                             enable_service=self.enable)

    def services(self, binary=None, host=None):
        return [s for s in self._services if s.host == host and s.binary == binary]

    def disable(self, service, disabled_reason=None):
        self.compute.calls.append(("disable", service.host, disabled_reason))
        service.status = "disabled"

    def enable(self, service):
        self.compute.calls.append(("enable", service.host))
        service.status = "enabled"

    def has_service(self, name):
        return name == "baremetal"


def test_openstack_ironic_path_disables_then_powers_off_and_back_in_reverse():
    service = types.SimpleNamespace(host="bm-1", binary="nova-compute", status="enabled")
    node = types.SimpleNamespace(id="node-uuid-1", power_state="power on")
    conn = FakeConn([service], {"bm-1": node})
    driver = OpenStackPowerDriver(conn=conn)
    off = driver.power_off("bm-1", "x" * 300)
    assert conn.compute.calls == [("disable", "bm-1", "x" * 255)]
    assert conn.baremetal.calls == [("node-uuid-1", "power off", False)]
    assert off.applied and off.state == "off" and driver.state("bm-1") == "off"
    driver.power_on("bm-1", "lease")
    assert conn.baremetal.calls[-1] == ("node-uuid-1", "power on", True)
    assert conn.compute.calls[-1] == ("enable", "bm-1") and driver.state("bm-1") == "on"
    with pytest.raises(HostUnknown):
        driver.power_off("nowhere")


# -- RO's endpoint ------------------------------------------------------------------------------

@pytest.fixture
def ro(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path}/ro.db"
    migrate.upgrade("ro", url)
    monkeypatch.setenv("CDNAAS_POWER_DRIVER", "noop")
    app = create_app(Database(url), driver=NoopDriver())
    yield app
    app.extensions["ro"].shutdown()
    app.extensions["ro"].database.dispose()


def _wait_status(client, deployment_id, status, timeout=10):
    deadline = time.monotonic() + timeout
    while client.get(f"/ro/v1/deployments/{deployment_id}").get_json()["status"] != status:
        assert time.monotonic() < deadline, f"{deployment_id} never {status}"
        time.sleep(0.02)


def test_ro_switches_a_free_host_and_refuses_one_carrying_vnfs(ro):
    client = signed(ro.test_client())
    sig = sample_sig("vcdn-1")
    busy = sig["vnfs"][0]["host"]
    # real deployments of the noop driver: vcdn-1 ACTIVE, vcdn-0 was on spare-1 and is DELETED
    gone = sample_sig("vcdn-0")
    gone["vnfs"] = [{**vnf, "host": "spare-1"} for vnf in gone["vnfs"]]
    for deployment_id, document in (("vcdn-1", sig), ("vcdn-0", gone)):
        assert client.put(f"/ro/v1/deployments/{deployment_id}",
                          json={"sig": document}).status_code == 202
        _wait_status(client, deployment_id, "ACTIVE")
    assert client.delete("/ro/v1/deployments/vcdn-0").status_code == 202
    _wait_status(client, "vcdn-0", "DELETED")
    refused = client.post(f"/ro/v1/hosts/{busy}/power", json={"action": "off"})
    assert refused.status_code == 409 and "vcdn-1" in refused.get_json()["error"]["message"]
    done = client.post("/ro/v1/hosts/spare-1/power", json={"action": "off", "reason": "empty"})
    assert done.status_code == 200
    assert done.get_json() | {"steps": None} == {"host": "spare-1", "action": "off",
                                                 "state": "off", "applied": False,
                                                 "driver": "noop", "steps": None}
    assert client.post(f"/ro/v1/hosts/{busy}/power", json={"action": "on"}).status_code == 200
    assert client.get("/ro/v1/power").get_json() == {"driver": "noop", "records_only": True}
    assert ro.extensions["ro_power"].driver.calls == [("power_off", "spare-1", "empty"),
                                                      ("power_on", busy, "")]
    assert client.post("/ro/v1/hosts/spare-1/power", json={"action": "reboot"}).status_code == 400
    assert ro.test_client().post("/ro/v1/hosts/spare-1/power",
                                 json={"action": "off"}).status_code == 401


def test_ro_answers_404_for_a_host_the_driver_does_not_know_and_502_when_it_fails(ro):
    client = signed(ro.test_client())
    with ro.app_context():
        ro.extensions["ro_power"] = None
    from cdnaas.ro.power.service import HostPower
    broken = NoopPowerDriver()

    def fail(host, reason=""):
        if host == "ghost":
            raise HostUnknown("no such compute host ghost")
        raise PowerFailed("BMC does not answer")
    broken.power_off = fail
    ro.extensions["ro_power"] = HostPower(ro.extensions["ro"], driver=broken)
    assert client.post("/ro/v1/hosts/ghost/power", json={"action": "off"}).status_code == 404
    failed = client.post("/ro/v1/hosts/eu-1/power", json={"action": "off"})
    assert failed.status_code == 502 and "BMC" in failed.get_json()["error"]["message"]


# -- the IM's decisions -------------------------------------------------------------------------

@pytest.fixture
def database(tmp_path):
    url = f"sqlite:///{tmp_path}/im.db"
    migrate.upgrade("im", url)
    found = Database(url)
    yield found
    found.dispose()


def powered(world, kind):
    return [d for d in world.recorded if d["kind"] == kind]


def power_world(database, monkeypatch, idle="2", spec=None, declared=20000):
    monkeypatch.setenv("CDNAAS_IM_HOST_IDLE_PASSES", idle)
    monkeypatch.setenv("CDNAAS_IM_HEADROOM_VCPUS", "4")
    world = World(database, [("eu", declared)],
                  spec or hosts(("eu-1", "eu", 12), ("eu-2", "eu", 12), ("eu-3", "eu", 12)))
    world.plant.power_actions = True
    return world


def test_a_refused_or_failed_action_gives_the_host_back_to_so(database, monkeypatch):
    from cdnaas.common import errors
    world = power_world(database, monkeypatch, idle="0")

    def refuse(host, action, reason=None):
        raise errors.Conflict(f"host {host} carries cache-9", field="host")
    monkeypatch.setattr(world.plant.ro, "power_host", refuse)
    world.run(2, eu=10000)
    refused = powered(world, "power_down")
    assert refused and refused[0]["outcome"] == "refused"
    assert "cache-9" in refused[0]["details"]["error"]
    assert all(world.plant.enabled.values())


def test_an_action_the_driver_only_records_leaves_the_host_to_so(database, monkeypatch):
    world = power_world(database, monkeypatch, idle="0")
    monkeypatch.setattr(world.plant.ro, "power_host", lambda host, action, reason=None: answers.PowerAction(
        host=host, action=action, state=action, applied=False,
        steps=[f"recorded: {host} may be switched {action}"], driver="log"))
    world.run(2, eu=10000)
    recorded = powered(world, "power_down")
    assert recorded and {d["outcome"] for d in recorded} == {"recorded"}
    assert recorded[0]["details"]["power"]["driver"] == "log"
    assert all(world.plant.enabled.values())  # nothing is off: SO still places there


def test_a_driver_that_only_records_never_takes_a_host_out_of_placement(database, monkeypatch):
    """With ``log``/``noop`` the IM records its decisions and leaves SO's hosts as the
    operator set them: no placement sees a host disabled for a moment, and a host the
    operator disabled is not enabled again by a power-up."""
    world = power_world(database, monkeypatch, idle="0")
    placement = []
    monkeypatch.setattr(world.plant.ro, "power_driver",
                        lambda: answers.PowerDriver(driver="log", records_only=True))
    monkeypatch.setattr(world.plant.ro, "power_host", lambda host, action, reason=None: answers.PowerAction(
        host=host, action=action, state=action, applied=False,
        steps=[f"recorded: {host} may be switched {action}"], driver="log"))
    monkeypatch.setattr(world.plant.so, "update_host",
                        lambda region, host, body: placement.append((host, body)))
    world.run(2, eu=10000)
    assert {d["outcome"] for d in powered(world, "power_down")} == {"recorded"}
    assert placement == []


def test_a_rise_adds_headroom_only_up_to_the_declared_demand(database, monkeypatch):
    world = power_world(database, monkeypatch, idle="0", declared=60000)
    world.run(2, eu=8000)
    [first, *_rest] = powered(world, "power_down")
    assert first["details"]["headroom_vcpus"] == 4.0  # the floor: no rise yet
    assert first["details"]["declared_room_vcpus"] == pytest.approx(52000 / 6720, abs=0.01)


def test_free_vcpus_in_pieces_smaller_than_a_cache_are_no_capacity():
    from cdnaas.im import hosts as host_power
    from cdnaas.im.inventory import Host
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    inventory = {name: Host(name, "eu", 16, reserved, 115.0, 269.0, enabled)
                 for name, reserved, enabled in (("eu-1", 13, True), ("eu-2", 13, True),
                                                 ("eu-3", 0, False))}
    need = host_power.RegionNeed(demand_vcpus=26.0, headroom_vcpus=4.0, unit_vcpus=4)
    # 6 free vCPUs in sum cover the headroom, but in pieces of 3 they hold no 4-vCPU cache
    [woken] = host_power.plan(inventory, {"eu-3"}, {}, {"eu": need}, {}, now)
    assert (woken.host.name, woken.state) == ("eu-3", host_power.ON)
    assert woken.details["capacity_on_vcpus"] == 26
    counted_whole = dataclasses.replace(need, unit_vcpus=1)
    assert host_power.plan(inventory, {"eu-3"}, {}, {"eu": counted_whole}, {}, now) == []


def test_the_headroom_is_a_share_of_the_demand_at_least_the_floor(monkeypatch):
    from cdnaas.im.hosts import headroom
    monkeypatch.setenv("CDNAAS_IM_HEADROOM_SHARE", "0.15")
    monkeypatch.setenv("CDNAAS_IM_HEADROOM_VCPUS", "0")
    assert headroom(40.0, 4) == pytest.approx(6.0)  # a region of 10 caches: 6 vCPUs spare
    assert headroom(2.0, 4) == pytest.approx(0.3)  # one cache at night: almost nothing
    monkeypatch.setenv("CDNAAS_IM_HEADROOM_VCPUS", "2")  # a floor set: a whole cache at least
    assert (headroom(2.0, 4), headroom(40.0, 4)) == (4, pytest.approx(6.0))
    monkeypatch.setenv("CDNAAS_IM_HEADROOM_SHARE", "0")
    assert headroom(40.0, 4) == 4


def test_a_host_kept_on_only_by_a_fixed_headroom_is_switched_off(monkeypatch):
    """At night a region's one cache fits its first host: a share of its demand keeps no
    second host on for nobody, where a fixed floor of a cache did."""
    from cdnaas.im import hosts as host_power
    from cdnaas.im.inventory import Host
    monkeypatch.setenv("CDNAAS_IM_HEADROOM_SHARE", "0.15")
    monkeypatch.setenv("CDNAAS_IM_HEADROOM_VCPUS", "0")
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    inventory = {"eu-1": Host("eu-1", "eu", 8, 4, 115.0, 269.0, True),
                 "eu-2": Host("eu-2", "eu", 8, 0, 115.0, 269.0, True)}
    since = {"eu-2": now - dt.timedelta(hours=1)}

    def plan():
        need = host_power.RegionNeed(
            demand_vcpus=4.0, headroom_vcpus=host_power.headroom(4.0, 4), unit_vcpus=4)
        return host_power.plan(inventory, set(), {}, {"eu": need}, {}, now, since)
    [off] = plan()
    assert (off.host.name, off.state) == ("eu-2", host_power.POWER_DOWN)
    assert off.details["headroom_vcpus"] == pytest.approx(0.6)
    monkeypatch.setenv("CDNAAS_IM_HEADROOM_VCPUS", "4")  # the former default
    assert plan() == []


# -- the dwell: no host changes power state twice within it where the region can help it --------

def test_a_host_switched_on_stays_on_for_the_dwell_and_the_wait_is_one_decision(
        database, monkeypatch):
    from cdnaas.im import hosts as host_power
    from cdnaas.im import reconcile
    monkeypatch.setenv("CDNAAS_IM_POWER_DWELL_SECONDS", "60")
    world = power_world(database, monkeypatch, idle="0")
    world.run(2, eu=8000)
    asleep = {d["host"] for d in powered(world, "power_down")}
    world.run(6, eu=8000)  # their dwell passes: any of them may be woken
    need = {"eu": 20.0}
    monkeypatch.setattr(reconcile, "region_needs", lambda *_args: {
        "eu": host_power.RegionNeed(demand_vcpus=need["eu"], headroom_vcpus=0.0)})
    world.step(eu=8000)
    [woken] = powered(world, "power_up")
    assert woken["host"] in asleep and "within_dwell" not in woken["details"]
    need["eu"] = 4.0  # the rise fades: the host just woken carries nothing, nor is needed
    world.run(5, eu=8000)
    [waited] = [d for d in powered(world, "power_down") if d["outcome"] == "deferred"]
    assert waited["host"] == woken["host"]
    assert "stays on for the dwell of 60 s" in waited["reason"]
    on_at = dt.datetime.fromisoformat(woken["created_at"])
    assert waited["details"]["dwell_seconds"] == 60
    assert waited["details"]["last_power_change"] == {"kind": "power_up",
                                                      "at": woken["created_at"]}
    assert dt.datetime.fromisoformat(waited["details"]["dwell_until"]) == on_at + 6 * PERIOD
    assert world.plant.power[woken["host"]] == "booting"  # not switched off again
    world.run(2, eu=8000)
    *_, (off_at, host, action, _reason) = world.plant.power_log
    assert (host, action) == (woken["host"], "off") and off_at - on_at >= 6 * PERIOD


def _plan_with_dwell(changed, demand_vcpus, now, empty_since=None):
    from cdnaas.im import hosts as host_power
    from cdnaas.im.inventory import Host
    inventory = {"eu-1": Host("eu-1", "eu", 16, 12, 115.0, 269.0, True),
                 "eu-2": Host("eu-2", "eu", 32, 0, 115.0, 269.0, False),
                 "eu-3": Host("eu-3", "eu", 16, 0, 115.0, 269.0, False)}
    if empty_since:  # eu-3 on and empty instead
        inventory["eu-3"] = dataclasses.replace(inventory["eu-3"], enabled=True)
    need = host_power.RegionNeed(demand_vcpus=demand_vcpus, headroom_vcpus=0.0)
    marked = {"eu-2"} | (set() if empty_since else {"eu-3"})
    return host_power.plan(inventory, marked, {}, {"eu": need}, {}, now, empty_since,
                           changed=changed)


def test_a_host_switched_off_is_woken_within_the_dwell_only_when_no_other_will_do(monkeypatch):
    from cdnaas.im import hosts as host_power
    monkeypatch.setenv("CDNAAS_IM_POWER_DWELL_SECONDS", "1800")
    now = dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone.utc)
    # eu-2 (the bigger) was switched off 5 minutes ago; eu-3 hours ago (no change within)
    changed = {"eu-2": host_power.LastChange(host_power.POWER_DOWN,
                                             now - dt.timedelta(minutes=5))}
    [one] = _plan_with_dwell(changed, 20.0, now)
    assert (one.host.name, one.state) == ("eu-3", host_power.ON)
    assert one.details["dwell_seconds"] == 1800 and "within_dwell" not in one.details
    third, second = _plan_with_dwell(changed, 40.0, now)  # viewers before wear: both
    assert (third.host.name, second.host.name) == ("eu-3", "eu-2")
    assert second.details["within_dwell"] is True
    assert "within the dwell of 1800 s after it was switched off at" in second.reason
    monkeypatch.setenv("CDNAAS_IM_POWER_DWELL_SECONDS", "0")  # no dwell: the biggest first
    [biggest] = _plan_with_dwell(changed, 20.0, now)
    assert biggest.host.name == "eu-2" and "within_dwell" not in biggest.details


def test_the_dwell_setting_decides_whether_a_host_just_switched_on_may_sleep(monkeypatch):
    from cdnaas.im import hosts as host_power
    now = dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone.utc)
    on_at = now - dt.timedelta(minutes=10)
    changed = {"eu-3": host_power.LastChange(host_power.POWER_UP, on_at)}
    empty = {"eu-3": on_at}
    monkeypatch.setenv("CDNAAS_IM_POWER_DWELL_SECONDS", "900")
    [waits] = _plan_with_dwell(changed, 4.0, now, empty)
    assert (waits.host.name, waits.state, waits.deferred) == ("eu-3", host_power.POWER_DOWN, True)
    assert waits.details["dwell_until"] == "2026-01-01T12:05:00Z"
    assert waits.details["capacity_on_vcpus"] == 32  # it stays on and counts
    waited = {"eu-3": dataclasses.replace(changed["eu-3"], waited=True)}
    assert _plan_with_dwell(waited, 4.0, now, empty) == []  # the wait is recorded once
    monkeypatch.setenv("CDNAAS_IM_POWER_DWELL_SECONDS", "600")  # the dwell has passed
    [sleeps] = _plan_with_dwell(changed, 4.0, now, empty)
    assert (sleeps.host.name, sleeps.deferred) == ("eu-3", False)


def test_a_host_sleeps_only_when_the_highest_demand_of_the_passes_it_waited_fits(monkeypatch):
    """One pass of fewer viewers (noise) does not switch off a host that the next pass,
    back at the usual level, would need: the dwell would then keep it off."""
    from cdnaas.im import hosts as host_power
    from cdnaas.im import reconcile, series
    from cdnaas.im.inventory import Host
    from tests.service.test_im_reconcile import MODEL
    monkeypatch.setenv("CDNAAS_IM_HOST_IDLE_PASSES", "3")
    monkeypatch.setenv("CDNAAS_IM_HEADROOM_SHARE", "0")
    monkeypatch.setenv("CDNAAS_IM_HEADROOM_VCPUS", "0")
    now = dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone.utc)
    per_vcpu = MODEL.max_load_for_mos(4.0 + reconcile.NEED_MARGIN)
    # eu-1 carries 3 caches of 4 vCPUs, a balancer and the DNS (14 of 16: 14 usable)
    inventory = {"eu-1": Host("eu-1", "eu", 16, 14, 115.0, 269.0, True),
                 "eu-2": Host("eu-2", "eu", 8, 0, 115.0, 269.0, True)}
    vnfs = [types.SimpleNamespace(role=role, region="eu", vcpus=vcpus)
            for role, vcpus in (("cache", 4),) * 3 + (("lb", 1), ("dns", 1))]

    def needs(*vcpus_of_viewers):
        history = [series.Level(now - PERIOD * (len(vcpus_of_viewers) - i), v * per_vcpu,
                                4.3, 12) for i, v in enumerate(vcpus_of_viewers)]
        seen = types.SimpleNamespace(
            readings=vnfs, model=MODEL, history={"eu": history},
            vcdn=answers.from_json(answers.Instance, {"regions": [
                {"name": "eu", "quality": {"min_mos": 4.0}, "demand": 10 ** 6}]}))
        return reconcile.region_needs(inventory, [reconcile.region_parts([seen])])

    def plan(found):
        return host_power.plan(inventory, set(), {}, found, {}, now,
                               {"eu-2": now - dt.timedelta(hours=1)})
    dip = needs(11.5, 11.5, 11.5, 10.5)  # demand 12.5 now, 13.5 at the highest of 3 passes
    assert dip["eu"].demand_vcpus == pytest.approx(12.5)
    assert dip["eu"].settled_vcpus == pytest.approx(13.5)
    assert dip["eu"].details["recent_high_vcpus"] == pytest.approx(13.5)
    assert plan(dip) == []  # 14 vCPUs left would hold 12.5 x 1.05, not 13.5 x 1.05
    assert plan({"eu": dataclasses.replace(dip["eu"], settled_vcpus=None)})  # it would sleep
    [off] = plan(needs(11.5, 10.5, 10.5, 10.5))  # the lower level has held 3 passes
    assert (off.host.name, off.state) == ("eu-2", host_power.POWER_DOWN)
