"""A flavor added as its own package to a RUNNING stack (local driver): the tests that start no
process (the unit tier); the others, and what the module covers, are in
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
