"""The qoe-video flavor as the Instance Manager sees it: its policy hook and the
test templates and models (:mod:`tests.support.im`)."""
from cdnaas.common import plugins
from cdnaas.im.observation import Observation
from cdnaas.planning import models
from cdnaas.sidr import service
from cdnaas_plugins.qoe_video import policy
from tests.support.im import MODELS, small_model, template


def test_the_qoe_video_policy_hook_is_the_default_policy():
    flavor = plugins.load(plugins.FLAVORS, "qoe-video")
    document = template(MODELS / "vm.yaml")
    observation = Observation(vcdn_id="v", now=None, template=document,
                              model=flavor.load_model(document), regions=[], hosts={})
    assert flavor.policy(observation) == [] == policy.decide(observation)


def test_the_template_and_small_model_are_valid(tmp_path):
    path = small_model(tmp_path / "small.yaml")
    service.validate(template(path))
    assert template(path)["model"] == str(path)
    assert models.load(path).max_load_for_mos(4.0) == 12.0  # 12 viewers per vCPU at MOS 4
