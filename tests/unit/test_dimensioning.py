"""Dimensioning: hand-computed cases from the paper's figures and the edge cases."""
from pathlib import Path

import pytest

from cdnaas.common import errors
from cdnaas.planning import dimensioning, models

MODELS = Path(__file__).resolve().parents[2] / "plugins" / "qoe_video" / "models"
CACHE = {"instances": {"min": 1, "max": 16}, "vcpus": {"min": 1, "max": 4}}


@pytest.fixture(scope="module")
def vm():
    return models.load(MODELS / "vm.yaml")


@pytest.fixture(scope="module")
def container():
    return models.load(MODELS / "container.yaml")


def mos(target):
    return {"min_mos": target}


def rt(percentile, max_ms):
    return {"response_time": {"percentile": percentile, "max_ms": max_ms}}


def test_8000_hd_viewers_at_mos_4_need_two_vcpus_on_vm_but_one_on_container(vm, container):
    assert dimensioning.required_vcpus(vm, "eu", 8000, mos(4.0)) == 2
    assert dimensioning.required_vcpus(container, "eu", 8000, mos(4.0)) == 1


@pytest.mark.parametrize("demand, target, vcpus", [
    (5000, 4.8, 1),     # kvm, 1 vCPU: excellent at 5000 viewers
    (5500, 4.8, 1),     # ... up to 5500
    (5501, 4.8, 2),
    (7200, 4.0, 1),     # MOS 4.0 is reached at exactly 7200 viewers per vCPU
    (7201, 4.0, 2),
    (14400, 4.0, 2),    # 2 x 7200: no extra vCPU from float noise
    (12000, 2.0, 1),    # 12000 viewers on 1 vCPU: MOS 2.0 (2.5 stalls per minute)
    (50000, 4.0, 7),
])
def test_vm_hand_computed(vm, demand, target, vcpus):
    assert dimensioning.required_vcpus(vm, "eu", demand, mos(target)) == vcpus


@pytest.mark.parametrize("demand, target, vcpus", [
    (12000, 4.8, 1),    # docker, 1 vCPU: no stalls up to 12000
    (25000, 4.8, 2),    # docker, 2 vCPUs: MOS 4.8 at 25000
    (17000, 4.3, 1),
    (23000, 4.0, 2),
])
def test_container_hand_computed(container, demand, target, vcpus):
    assert dimensioning.required_vcpus(container, "eu", demand, mos(target)) == vcpus


def test_the_planned_vcpus_are_the_fewest_that_meet_the_target(vm, container):
    for model in (vm, container):
        for demand in range(500, 120000, 997):
            vcpus = dimensioning.required_vcpus(model, "eu", demand, mos(3.6))
            assert model.mos(demand / vcpus) >= 3.6 - 1e-9
            assert vcpus == 1 or model.mos(demand / (vcpus - 1)) < 3.6


def test_response_time_sla_point_from_the_paper(vm, container):
    # kvm, 1 vCPU, 25000 viewers of low-quality chunks: p90 564.5 ms (docker: 33.185 ms)
    assert dimensioning.required_vcpus(vm, "eu", 25000, rt(90, 600)) == 1
    assert dimensioning.required_vcpus(vm, "eu", 25001, rt(90, 600)) == 2
    assert dimensioning.required_vcpus(container, "eu", 60000, rt(90, 40)) == 3
    # a p90 bound also bounds the median
    assert dimensioning.required_vcpus(vm, "eu", 25000, rt(50, 600)) == 1


def test_a_mos_above_the_models_best_names_the_region_and_the_best(vm):
    with pytest.raises(dimensioning.TargetUnreachable) as caught:
        dimensioning.required_vcpus(vm, "eu-west", 1000, mos(4.9))
    assert isinstance(caught.value, errors.Unprocessable)
    assert caught.value.region == "eu-west" and caught.value.best == 4.8
    assert "eu-west" in caught.value.message and "4.8" in caught.value.message


def test_response_time_targets_beyond_the_model(vm):
    with pytest.raises(dimensioning.TargetUnreachable, match="564.5 ms") as caught:
        dimensioning.required_vcpus(vm, "eu", 1000, rt(90, 100))
    assert caught.value.best == 564.5
    with pytest.raises(dimensioning.TargetUnreachable, match="p99.*modelled: p90"):
        dimensioning.required_vcpus(vm, "eu", 1000, rt(99, 1000))


@pytest.mark.parametrize("vcpus, cache, min_instances, split", [
    (1, CACHE, 1, (1, 1)),
    (4, CACHE, 1, (1, 4)),
    (5, CACHE, 1, (2, 3)),      # equal caches: one vCPU more than needed
    (8, CACHE, 1, (2, 4)),
    (64, CACHE, 1, (16, 4)),
    (1, CACHE, 2, (2, 1)),      # a floor on instances (spreading)
    (3, {"instances": {"min": 2, "max": 4}, "vcpus": {"min": 2, "max": 4}}, 1, (2, 2)),
])
def test_split_into_the_fewest_equal_caches(vcpus, cache, min_instances, split):
    assert dimensioning.split("eu", vcpus, cache, min_instances) == split


def test_more_than_the_flavor_allows_names_the_region_and_the_missing_vcpus(vm):
    # 500000 viewers at MOS 4 on kvm: ceil(500000 / 7200) = 70 vCPUs, 16 x 4 = 64 allowed
    with pytest.raises(dimensioning.FlavorTooSmall) as caught:
        dimensioning.dimension(vm, "us-east", 500000, mos(4.0), CACHE)
    assert isinstance(caught.value, errors.Unprocessable)
    assert (caught.value.region, caught.value.missing_vcpus, caught.value.needed_vcpus) == \
        ("us-east", 6, 70)
    assert "us-east" in caught.value.message and "6 vCPUs missing" in caught.value.message
    assert caught.value.details[0]["missing_vcpus"] == 6


def test_a_floor_of_instances_above_the_flavors_maximum_is_refused():
    with pytest.raises(errors.Unprocessable, match="at least 5 caches"):
        dimensioning.split("eu", 2, {"instances": {"min": 1, "max": 4}, "vcpus": CACHE["vcpus"]}, 5)


def test_dimension_sizes_a_region(vm):
    sizing = dimensioning.dimension(vm, "eu", 30000, mos(4.0), CACHE)
    assert (sizing.required_vcpus, sizing.instances, sizing.vcpus_per_instance) == (5, 2, 3)
    assert sizing.vcpus == 6 and sizing.viewers_per_vcpu == 5000
