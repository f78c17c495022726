"""Host power: the power model with the technology overhead, RAPL counters read from a
(fake) sysfs, the attribution of a host's power to its VNFs by CPU share, and the simulated
plant's hosts switched off and on (idle power while stopping and booting, none when off)."""
import datetime as dt
import itertools

import pytest

from cdnaas.cli.api_commands import power_state, power_totals_text
from cdnaas.common import errors
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.im import hosts, power, rapl
from cdnaas.im.inventory import Host
from cdnaas.im.models import HostMark
from cdnaas.planning import models
from tests.support.im import MODELS, VM_MODEL, template
from tests.support.plant import BOOT_SECONDS, Plant, SimHost
from tests.support.sigs import sample_sig

IDLE, PEAK = 115.0, 269.0


def load(name, vcpus, cpu, technology="container"):
    return power.VnfLoad(key=("v", name), vcpus=vcpus, cpu=cpu, technology=technology)


def test_the_model_is_linear_between_idle_and_peak():
    assert power.modelled_watts(IDLE, PEAK, 0.0) == IDLE
    assert power.modelled_watts(IDLE, PEAK, 1.0) == PEAK
    assert power.modelled_watts(IDLE, PEAK, 0.25) == pytest.approx(IDLE + 0.25 * 154)


def test_kvm_costs_38_percent_more_dynamic_power_than_bare_metal_and_never_past_peak():
    assert power.OVERHEAD["vm"] == pytest.approx(52.4 / 37.9) == pytest.approx(1.3826, abs=1e-4)
    assert power.OVERHEAD["container"] == pytest.approx(39.1 / 37.9)
    bare = power.host_power(IDLE, PEAK, 16, 4, [load("a", 4, 4.0, "bare")]).watts
    kvm = power.host_power(IDLE, PEAK, 16, 4, [load("a", 4, 4.0, "vm")]).watts
    assert (kvm - IDLE) / (bare - IDLE) == pytest.approx(52.4 / 37.9)
    busy = power.host_power(IDLE, PEAK, 16, 16, [load("a", 16, 15.0, "vm")])
    assert busy.watts == PEAK and busy.utilisation == 1.0


def test_host_power_is_shared_by_allocated_vcpus_for_idle_and_cpu_use_for_the_rest():
    loads = [load("cache", 4, 3.0), load("lb", 1, 1.0), load("dns", 1, 0.0)]
    found = power.host_power(IDLE, PEAK, 16, 6, loads)
    dynamic = found.watts - IDLE
    assert found.source == "model"
    assert found.shares[("v", "cache")] == pytest.approx(IDLE * 4 / 6 + dynamic * 3 / 4)
    assert found.shares[("v", "lb")] == pytest.approx(IDLE / 6 + dynamic / 4)
    assert found.shares[("v", "dns")] == pytest.approx(IDLE / 6)
    assert sum(found.shares.values()) == pytest.approx(found.watts)


def test_vnfs_not_seen_keep_their_share_of_the_idle_power():
    found = power.host_power(IDLE, PEAK, 16, 8, [load("seen", 4, 0.0)])
    assert found.shares[("v", "seen")] == pytest.approx(IDLE / 2)


def test_measured_power_replaces_the_model_and_is_shared_the_same_way():
    found = power.host_power(IDLE, PEAK, 16, 4, [load("a", 2, 1.0), load("b", 2, 0.0)],
                             measured=200.0)
    assert found.source == "rapl" and found.watts == 200.0
    assert found.shares[("v", "a")] == pytest.approx(IDLE / 2 + 85.0)
    assert found.shares[("v", "b")] == pytest.approx(IDLE / 2)
    idle_only = power.host_power(IDLE, PEAK, 16, 4, [load("a", 2, 0.0), load("b", 2, 0.0)],
                                 measured=90.0)  # below the modelled idle: all of it is idle
    assert idle_only.shares == {("v", "a"): 45.0, ("v", "b"): 45.0}


def test_an_empty_host_draws_its_idle_power_and_attributes_none():
    found = power.host_power(IDLE, PEAK, 16, 0, [])
    assert found.watts == IDLE and found.shares == {} and found.utilisation == 0.0


def zone(root, name, domain, energy, wrap=262143328850):
    path = root / name
    path.mkdir(parents=True)
    (path / "name").write_text(domain + "\n")
    (path / "energy_uj").write_text(f"{energy}\n")
    (path / "max_energy_range_uj").write_text(f"{wrap}\n")


def test_packages_and_their_dram_are_summed_but_not_their_cores(tmp_path):
    zone(tmp_path, "intel-rapl:0", "package-0", 1_000_000)
    zone(tmp_path, "intel-rapl:0:0", "core", 500_000)
    zone(tmp_path, "intel-rapl:0:1", "dram", 200_000)
    zone(tmp_path, "intel-rapl:1", "package-1", 3_000_000)
    (tmp_path / "intel-rapl").mkdir()  # the control type, not a zone
    found = rapl.read_zones(tmp_path)
    assert [(z.zone, z.name) for z in found] == [("intel-rapl:0", "package-0"),
                                                 ("intel-rapl:0:1", "dram"),
                                                 ("intel-rapl:1", "package-1")]


def test_the_platform_zone_alone_counts_where_there_is_one(tmp_path):
    zone(tmp_path, "intel-rapl:0", "package-0", 1)
    zone(tmp_path, "intel-rapl:1", "psys", 2)
    assert [z.name for z in rapl.read_zones(tmp_path)] == ["psys"]


