"""Placement: energy cost, the integer program, the heuristic, capacity and spreading."""
import collections
import random

import pytest

from cdnaas.common.flavor import HostCapacity, InsufficientCapacity
from cdnaas.planning import placement
from cdnaas.planning.placement import Instance

# vCPUs, RAM, idle and peak watts of a few host models
MODELS = [(8, 32768, 60, 130), (16, 65536, 115, 269), (32, 131072, 170, 420)]


def host(name, free, total=16, idle=115, peak=269):
    return HostCapacity(name=name, free_vcpus=free, free_ram_mb=free * 4096, vcpus=total,
                        ram_mb=total * 4096, idle_watts=idle, peak_watts=peak)


def caches(count, vcpus=1, utilisation=1.0):
    return [Instance(f"c{i}", vcpus, 1024, utilisation) for i in range(count)]


def random_case(rng, share):
    hosts = []
    for index in range(rng.choice([4, 8, 12])):
        vcpus, ram, idle, peak = rng.choice(MODELS)
        used = rng.randint(1, vcpus - 1) if rng.random() < 0.4 else 0
        hosts.append(HostCapacity(f"h{index}", vcpus - used, ram - used * 4096, vcpus, ram,
                                  idle * rng.uniform(0.9, 1.1), peak * rng.uniform(0.9, 1.1)))
    count = max(rng.randint(1, 10), 3 if share else 1)
    instances = caches(count, rng.randint(1, 4), rng.uniform(0.2, 1.0))
    instances.append(Instance("lb", 1, 256, 1.0, serving=False))
    return instances, hosts


def assert_respects(instances, hosts, mapping, share=None):
    assert set(mapping) == {i.name for i in instances}
    by_name = {i.name: i for i in instances}
    cpu, ram, serving = collections.Counter(), collections.Counter(), collections.Counter()
    for name, host_name in mapping.items():
        cpu[host_name] += by_name[name].vcpus
        ram[host_name] += by_name[name].ram_mb
        serving[host_name] += by_name[name].vcpus * by_name[name].serving
    for h in hosts:
        assert cpu[h.name] <= h.free_vcpus and ram[h.name] <= h.free_ram_mb
    if share:
        total = sum(i.vcpus for i in instances if i.serving)
        assert max(serving.values()) <= share * total + 1e-9


def test_energy_counts_idle_watts_only_for_hosts_it_powers_on():
    hosts = [host("on", 8), host("off", 16)]
    mapping = {"c0": "on", "c1": "off"}
    dynamic = (269 - 115) / 16
    assert placement.energy_watts(caches(2, utilisation=0.5), hosts, mapping) == \
        pytest.approx(115 + 2 * dynamic * 0.5)
    assert placement.powered_on(hosts, mapping) == ["off"]


def test_fills_a_host_already_on_before_powering_another():
    hosts = [host("off-a", 16), host("on", 4), host("off-b", 16)]
    for place in (placement.place_exact, placement.place_greedy):
        assert set(place("eu", caches(4), hosts).values()) == {"on"}


@pytest.mark.parametrize("count, chosen", [
    (6, {"mid"}),   # 12 vCPUs: mid 115 + 12 x 9.625 = 230.5 W, big 170 + 12 x 7.8125 = 263.75 W
    (14, {"big"}),  # 28 vCPUs: big 388.75 W, mid + small 175 W idle and 24 vCPUs: too small
])
def test_powers_on_the_hosts_with_the_least_watts_for_the_load(count, chosen):
    hosts = [host("big", 32, 32, 170, 420), host("small", 8, 8, 60, 130), host("mid", 16)]
    for place in (placement.place_exact, placement.place_greedy):
        assert set(place("eu", caches(count, vcpus=2), hosts).values()) == chosen


def test_spread_keeps_each_host_under_its_share_and_leaves_the_lb_out_of_it():
    hosts = [host(f"h{i}", 16) for i in range(4)]
    instances = caches(4, vcpus=2) + [Instance("lb", 1, 256, serving=False)]
    for place in (placement.place_exact, placement.place_greedy):
        mapping = place("eu", instances, hosts, max_host_share=0.5)
        assert_respects(instances, hosts, mapping, share=0.5)
        assert len(set(mapping.values())) == 2  # two hosts suffice, energy picks two
    assert placement.place("eu", instances, hosts, "spread") == \
        placement.place_exact("eu", instances, hosts, max_host_share=0.5)


def test_spread_without_a_share_uses_the_default_and_fewest_hosts_ignores_it():
    assert placement.share_limit("spread", None) == placement.DEFAULT_SPREAD_SHARE
    assert placement.share_limit("spread", 0.25) == 0.25
    assert placement.share_limit("fewest_hosts", 0.25) is None
    with pytest.raises(ValueError, match="unknown placement objective"):
        placement.share_limit("random", None)


@pytest.mark.parametrize("share", [None, 0.5, 0.34])
def test_integer_program_and_heuristic_agree_on_small_cases(share):
    rng = random.Random(7)
    for _ in range(40):
        instances, hosts = random_case(rng, share)
        try:
            exact = placement.place_exact("eu", instances, hosts, share)
        except InsufficientCapacity:
            with pytest.raises(InsufficientCapacity):
                placement.place_greedy("eu", instances, hosts, share)
            continue
        greedy = placement.place_greedy("eu", instances, hosts, share)
        assert_respects(instances, hosts, exact, share)
        assert_respects(instances, hosts, greedy, share)
        assert placement.energy_watts(instances, hosts, greedy) == \
            pytest.approx(placement.energy_watts(instances, hosts, exact), rel=1e-9)


