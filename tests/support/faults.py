"""The faults and the load the tests inject into the VIM drivers, from outside the runtime
package: ``cdnaas/`` holds no setting or hook that only tests use.

A test asks for a fault with one of :data:`VARIABLES`, read at call time like a setting:

- ``CDNAAS_TEST_NOOP_FAIL_HOSTS``: creating a ``noop`` VNF on one of these hosts (comma
  separated) fails, as a real driver's boot fails: what the action created is undone.
- ``CDNAAS_TEST_NOOP_UNHEALTHY_HOSTS``: ``noop`` VNFs on these hosts report unhealthy.
- ``CDNAAS_TEST_NOOP_STEP_DELAY``: seconds each ``noop`` VNF takes to be created or
  removed (a replica is killed in the middle of an operation).
- ``CDNAAS_TEST_NOOP_LOAD_FILE``: JSON of viewers per region, ``{"<deployment id>":
  {"<region>": viewers}}``, that a ``noop`` driver made without a ``load`` turns into
  modelled metrics and logs (the simulated plant of the IM's stack tests).
- ``CDNAAS_TEST_LOCAL_STEP_DELAY``: seconds a ``local`` step that boots nginx VNFs lasts
  after its last VNF answers, and a removal waits before it starts (a service is killed
  inside a step: ``tests/system/test_crash.py``).

The ``local`` driver's failures need no hook: :func:`local_host_fails` maps a host to a
CPU this machine does not have (the operator's ``CDNAAS_LOCAL_HOST_CPUS``), so its VNFs
really fail to start.

:func:`install` wraps the drivers' classes (each wrapper does nothing while its variable
is unset). ``tests/conftest.py`` installs them in the test process and puts
:data:`STARTUP` first on ``PYTHONPATH``, so that every Python process a test starts (a
stack's services, ``cdnaas up``, a compose container given the folder) imports its
``sitecustomize`` at start-up, which installs them there when a ``CDNAAS_TEST_*``
variable is set.
"""
import functools
import inspect
import json
import os
import time
from pathlib import Path

#: the folder whose ``sitecustomize.py`` installs the faults in a process at start-up
STARTUP = Path(__file__).resolve().parent / "startup"

NOOP_FAIL_HOSTS = "CDNAAS_TEST_NOOP_FAIL_HOSTS"
NOOP_UNHEALTHY_HOSTS = "CDNAAS_TEST_NOOP_UNHEALTHY_HOSTS"
NOOP_STEP_DELAY = "CDNAAS_TEST_NOOP_STEP_DELAY"
NOOP_LOAD_FILE = "CDNAAS_TEST_NOOP_LOAD_FILE"
LOCAL_STEP_DELAY = "CDNAAS_TEST_LOCAL_STEP_DELAY"
VARIABLES = (NOOP_FAIL_HOSTS, NOOP_UNHEALTHY_HOSTS, NOOP_STEP_DELAY, NOOP_LOAD_FILE,
             LOCAL_STEP_DELAY)
#: a CPU number no machine running the tests has: pinning to it fails
NO_SUCH_CPU = 4095

_INSTALLED = []


def local_host_fails(*hosts):
    """The value of ``CDNAAS_LOCAL_HOST_CPUS`` on which the ``local`` driver's VNFs on
    ``hosts`` fail to start: their CPU group cannot be pinned (:func:`.cgroups.create`)."""
    return ";".join(f"{host}={NO_SUCH_CPU}" for host in hosts)


def install():
    """Wrap the ``noop`` and ``local`` drivers with the faults of :data:`VARIABLES`
    (once per process)."""
    if _INSTALLED:
        return
    from cdnaas.ro.vim.local.driver import LocalDriver
    from cdnaas.ro.vim.noop import NoopDriver
    _wrap(NoopDriver, "__init__", _loaded_from_file)
    _wrap(NoopDriver, "_create", _failing_or_slow_create)
    _wrap(NoopDriver, "terminate", _reporting(_noop_removal_delay))
    _wrap(NoopDriver, "health", _unhealthy_hosts)
    for action in ("deploy", "update", "restore"):
        _wrap(LocalDriver, action, _reporting(_local_boot_delay))
    _wrap(LocalDriver, "terminate", _reporting(_local_removal_delay))
    _INSTALLED.append(True)


