"""The qoe-video flavor as the Instance Manager sees it: its policy hook and the
test templates and models (:mod:`tests.support.im`)."""
from cdnaas.common import plugins
from cdnaas.im.observation import Observation
from cdnaas.planning import models
from cdnaas.sidr import service
from cdnaas_plugins.qoe_video import policy
from tests.support.im import VM_MODEL, small_model, template


def test_the_qoe_video_policy_hook_is_the_default_policy():
    flavor = plugins.load(plugins.FLAVORS, "qoe-video")
    document = template(VM_MODEL)
    observation = Observation(vcdn_id="v", now=None, template=document,
                              model=flavor.load_model(document), regions=[], hosts={})
    assert flavor.policy(observation) == [] == policy.decide(observation)


def test_the_template_and_small_model_are_valid(tmp_path, monkeypatch):
    monkeypatch.setenv("CDNAAS_MODEL_DIRS", str(tmp_path))
    name = small_model(tmp_path)
    service.validate(template(name))
    service.check_model(template(name))  # found in CDNAAS_MODEL_DIRS, as SIDR registers it
    assert template(name)["model"] == name
    assert models.named(name, models.plugin_folder(plugins.load(plugins.FLAVORS, "qoe-video"))) \
        .max_load_for_mos(4.0) == 12.0  # 12 viewers per vCPU at MOS 4