def test_pruning_dominated_hosts_keeps_the_optimum():
    rng = random.Random(11)
    for _ in range(30):
        share = rng.choice([None, 0.5])
        instances, hosts = random_case(rng, share)
        hosts += [HostCapacity(f"twin{i}", h.free_vcpus, h.free_ram_mb, h.vcpus, h.ram_mb,
                               h.idle_watts, h.peak_watts) for i, h in enumerate(hosts)]
        try:
            full = placement.place_exact("eu", instances, hosts, share, prune=False)
        except InsufficientCapacity:
            continue
        pruned = placement.place_exact("eu", instances, hosts, share)
        assert placement.energy_watts(instances, hosts, pruned) == \
            pytest.approx(placement.energy_watts(instances, hosts, full), rel=1e-9)


def test_caches_go_with_the_balancer_when_it_costs_nothing_more():
    """4 caches of 4 vCPUs and a balancer of 1 need two hosts of 16 either way: the
    balancer's host takes three caches, so a scale in empties the other host first."""
    instances = caches(4, vcpus=4) + [Instance("lb", 1, 256, 1.0, serving=False)]
    hosts = [host("a", 16), host("b", 16), host("c", 16)]
    mapping = placement.place("asia", instances, hosts)
    assert_respects(instances, hosts, mapping)
    on_lb_host = [n for n, h in mapping.items() if h == mapping["lb"] and n != "lb"]
    assert len(on_lb_host) == 3
    assert placement.energy_watts(instances, hosts, mapping) == pytest.approx(
        placement.energy_watts(instances, hosts, placement.place_exact("asia", instances, hosts)))


@pytest.mark.parametrize("anchored", ["a", "b"])
def test_a_new_cache_goes_to_the_anchored_host_of_equal_cost(anchored):
    """Both hosts are on with room: the cache goes where the region's balancer runs,
    whichever comes first by name (pruning keeps the anchored host)."""
    hosts = [host("a", 12), host("b", 15)]
    assert placement.place("asia", caches(1, vcpus=4), hosts, anchors={anchored}) == \
        {"c0": anchored}


def test_an_anchored_host_of_dearer_watts_takes_nothing_more():
    """Gathering never costs: a host of the same model only."""
    hosts = [host("a", 12), host("b", 15, peak=400)]
    assert placement.place("asia", caches(1, vcpus=4), hosts, anchors={"b"}) == {"c0": "a"}


def test_gathering_keeps_the_cost_and_the_limits_on_random_cases():
    rng = random.Random(13)
    for _ in range(40):
        share = rng.choice([None, 0.5])
        instances, hosts = random_case(rng, share)
        anchors = {h.name for h in hosts if rng.random() < 0.3}
        try:
            exact = placement.place_exact("eu", instances, hosts, share)
        except InsufficientCapacity:
            continue
        gathered = placement.place("eu", instances, hosts, "spread" if share else
                                   "fewest_hosts", share, anchors=anchors)
        assert_respects(instances, hosts, gathered, share)
        assert placement.energy_watts(instances, hosts, gathered) == \
            pytest.approx(placement.energy_watts(instances, hosts, exact), rel=1e-9)


def test_beyond_the_exact_limit_the_heuristic_places(monkeypatch):
    monkeypatch.setattr(placement, "EXACT_MAX_PAIRS", 0)
    hosts = [host(f"h{i}", 16) for i in range(3)]
    mapping = placement.place("eu", caches(10, vcpus=2), hosts)
    assert_respects(caches(10, vcpus=2), hosts, mapping)
    assert len(set(mapping.values())) == 2


@pytest.mark.parametrize("place", [placement.place, placement.place_exact, placement.place_greedy])
def test_not_enough_capacity_says_how_many_vcpus_are_missing(place):
    with pytest.raises(InsufficientCapacity) as caught:
        place("eu", caches(5, vcpus=2), [host("a", 4), host("b", 3)])
    assert (caught.value.region, caught.value.missing_vcpus, caught.value.needed_vcpus) == \
        ("eu", 3, 10)


@pytest.mark.parametrize("place", [placement.place_exact, placement.place_greedy])
def test_fragmented_capacity_misses_one_instances_worth(place):
    # 6 vCPUs free in all, but no host holds a 4-vCPU cache
    with pytest.raises(InsufficientCapacity) as caught:
        place("eu", caches(1, vcpus=4), [host("a", 3), host("b", 3)])
    assert (caught.value.missing_vcpus, caught.value.needed_vcpus) == (4, 4)


def test_nothing_to_place():
    assert placement.place("eu", [], [host("a", 4)]) == {}


def test_no_hosts_at_all():
    with pytest.raises(InsufficientCapacity) as caught:
        placement.place("eu", caches(2), [])
    assert (caught.value.missing_vcpus, caught.value.needed_vcpus) == (2, 2)
