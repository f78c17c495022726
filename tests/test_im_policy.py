"""The qoe-video default policy on synthetic series: it reacts to a step and a ramp,
ignores noise, respects its cooldown, scales in only with margin, stays in bounds,
consolidates lightly used hosts, and says why."""
import dataclasses
import datetime as dt
import itertools
import random

import pytest

from cdnaas.im.observation import HostState, Observation, RegionSample, RegionState, VnfState
from cdnaas.planning import qoe
from cdnaas.planning import models
from cdnaas_plugins.qoe_video import policy
from tests.support.im import MODELS, VM_MODEL, template

MODEL = models.load(MODELS / "vm.yaml")  # MOS 4.8 to 5500 viewers/vCPU, 4.0 at 7200, 2.0 at 12000
SETTINGS = policy.DEFAULTS
OUT_LEVEL, IN_LEVEL = 4.0 + SETTINGS.out_margin, 4.0 + SETTINGS.in_margin
IN_LOAD = MODEL.max_load_for_mos(IN_LEVEL)  # viewers per vCPU at the scale-in level
START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


class Region:
    """One region driven sample by sample, as the IM drives the policy: each decision
    is carried out at once and restarts the region's history."""

    def __init__(self, caches=2, size=2, target=4.0, bounds=(1, 16)):
        self.caches, self.size, self.target = caches, size, target
        self.template = template(VM_MODEL, caches=bounds)
        self.history, self.decisions, self.estimate = [], [], None
        self.steps = 0

    @property
    def vcpus(self):
        return self.caches * self.size

    def observation(self, viewers):
        self.estimate = qoe.smooth(self.estimate, qoe.sample(MODEL, viewers, self.vcpus))
        now = START + dt.timedelta(seconds=10 * self.steps)
        self.history.append(RegionSample(at=now, viewers=viewers, mos=self.estimate,
                                         vcpus=self.vcpus))
        vnfs = [VnfState(f"r-cache-{i}", "cache", "h1", self.size, True)
                for i in range(self.caches)]
        region = RegionState(name="r", quality={"min_mos": self.target}, vnfs=vnfs,
                             history=list(self.history[-60:]))
        return Observation(vcdn_id="v", now=now, template=self.template, model=MODEL,
                           regions=[region], hosts={})

    def step(self, viewers):
        """Feed one sample; return the decision taken (applied), or None."""
        found = policy.decide(self.observation(viewers))
        self.steps += 1
        if not found:
            return None
        decision = found[0]
        self.decisions.append((self.steps, decision))
        self.caches = decision.caches
        self.history = []
        return decision

    def run(self, series):
        return [self.step(v) for v in series]


def per_vcpu(region, load):
    """Viewers putting ``load`` viewers on each of the region's cache vCPUs now."""
    return load * region.vcpus


def test_noise_around_a_steady_load_changes_nothing():
    region = Region(caches=2, size=2)
    rng = random.Random(7)
    # 5000 viewers/vCPU +-10%: inside the plateau with 4 vCPUs, far below target with 2
    region.run([per_vcpu(region, 5000) * rng.uniform(0.9, 1.1) for _ in range(600)])
    assert region.decisions == []


@pytest.mark.parametrize("load", range(5000, 7200, 300))
def test_noise_near_the_thresholds_never_reverses_a_decision(load):
    """+-5% per sample around every load from the plateau to the target (3 caches)."""
    for seed in range(8):
        region = Region(caches=3, size=2)
        rng = random.Random(seed)
        base = per_vcpu(region, load)
        region.run([base * rng.uniform(0.95, 1.05) for _ in range(300)])
        kinds = [d.kind for _step, d in region.decisions]
        assert all(a == b for a, b in itertools.pairwise(kinds)), (seed, region.decisions)
        assert len(kinds) <= 2


def test_a_step_is_met_within_two_samples_with_margin():
    region = Region(caches=2, size=2)
    region.run([per_vcpu(region, 5000)] * 20)
    surge = per_vcpu(region, 7500)  # MOS 3.9 with 4 vCPUs
    taken = region.run([surge] * 5)
    assert taken[0] is None and taken[1] is not None and taken[1].kind == "scale_out"
    assert MODEL.mos(surge / region.vcpus) >= IN_LEVEL  # sized with the margin
    assert region.decisions[0][1].caches == 3