def test_energy_between_readings_counts_a_wrap_once():
    before = [rapl.Zone("intel-rapl:0", "package-0", 999_000_000, 1_000_000_000),
              rapl.Zone("intel-rapl:1", "package-1", 10_000_000, 1_000_000_000)]
    after = [rapl.Zone("intel-rapl:0", "package-0", 4_000_000, 1_000_000_000),
             rapl.Zone("intel-rapl:1", "package-1", 15_000_000, 1_000_000_000)]
    assert rapl.joules_between(before, after) == pytest.approx(5.0 + 5.0)


def test_the_meter_gives_watts_from_the_second_reading_on(tmp_path):
    zone(tmp_path, "intel-rapl:0", "package-0", 0)
    times = itertools.count(100.0, 2.0)
    meter = rapl.RaplMeter(root=tmp_path, clock=lambda: next(times))
    assert meter.watts() is None
    (tmp_path / "intel-rapl:0" / "energy_uj").write_text("150000000\n")  # 150 J in 2 s
    assert meter.watts() == pytest.approx(75.0)


def test_a_machine_without_rapl_or_with_unreadable_counters_has_no_reading(tmp_path):
    assert rapl.RaplMeter(root=tmp_path / "absent").watts() is None
    zone(tmp_path, "intel-rapl:0", "package-0", 0)
    (tmp_path / "intel-rapl:0" / "energy_uj").unlink()
    (tmp_path / "intel-rapl:0" / "energy_uj").mkdir()  # reading it fails like EACCES would
    meter = rapl.RaplMeter(root=tmp_path)
    assert meter.watts() is None and meter.watts() is None


def test_the_measured_host_is_this_machine_unless_named(monkeypatch):
    import socket
    assert rapl.RaplMeter().host == socket.gethostname()
    monkeypatch.setenv("CDNAAS_IM_RAPL_HOST", "eu-1")
    assert rapl.RaplMeter().host == "eu-1"


# -- the simulated plant's host power (tests.support.plant) ------------------------------------

def plant(technology="vm", power_actions=True):
    document = template(VM_MODEL, technology=technology)
    sig = ServiceInstanceGraph.from_dict(sample_sig("v", caches={"eu": 1}, cache_hosts=1))
    hosts = [SimHost("eu-host-1", "eu", 16), SimHost("eu-host-2", "eu", 16)]
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    return Plant(document, models.load(MODELS / "vm.yaml"), sig, hosts, start,
                 power_actions=power_actions), start


def test_caches_boot_in_their_technology_time_of_the_paper():
    assert BOOT_SECONDS == {"vm": 11.5, "container": 1.13}
    assert plant("vm")[0]._times[0] == 11.5 and plant("container")[0]._times[0] == 1.13


def test_a_host_switched_off_draws_idle_power_while_it_stops_then_nothing_and_boots_at_idle():
    found, start = plant()
    assert found.watts()["eu-host-2"] == IDLE  # on and empty: idle, not off
    with pytest.raises(errors.Conflict):
        found.switch("eu-host-1", "off", "carries the vCDN")
    found.switch("eu-host-2", "off", "empty")
    found.advance(start + dt.timedelta(seconds=10), {})
    assert found.power["eu-host-2"] == "stopping" and found.watts()["eu-host-2"] == IDLE
    found.advance(start + dt.timedelta(seconds=40), {})
    assert found.power["eu-host-2"] == "off" and "eu-host-2" not in found.watts()
    found.switch("eu-host-2", "on", "needed")
    assert found.power["eu-host-2"] == "booting" and found.watts()["eu-host-2"] == IDLE
    found.advance(start + dt.timedelta(seconds=40 + 120), {})
    assert found.power["eu-host-2"] == "on"
    assert [(h, a) for _t, h, a, _r in found.power_log] == [("eu-host-2", "off"),
                                                            ("eu-host-2", "on")]


def test_the_baselines_plant_keeps_empty_hosts_off_for_free():
    found, _start = plant(power_actions=False)
    assert set(found.watts()) == {"eu-host-1"}


# -- what a power-down mark means for the accounting ---------------------------------------

def _host(enabled):
    return Host(name="eu-1", region="eu", vcpus=8, reserved_vcpus=0, idle_watts=115.0,
                peak_watts=269.0, enabled=enabled)


def test_a_power_down_only_recorded_leaves_the_host_on_and_drawing():
    """The ``log`` driver records a power-down and the host stays enabled: it is not off,
    so its watts count, and the CLI says it is still on rather than "marked" alone."""
    mark = HostMark(name="eu-1", region="eu", state=hosts.POWER_DOWN, reason="empty")
    assert not hosts.switched_off(_host(enabled=True), mark)  # the log driver's case
    assert hosts.switched_off(_host(enabled=False), mark)     # a driver that applied it
    assert not hosts.switched_off(_host(enabled=False), None)  # disabled by the operator
    assert not hosts.switched_off(_host(enabled=False), HostMark(name="eu-1", state=hosts.ON))
    recorded = {"hosts": 4, "watts": 460.0, "marked_power_down": 2, "switched_off": 0,
                "saved_idle_watts": 0.0, "marked_still_on": 2, "marked_still_on_watts": 230.0}
    text = power_totals_text(recorded)
    assert text.startswith("4 hosts drawing 460.0 W; 2 marked for power-down but only "
                           "recorded by the power driver: still on and drawing 230.0 W")
    applied = {**recorded, "watts": 230.0, "switched_off": 2, "saved_idle_watts": 230.0,
               "marked_still_on": 0, "marked_still_on_watts": 0.0}
    assert power_totals_text(applied) == "4 hosts drawing 230.0 W; 2 switched off (saving " \
        "230.0 W idle)"
    assert power_state({"mark": {"state": "power_down", "switched_off": False}}) == \
        "on, power-down recorded"
    assert power_state({"mark": {"state": "power_down", "switched_off": True}}) == \
        "switched off"
    assert power_state(None) == power_state({"mark": {"state": "on"}}) == "on"
