"""Placement applied on the local driver (root only): the tests that start no process (the unit
tier); the others, and what the module covers, are in
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
