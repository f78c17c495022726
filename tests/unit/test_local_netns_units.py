"""Entering a network namespace from one thread (the local driver's way of
starting VNF tools without nsenter): only that thread moves, and it comes back;
deleting namespaces stops what still runs in them.

These are the module's tests that start no process (the unit tier); the others are in
tests/system/test_local_netns.py."""

import pytest

from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.local import netns


def test_a_missing_namespace_is_named():
    with pytest.raises(VimError, match="cdnt_missing does not exist"):
        with netns.entered("cdnt_missing"):
            pass
