"""Model files: the shipped defaults, their schema, and how curves are read."""
import copy
from pathlib import Path

import pytest
import yaml

from cdnaas.planning import models

MODELS = Path(__file__).resolve().parents[2] / "plugins" / "qoe_video" / "models"


@pytest.fixture(scope="module")
def vm():
    return models.load(MODELS / "vm.yaml")


@pytest.fixture(scope="module")
def container():
    return models.load(MODELS / "container.yaml")


@pytest.fixture
def document():
    return yaml.safe_load((MODELS / "vm.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name, technology", [("vm.yaml", "vm"), ("container.yaml", "container")])
def test_shipped_models_are_valid_name_the_paper_and_say_where_each_point_comes_from(name, technology):
    document = yaml.safe_load((MODELS / name).read_text(encoding="utf-8"))
    assert models.problems(document) == []
    assert document["technology"] == technology
    assert document["source"]["doi"] == "10.1109/TNSM.2017.2710300"
    assert any("linear" in a for a in document["assumptions"])
    points = (document["qoe"]["points"] + document["throughput"]["points"]
              + [p for c in document["response_time"] for p in c["points"]])
    assert all(("ref" if p["source"] == "measured" else "method") in p for p in points)
    assert all(p["source"] == "measured" for p in document["throughput"]["points"])


def test_table_iii_throughput_per_vcpu(vm, container):
    assert vm.requests_per_second(435, 10000) == 3822
    assert container.requests_per_second(435, 10000) == 8649
    assert vm.requests_per_second(73, 1000) == 12578
    assert container.requests_per_second(73, 1000) == 15928
    # linear between the measured concurrencies, held at the nearest one outside them
    assert vm.requests_per_second(435, 5500) == pytest.approx((6165 + 3822) / 2)
    assert vm.requests_per_second(435, 100) == 6165
    assert vm.requests_per_second(435, 50000) == 3822


def test_mos_is_piecewise_linear_held_below_the_first_point_and_floored_beyond_the_last(vm):
    assert vm.best_mos == 4.8
    assert vm.mos(1000) == 4.8          # below the first point: as the first
    assert vm.mos(5500) == 4.8          # interruptions start beyond 5500 on kvm
    assert vm.mos(9000) == pytest.approx(4.5 - 2.5 * 3000 / 6000)
    assert vm.mos(12000) == 2.0
    assert vm.mos(14400) == 1.0
    assert vm.mos(1e9) == models.MOS_FLOOR


def test_the_papers_load_points(vm, container):
    # kvm, 1 vCPU: excellent past 5000 viewers, stalls above ~5500-6000
    assert vm.mos(5000) == vm.best_mos and vm.mos(6500) < vm.best_mos
    # docker, 1 vCPU: no stalls up to 12000; 2 vCPUs: MOS 4.8 at 25000 viewers
    assert container.mos(12000) == container.best_mos
    assert container.mos(25000 / 2) == 4.8
    # docker degrades sharply past ~17000 (8.5K req/s)
    assert container.mos(17000) - container.mos(18000) > 2


def test_largest_load_meeting_a_mos_target(vm, container):
    assert vm.max_load_for_mos(4.0) == pytest.approx(7200)      # 6000 + 0.5 / 2.5 * 6000
    assert vm.max_load_for_mos(4.8) == 5500
    assert container.max_load_for_mos(4.0) == pytest.approx(17000 + 0.3 / 2.3 * 1000)
    assert vm.max_load_for_mos(4.9) is None


def test_response_time_curve_covers_lower_percentiles(vm, container):
    assert vm.response_curve(90).curve.at(25000) == 564.5
    assert container.response_curve(90).curve.at(25000) == 33.185
    assert vm.response_curve(50).percentile == 90
    assert vm.response_curve(50).video == "low"
    assert vm.response_curve(99) is None


def test_utilisation_of_hd_viewers(vm):
    # 8000 viewers on 2 vCPUs: 4000 req/s against 2 x 5384 req/s at 4000 connections
    capacity = 6165 - (6165 - 3822) * 3000 / 9000
    assert vm.utilisation(8000, 2) == pytest.approx(4000 / (2 * capacity))
    assert vm.utilisation(100000, 1) == 1.0


@pytest.mark.parametrize("change, field, words", [
    (lambda d: d["qoe"]["points"][0].pop("ref"), "qoe.points.0", "'ref' is a required"),
    (lambda d: d["qoe"]["points"][2].pop("method"), "qoe.points.2", "'method' is a required"),
    (lambda d: d["qoe"]["points"][2].update(mos=4.9), "qoe.points.2.mos", "must not rise"),
    (lambda d: d["qoe"]["points"][1].update(viewers_per_vcpu=5000), "qoe.points.1.viewers_per_vcpu",
     "must increase"),
    (lambda d: d["qoe"]["points"][0].update(mos=7), "qoe.points.0.mos", "maximum"),
    (lambda d: d.update(technology="xen"), "technology", "is not one of"),
    (lambda d: d["throughput"].update(vcpu_scaling="sublinear"), "throughput.vcpu_scaling",
     "'linear' was expected"),
    (lambda d: d["response_time"][0]["points"].append(
        {"viewers_per_vcpu": 30000, "max_ms": 100, "source": "interpolated", "method": "guess"}),
     "response_time.0.points.1.max_ms", "must not fall"),
    (lambda d: d["throughput"].update(points=d["throughput"]["points"][:2]), "throughput.points",
     "no point for the hd chunk size (435 KB)"),
    (lambda d: d.pop("source"), "", "'source' is a required"),
    (lambda d: d.update(colour="blue"), "", "Additional properties"),
])
def test_a_broken_model_is_refused_with_the_problem_named(document, change, field, words):
    broken = copy.deepcopy(document)
    change(broken)
    with pytest.raises(models.ModelError) as caught:
        models.parse(broken, origin="broken.yaml")
    assert any(f == field and words in problem for f, problem in caught.value.problems), \
        caught.value.problems
    assert "broken.yaml" in str(caught.value) and words in str(caught.value)


def test_missing_or_unparsable_files_are_refused(tmp_path):
    with pytest.raises(models.ModelError, match="cannot read"):
        models.load(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("qoe: [unclosed\n", encoding="utf-8")
    with pytest.raises(models.ModelError, match="does not parse"):
        models.load(bad)