def test_a_ramp_is_met_before_the_target_is_missed():
    region = Region(caches=4, size=2)
    viewers = per_vcpu(region, 4500)
    lowest = 5.0
    for _ in range(60):
        viewers *= 1.02  # +2% a sample: x3.3 in 60 samples, within the flavor's 16 caches
        lowest = min(lowest, MODEL.mos(viewers / region.vcpus))
        region.step(viewers)
    assert lowest >= 4.0, f"MOS fell to {lowest:.2f} before the caches followed"
    assert all(d.kind == "scale_out" for _s, d in region.decisions)


def test_no_scale_in_during_the_cooldown_after_a_change():
    region = Region(caches=2, size=2)
    region.run([per_vcpu(region, 5000)] * 3)
    region.run([per_vcpu(region, 8000)] * 2)
    assert region.decisions[-1][1].kind == "scale_out"
    changed_at = region.decisions[-1][0]
    region.run([1000] * 40)
    scale_in = [step for step, d in region.decisions if d.kind == "scale_in"]
    assert scale_in and scale_in[0] - changed_at >= SETTINGS.in_cooldown
    gaps = [b - a for a, b in itertools.pairwise(scale_in)]
    assert all(gap >= SETTINGS.in_cooldown for gap in gaps)


@pytest.mark.parametrize("load_with_one_fewer,scales_in", [(IN_LOAD + 100, False),
                                                            (IN_LOAD - 100, True)])
def test_scale_in_only_when_one_cache_fewer_keeps_the_margin(load_with_one_fewer, scales_in):
    region = Region(caches=3, size=2)
    viewers = load_with_one_fewer * 4  # on the 4 vCPUs left after removing one cache
    region.run([viewers] * 60)
    assert bool(region.decisions) is scales_in
    if scales_in:
        assert [(d.kind, d.caches) for _s, d in region.decisions] == [("scale_in", 2)]


def test_bounds_are_respected():
    full = Region(caches=2, size=2, bounds=(1, 2))
    full.run([per_vcpu(full, 9000)] * 30)
    assert full.decisions == []
    floor = Region(caches=1, size=2, bounds=(1, 4))
    floor.run([10] * 60)
    assert floor.decisions == []
    capped = Region(caches=2, size=2, bounds=(1, 3))
    capped.run([per_vcpu(capped, 20000)] * 3)
    assert [d.caches for _s, d in capped.decisions] == [3]


def test_regions_without_a_model_or_a_mos_target_are_left_alone():
    region = Region()
    observation = region.observation(10 ** 6)
    assert policy.decide(Observation(**{**observation.__dict__, "model": None})) == []
    timed = RegionState(**{**observation.regions[0].__dict__,
                           "quality": {"response_time": {"percentile": 90, "max_ms": 500}}})
    assert policy.decide(Observation(**{**observation.__dict__, "regions": [timed]})) == []


def test_a_decision_carries_its_samples_thresholds_and_counters():
    region = Region(caches=2, size=2)
    region.run([per_vcpu(region, 5000)] * 3 + [per_vcpu(region, 8000)] * 2)
    inputs = region.decisions[0][1].inputs
    assert inputs["thresholds"] == {"target": 4.0, "scale_out_below": OUT_LEVEL,
                                    "scale_in_at_least": IN_LEVEL}
    assert inputs["counters"] == {"below": 2, "needed": SETTINGS.out_samples}
    assert inputs["model"] == MODEL.name and inputs["caches"] == 2
    assert inputs["samples"][-1]["viewers"] == 32000 and inputs["samples"][-1]["vcpus"] == 4
    assert inputs["samples"][-1]["predicted_mos"] < OUT_LEVEL


UNPACKED = dataclasses.replace(SETTINGS, pack=False)  # scale in one by one only


def host(name, reserved, vcpus=16):
    return HostState(name=name, region="r", vcpus=vcpus, reserved_vcpus=reserved, enabled=True,
                     idle_watts=115.0, peak_watts=269.0)


