"""Entering a network namespace from one thread (the local driver's way of starting VNF tools
without nsenter): the tests that start no process (the unit tier); the others, and what the
module covers, are in tests/system/test_local_netns.py."""

import pytest

from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.local import netns


def test_a_missing_namespace_is_named():
    with pytest.raises(VimError, match="cdnt_missing does not exist"):
        with netns.entered("cdnt_missing"):
            pass
