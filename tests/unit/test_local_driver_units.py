"""The local driver with real processes and real queries: the tests that start no process (the
unit tier); the others, and what the module covers, are in
tests/system/test_local_driver.py."""
import os

import pytest

from cdnaas.ro.vim.base import PrerequisitesMissing
from cdnaas.ro.vim.local.driver import LocalDriver


def test_without_root_the_driver_says_so(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(PrerequisitesMissing, match="root"):
        LocalDriver().check_prerequisites()
