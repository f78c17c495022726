"""Host power actions: the drivers (noop/log record; local takes CPUs offline in a fake
sysfs; openstack drives an Ironic node through a fake at the SDK edge, since the mini cloud
has no Ironic: tests/service/test_power_openstack.py disables and enables its real nova-compute),
RO's endpoint (409 on a host carrying VNFs, 404, 400, 401), and the IM's side: never a host
with reservations or VNFs, woken before a lease needs it, none switched twice within the
dwell where the region can help it, every action a decision with its inputs.

Its tests that start no process are in tests/unit/test_power_actions_units.py (the unit
tier)."""
import dataclasses
import datetime as dt


from cdnaas.common import answers
from cdnaas.im.models import HostMark
from tests.unit.test_power_actions_units import (  # noqa: F401 (fixtures)
    database, power_world, powered)


# -- the IM's decisions -------------------------------------------------------------------------


def test_an_empty_host_is_switched_off_through_ro_as_a_decision_with_its_inputs(
        database, monkeypatch):
    world = power_world(database, monkeypatch)
    world.run(4, eu=10000)
    carrying = {v.host for v in world.plant.sig.vnfs}
    switched = powered(world, "power_down")
    assert switched and {d["host"] for d in switched} == {"eu-1", "eu-2", "eu-3"} - carrying
    down = switched[0]
    assert down["outcome"] == "applied"  # the plant's driver changes its hosts
    details = down["details"]
    assert details["reserved_vcpus"] == 0 and details["ro_vnfs"] == []
    assert {"region_demand_vcpus", "headroom_vcpus", "capacity_on_vcpus", "empty_since",
            "surplus_vcpus", "growth_vcpus", "power"} <= set(details)
    assert details["power"]["steps"] == [f"{down['host']} switched off"]
    assert [(h, a) for _t, h, a, _r in world.plant.power_log] == [
        (d["host"], "off") for d in switched]
    assert world.plant.enabled[down["host"]] is False  # SO places nothing on it
    with database.sessions() as session:
        assert session.get(HostMark, down["host"]).state == "power_down"


def test_never_a_host_with_reservations_or_vnfs(database, monkeypatch):
    world = power_world(database, monkeypatch, idle="0")
    carrying = {v.host for v in world.plant.sig.vnfs}
    # SO forgets the reservations of one host that still carries VNFs (RO knows them), and
    # reserves vCPUs on an empty one that RO has nothing on: neither may be switched off
    lost, booked = sorted(carrying)[0], "eu-3" if "eu-3" not in carrying else "eu-2"
    real_hosts = world.plant.so.hosts

    def hosts_seen(region):
        changed = {lost: 0, booked: 4}
        return [dataclasses.replace(host, reserved_vcpus=changed[host.name])
                if host.name in changed else host for host in real_hosts(region)]
    monkeypatch.setattr(world.plant.so, "hosts", hosts_seen)
    world.run(6, eu=10000)
    switched = {d["host"] for d in powered(world, "power_down")}
    assert lost not in switched and booked not in switched
    assert all(world.plant.power[h] == "on" for h in carrying | {booked})


def test_a_host_is_woken_before_a_lease_needs_it(database, monkeypatch):
    monkeypatch.setenv("CDNAAS_IM_WAKE_LEAD_SECONDS", "600")
    world = power_world(database, monkeypatch, idle="0")
    world.run(2, eu=10000)
    down = powered(world, "power_down")[0]
    start = world.now + dt.timedelta(minutes=30)
    scheduled = answers.from_json(answers.Instance, {
        "id": "vcdn-later", "state": "SCHEDULED", "regions": [],
        "lease": {"start": start.isoformat(), "end": (start + dt.timedelta(hours=1)).isoformat()}})
    instances = world.plant.so.instances
    monkeypatch.setattr(world.plant.so, "instances", lambda state=None, brief=False: [scheduled]
                        if state == "SCHEDULED" else instances(state))
    world.plant.so.sig = lambda _id: {"vnfs": [{"host": down["host"]}]}
    woken = []
    while not woken:
        world.step(eu=10000)
        woken = powered(world, "power_up")
    assert start - world.now >= dt.timedelta(seconds=590)  # 10 minutes ahead, not sooner
    assert woken[0]["host"] == down["host"] and "vcdn-later" in woken[0]["reason"]
    assert world.plant.power[down["host"]] == "booting" and world.plant.enabled[down["host"]]


def test_a_scale_out_refused_for_capacity_wakes_a_host_once_while_it_boots(database,
                                                                         monkeypatch):
    from cdnaas.im import hosts as host_power
    from cdnaas.im import reconcile
    monkeypatch.setenv("CDNAAS_IM_RETRY_SECONDS", "20")
    world = power_world(database, monkeypatch, idle="0", declared=60000)
    world.run(2, eu=8000)
    assert len(powered(world, "power_down")) == 2
    # the vCPUs of the hosts on suffice in sum, yet SO finds no room for a whole cache (free
    # vCPUs scattered over hosts): only SO's refusal tells
    monkeypatch.setattr(reconcile, "region_needs", lambda *_args: {
        "eu": host_power.RegionNeed(demand_vcpus=4.0, headroom_vcpus=0.0)})
    world.run(20, eu=80000)
    refusals = [d for d in world.recorded if d["kind"] == "scale_out"
                and d["outcome"] == "refused"]
    assert refusals and refusals[0]["details"]["refused_for"] == "capacity"
    woken = powered(world, "power_up")
    assert len(woken) == 1 and "SO refused a scale out for capacity" in woken[0]["reason"]
    assert "lacks" in woken[0]["reason"]
