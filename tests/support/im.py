"""Templates and models the Instance Manager tests run vCDNs of.

Flavor ``im-video`` is the ``qoe-video`` plugin (whose ``policy()`` hook is the
default elasticity policy) with a template naming the model the test picks,
by absolute path, and its own bounds on caches and vCPUs.
"""
import contextlib
import json
import time
from pathlib import Path

import requests
import yaml

from tests.support.api import populate
from tests.support.stack import running_stack

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


@contextlib.contextmanager
def modelled_stack(tmp):
    """A populated five-process stack on the noop driver whose caches report the viewers
    :func:`set_viewers` writes (``CDNAAS_NOOP_LOAD_FILE``), with flavor ``im-video`` on
    the vm model registered."""
    load = Path(tmp) / "load.json"
    load.write_text("{}")
    with running_stack(None, tmp, extra_env={"CDNAAS_NOOP_LOAD_FILE": str(load)}) as running:
        populate(running)
        sidr = requests.post(f"{running.urls['sidr']}/sidr/v1/templates",
                             json=template(MODELS / "vm.yaml"), timeout=10)
        assert sidr.status_code == 201, sidr.text
        running.load = load
        yield running


def set_viewers(stack, vcdn_id, **regions):
    """Viewers per region of ``vcdn_id`` from now on (``eu_west=8000`` is region eu-west)."""
    stack.load.write_text(json.dumps({vcdn_id: {r.replace("_", "-"): v
                                                for r, v in regions.items()}}))


def eventually(check, what, timeout=40):
    """Poll ``check()`` until it returns something true; return it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout} s")
