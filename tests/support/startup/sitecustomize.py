"""Imported by Python as it starts, in every process whose ``PYTHONPATH`` names this folder
(``tests/conftest.py`` puts it there for what the tests start): where a test set a
``CDNAAS_TEST_*`` variable and CDNaaS is importable, the faults of
:mod:`tests.support.faults` are installed before the process runs anything."""
import importlib.util
import os
import sys
from pathlib import Path

if any(name.startswith("CDNAAS_TEST_") for name in os.environ) \
        and importlib.util.find_spec("cdnaas") is not None:
    sys.path.append(str(Path(__file__).resolve().parents[3]))  # the repository: tests.support
    from tests.support import faults
    faults.install_if_asked()
