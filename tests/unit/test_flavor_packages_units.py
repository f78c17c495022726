"""A flavor added as its own package to a RUNNING stack (local driver): the operator
installs ``examples/cdnaas-small-objects`` with pip while the five services run,
registers its template, and a vCDN of it runs the flavor's own nginx config and serves
as that config says (gzip, browser caching of assets, its header), through the flavor's
origin shield. No service restarts.
The package is uninstalled at the end, so the environment is left as it was found.

These are the module's tests that start no process (the unit tier); the others are in
tests/system/test_flavor_packages.py."""
from pathlib import Path

import yaml

from tests.support.flavors import SMALL_OBJECTS


TEMPLATE = SMALL_OBJECTS / "cdnaas_small_objects" / "template.yaml"


def test_the_example_template_names_its_own_files():
    document = yaml.safe_load(TEMPLATE.read_text())
    package = Path(TEMPLATE).parent
    assert (package / document["model"]).is_file()
    assert (package / "templates" / document["vnfs"]["cache"]["config_templates"][0]).is_file()