def install_if_asked():
    """:func:`install` where a ``CDNAAS_TEST_*`` variable is set (a process at start-up)."""
    if any(os.environ.get(name) for name in VARIABLES):
        install()


def _wrap(cls, name, wrapper):
    """Replace ``cls.name`` by ``wrapper(original)`` (the original must be there)."""
    original = cls.__dict__[name]
    setattr(cls, name, functools.wraps(original)(wrapper(original)))


def _hosts(variable):
    return {h.strip() for h in os.environ.get(variable, "").split(",") if h.strip()}


def _seconds(variable):
    return float(os.environ.get(variable) or 0)


# -- noop --------------------------------------------------------------------------------

def _loaded_from_file(original):
    def __init__(self, load=None, *args, **kwargs):
        original(self, load or _viewers_in_file, *args, **kwargs)
    return __init__


def _viewers_in_file(deployment_id):
    """``{region: viewers}`` of ``deployment_id`` in the ``CDNAAS_TEST_NOOP_LOAD_FILE``
    (none while the variable is unset or the file absent)."""
    path = os.environ.get(NOOP_LOAD_FILE)
    if not path or not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as handle:
        return json.load(handle).get(deployment_id, {})


def _failing_or_slow_create(original):
    from cdnaas.ro.vim.base import DeploymentFailed

    def _create(self, deployment_id, vnf, address):
        if vnf.host in _hosts(NOOP_FAIL_HOSTS):
            raise DeploymentFailed(f"host {vnf.host} refused VNF {vnf.name} "
                                   f"(listed in {NOOP_FAIL_HOSTS})")
        time.sleep(_seconds(NOOP_STEP_DELAY))
        return original(self, deployment_id, vnf, address)
    return _create


def _unhealthy_hosts(original):
    def health(self, deployment):
        unhealthy = _hosts(NOOP_UNHEALTHY_HOSTS)
        hosts = {v.name: v.host for v in deployment.vnfs}
        found = original(self, deployment)
        for vnf in found:
            if hosts[vnf.name] in unhealthy:
                vnf.healthy = False
                vnf.detail = f"host {hosts[vnf.name]} is listed in {NOOP_UNHEALTHY_HOSTS}"
        return found
    return health


def _noop_removal_delay(_step, done, _total):
    """Each VNF removed takes ``CDNAAS_TEST_NOOP_STEP_DELAY`` s before it is reported."""
    return (_seconds(NOOP_STEP_DELAY), 0) if done > 0 else (0, 0)


# -- local -------------------------------------------------------------------------------

def _local_boot_delay(step, done, total):
    """A step booting nginx VNFs ends ``CDNAAS_TEST_LOCAL_STEP_DELAY`` s after its last
    VNF answered: the delay comes before its last report."""
    from cdnaas.ro.vim import steps
    booting = step in (steps.BOOT_CACHES, steps.CONFIGURE_LOAD_BALANCERS)
    return (_seconds(LOCAL_STEP_DELAY), 0) if booting and done == total > 0 else (0, 0)


def _local_removal_delay(_step, done, _total):
    """A removal waits ``CDNAAS_TEST_LOCAL_STEP_DELAY`` s once reported started."""
    return (0, _seconds(LOCAL_STEP_DELAY)) if done == 0 else (0, 0)


def _reporting(delays):
    """A wrapper of a driver action whose ``progress`` waits ``delays(step, done, total)``
    = (seconds before, seconds after) around each report."""
    def wrapper(original):
        signature = inspect.signature(original)

        def action(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            report = bound.arguments["progress"]

            def progress(step, done, total):
                before, after = delays(step, done, total)
                time.sleep(before)
                report(step, done, total)
                time.sleep(after)
            bound.arguments["progress"] = progress
            return original(*bound.args, **bound.kwargs)
        return action
    return wrapper
