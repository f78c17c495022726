"""Placement applied on the local driver (root only): each VNF runs on its planned host's CPUs.

The operator maps hosts to CPU sets of this machine (``CDNAAS_LOCAL_HOST_CPUS``); every
process of a VNF may then run only on its planned host's CPUs (``Cpus_allowed_list`` of
``/proc/<pid>/status``), a VNF whose host is not mapped runs unpinned, and the SIG, the
deployment record and the IM's ``hosts power`` agree on where every VNF runs. The
calibration's load generator keeps working beside a pinned VNF. The OpenStack half
(servers on their planned compute hosts, a refused way falling back with the difference
recorded) is in ``tests/system/test_openstack_driver.py``.

These are the module's tests that start no process (the unit tier); the others are in
tests/service/test_placement_applied.py."""
import os

import pytest

from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.local import cgroups, loadgen


CPUS = sorted(os.sched_getaffinity(0))


def test_the_mapping_defaults_to_the_power_drivers_and_refuses_what_is_not_one(monkeypatch):
    monkeypatch.delenv("CDNAAS_LOCAL_HOST_CPUS", raising=False)
    monkeypatch.setenv("CDNAAS_POWER_LOCAL_CPUS", "eu-1=0-1,eu-2=2")
    assert cgroups.cpu_map() == {"eu-1": "0-1", "eu-2": "2"}
    monkeypatch.delenv("CDNAAS_POWER_LOCAL_CPUS")
    assert cgroups.cpu_map() == {}
    for wrong in ("eu-1", "eu-1=a", "=0", "eu-1=3-1"):
        monkeypatch.setenv("CDNAAS_LOCAL_HOST_CPUS", wrong)
        with pytest.raises(VimError, match="CDNAAS_LOCAL_HOST_CPUS"):
            cgroups.cpu_map()


def test_the_load_generator_leaves_a_pinned_vnf_on_its_hosts_cpus():
    with loadgen.pinned([os.getpid()], 1, {CPUS[-1]}) as generator:
        assert generator == (set(CPUS) - {CPUS[-1]} or None)
        assert os.sched_getaffinity(0) == set(CPUS)  # nothing was re-pinned
