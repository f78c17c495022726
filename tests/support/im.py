"""Templates and models the Instance Manager tests run vCDNs of.

Flavor ``im-video`` is the ``qoe-video`` plugin (whose ``policy()`` hook is the
default elasticity policy) with a template naming the model the test picks,
by absolute path, and its own bounds on caches and vCPUs.
"""
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
FLAVOR = "im-video"
MODELS = REPO / "plugins" / "qoe_video" / "models"


def template(model, technology="vm", caches=(1, 16), vcpus=(1, 4)):
    """The qoe-video template as flavor ``im-video``, naming ``model`` (an absolute path)."""
    document = yaml.safe_load((REPO / "plugins/qoe_video/template.yaml").read_text())
    document.update(flavor=FLAVOR, technology=technology, model=str(model))
    document["vnfs"]["cache"]["instances"] = {"min": caches[0], "max": caches[1]}
    document["vnfs"]["cache"]["vcpus"] = {"min": vcpus[0], "max": vcpus[1]}
    return document


def small_model(path, points=((5, 4.8), (10, 4.5), (20, 2.0), (24, 1.0)),
                technology="container"):
    """A model file like the container one whose MOS falls at a few viewers per vCPU, so a
    handful of real clients load a cache; return its path."""
    document = yaml.safe_load((MODELS / f"{technology}.yaml").read_text())
    document["name"] = "im-test-small"
    document["qoe"]["points"] = [{"viewers_per_vcpu": v, "mos": m, "source": "interpolated",
                                  "method": "test"} for v, m in points]
    document["response_time"] = []
    Path(path).write_text(yaml.safe_dump(document))
    return Path(path)
