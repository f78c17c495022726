"""Host power: the power model with the technology overhead, RAPL counters read from a
(fake) sysfs, and the attribution of a host's power to its VNFs by CPU share."""
import itertools

import pytest

from cdnaas.im import power, rapl

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