def stable(vnfs, hosts, viewers, caches=3, size=2):
    """An observation of a region at rest for long enough to scale in, with ``vnfs`` on ``hosts``."""
    history = [RegionSample(at=START, viewers=viewers, mos=4.8, vcpus=caches * size)] * 20
    region = RegionState(name="r", quality={"min_mos": 4.0}, vnfs=vnfs, history=history)
    return Observation(vcdn_id="v", now=START, template=template(VM_MODEL),
                       model=MODEL, regions=[region], hosts={h.name: h for h in hosts})


def test_a_lightly_used_host_is_emptied_through_the_fuller_one():
    vnfs = [VnfState("r-lb-0", "load_balancer", "h1", 1, True),
            VnfState("r-cache-0", "cache", "h1", 2, True),
            VnfState("r-cache-1", "cache", "h1", 2, True),
            VnfState("r-cache-2", "cache", "h2", 2, True)]
    hosts = [host("h1", 5), host("h2", 2), host("h3", 0)]
    # 5000/vCPU on 6 vCPUs; with one cache fewer 7500/vCPU (MOS 3.9): no scale in
    decided = policy.decide(stable(vnfs, hosts, 30000))
    assert [(d.kind, d.caches) for d in decided] == [("consolidate", 4)]
    assert decided[0].inputs["light_host"]["name"] == "h2"
    assert decided[0].inputs["fuller_host"]["name"] == "h1"


def test_no_consolidation_when_the_host_has_other_tenants_or_nowhere_to_go():
    vnfs = [VnfState("r-lb-0", "load_balancer", "h1", 1, True),
            VnfState("r-cache-0", "cache", "h1", 2, True),
            VnfState("r-cache-1", "cache", "h1", 2, True),
            VnfState("r-cache-2", "cache", "h2", 2, True)]
    shared = [host("h1", 5), host("h2", 6), host("h3", 0)]  # h2 also holds another vCDN
    assert policy.decide(stable(vnfs, shared, 30000)) == []
    full = [host("h1", 16), host("h2", 2), host("h3", 0)]  # only the empty h3 would take it
    assert policy.decide(stable(vnfs, full, 30000)) == []


def test_packing_scales_in_by_every_cache_of_the_lightest_host_so_that_it_empties():
    vnfs = [VnfState("r-lb-0", "load_balancer", "h1", 1, True),
            VnfState("r-cache-0", "cache", "h1", 2, True),
            VnfState("r-cache-1", "cache", "h1", 2, True),
            VnfState("r-cache-2", "cache", "h2", 2, True),
            VnfState("r-cache-3", "cache", "h2", 2, True)]
    hosts = [host("h1", 16), host("h2", 4, vcpus=4)]
    [decided] = policy.decide(stable(vnfs, hosts, 10000, caches=4))
    assert (decided.kind, decided.caches) == ("scale_in", 2)
    assert decided.inputs["counters"]["caches_removed"] == 2 and "empties it" in decided.reason
    assert decided.inputs["emptied_host"] == "h2"
    # 2 caches fewer would not hold 30000 viewers (7500/vCPU), one fewer would (5000/vCPU):
    # one by one, as without packing
    [one] = policy.decide(stable(vnfs, hosts, 30000, caches=4))
    assert (one.kind, one.caches) == ("scale_in", 3)
    assert policy.decide(stable(vnfs, hosts, 10000, caches=4), UNPACKED)[0].caches == 3


def test_a_lone_cache_moves_to_the_host_its_balancer_keeps_on():
    """The balancer alone on h2, the one cache on h1: a cache more goes to h2 (SO puts
    caches on the balancer's host when it costs the same, though h1 comes first by name),
    so the next scale in empties h1; the region ends on one host instead of two."""
    vnfs = [VnfState("r-lb-0", "load_balancer", "h2", 1, True),
            VnfState("r-cache-0", "cache", "h1", 2, True)]
    hosts = [host("h1", 2), host("h2", 1), host("h3", 0)]
    [decided] = policy.decide(stable(vnfs, hosts, 5000, caches=1))
    assert (decided.kind, decided.caches) == ("consolidate", 2)
    assert decided.inputs["light_host"]["name"] == "h1"
    assert decided.inputs["fuller_host"]["name"] == "h2"
