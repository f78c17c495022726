"""Tiers as folders: ``tests/unit``, ``tests/service`` and ``tests/system`` each mark their
tests with their tier through their conftest (the markers are registered in pytest.ini)."""
from pathlib import Path

import pytest


def marking(conftest, tier):
    """A ``pytest_collection_modifyitems`` hook that marks ``tier`` every test under the
    folder of ``conftest`` (a conftest's hook sees the whole session's items, so it picks
    its own), first, so ``-m`` selects on it."""
    folder = Path(conftest).resolve().parent

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(items):
        for item in items:
            if folder in item.path.parents:
                item.add_marker(tier)

    return pytest_collection_modifyitems
