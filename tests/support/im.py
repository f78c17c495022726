"""Templates and models the Instance Manager tests run vCDNs of.

Flavor ``im-video`` is the ``qoe-video`` plugin (whose ``policy()`` hook is the
default elasticity policy) with a template naming the model the test picks and
its own bounds on caches and vCPUs. A template names its model relative to the
plugin's folder (:data:`VM_MODEL`) or, for a test's own model
(:func:`small_model`), by file name in a folder the test lists in
``CDNAAS_MODEL_DIRS``, as an operator would.
"""
import contextlib
import json
import time
from pathlib import Path

import yaml

from tests.support.api import populate
from tests.support.stack import running_stack

REPO = Path(__file__).resolve().parents[2]
FLAVOR = "im-video"
MODELS = REPO / "plugins" / "qoe_video" / "models"
VM_MODEL = "models/vm.yaml"  # as the qoe-video plugin's template names it
SMALL_MODEL = "im-test-small.yaml"


def template(model, technology="vm", caches=(1, 16), vcpus=(1, 4)):
    """The qoe-video template as flavor ``im-video``, naming ``model`` as templates do
    (relative to the plugin's folder or to a folder of ``CDNAAS_MODEL_DIRS``)."""
    document = yaml.safe_load((REPO / "plugins/qoe_video/template.yaml").read_text())
    document.update(flavor=FLAVOR, technology=technology, model=model)
    document["vnfs"]["cache"]["instances"] = {"min": caches[0], "max": caches[1]}
    document["vnfs"]["cache"]["vcpus"] = {"min": vcpus[0], "max": vcpus[1]}
    return document


def small_model(folder, points=((5, 4.8), (10, 4.5), (20, 2.0), (24, 1.0)),
                technology="container"):
    """Write :data:`SMALL_MODEL` into ``folder`` (for ``CDNAAS_MODEL_DIRS``): a model like
    the container one whose MOS falls at a few viewers per vCPU, so a handful of real
    clients load a cache; return its name for :func:`template`."""
    document = yaml.safe_load((MODELS / f"{technology}.yaml").read_text())
    document["name"] = "im-test-small"
    document["qoe"]["points"] = [{"viewers_per_vcpu": v, "mos": m, "source": "interpolated",
                                  "method": "test"} for v, m in points]
    document["response_time"] = []
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / SMALL_MODEL).write_text(yaml.safe_dump(document))
    return SMALL_MODEL


@contextlib.contextmanager
def modelled_stack(tmp):
    """A populated five-process stack on the noop driver whose caches report the viewers
    :func:`set_viewers` writes (``CDNAAS_TEST_NOOP_LOAD_FILE``), with flavor ``im-video`` on
    the vm model registered."""
    load = Path(tmp) / "load.json"
    load.write_text("{}")
    with running_stack(None, tmp, extra_env={"CDNAAS_TEST_NOOP_LOAD_FILE": str(load)}) as running:
        populate(running)
        sidr = running.operator.call("POST", "/templates", json=template(VM_MODEL))
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
