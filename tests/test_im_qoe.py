"""The QoE estimate: the model's MOS at viewers per vCPU, smoothed as the paper does."""
import pytest

from cdnaas.planning import qoe
from cdnaas.planning import models
from tests.support.im import MODELS

MODEL = models.load(MODELS / "vm.yaml")


def test_each_estimate_is_three_tenths_the_last_and_seven_tenths_the_sample():
    estimates, previous = [], None
    for sample in (4.8, 2.0, 2.0, 4.8):
        previous = qoe.smooth(previous, sample)
        estimates.append(previous)
    assert estimates == pytest.approx([4.8, 0.3 * 4.8 + 0.7 * 2.0, 0.3 * 2.84 + 0.7 * 2.0,
                                       0.3 * 2.252 + 0.7 * 4.8])


def test_without_a_sample_there_is_no_estimate():
    assert qoe.smooth(4.5, None) is None
    assert qoe.smooth(None, 3.0) == 3.0


def test_a_sample_is_the_models_mos_at_viewers_per_vcpu():
    assert qoe.sample(MODEL, 10000, 2) == MODEL.mos(5000) == 4.8
    assert qoe.sample(MODEL, 36000, 4) == pytest.approx(4.5 - 3000 / 6000 * 2.5)
    assert qoe.sample(MODEL, 10 ** 6, 1) == models.MOS_FLOOR  # beyond the model: the floor


@pytest.mark.parametrize("model,viewers,vcpus", [(None, 10, 1), (MODEL, 10, 0), (MODEL, None, 1)])
def test_no_model_no_vcpus_or_no_viewers_means_no_sample(model, viewers, vcpus):
    assert qoe.sample(model, viewers, vcpus) is None
