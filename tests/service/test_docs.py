"""The documentation site builds without a warning, shows what it is generated from (every
declared setting, every documented route), and the README stays the short front page
that links into it.

Its tests that start no process are in tests/unit/test_docs_units.py (the unit tier)."""
import html
import re
import subprocess
import sys

import pytest
import yaml

from cdnaas.common import settings
from tests.unit.test_docs_units import REPO

#: the API reference's pages and the document each is generated from
API_PAGES = {"customer": "api.yaml", "so": "so.yaml", "sidr": "sidr.yaml", "ro": "ro.yaml",
             "im": "im.yaml"}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built as CI builds it: warnings are errors, every one reported."""
    out = tmp_path_factory.mktemp("docs")
    built = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         str(REPO / "docs"), str(out)], capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    return out


def page_text(site, name):
    """The text a reader sees on page ``name`` (tags dropped, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", "", (site / f"{name}.html").read_text()))


def test_the_configuration_reference_shows_every_declared_setting(site):
    text = page_text(site, "configuration")
    missing = [s.name for s in settings.DECLARED if s.name not in text]
    assert missing == []
    assert all(title in text for title in settings.GROUPS.values())
    assert "|---|" not in text, "a settings table was shown as text, not rendered"


@pytest.mark.parametrize("page, document", sorted(API_PAGES.items()))
def test_the_api_reference_shows_every_documented_route(site, page, document):
    spec = yaml.safe_load((REPO / "api-spec" / document).read_text())
    text = page_text(site, f"api/{page}")
    routes = [(method.upper(), path) for path, item in spec["paths"].items()
              for method in item if method in ("get", "put", "post", "patch", "delete")]
    assert routes
    assert [route for route in routes if f"{route[0]} {route[1]}" not in text] == []
    assert ".. http:" not in text, "the reference's markup was shown as text, not rendered"
    assert spec["info"]["description"].split()[0] in text  # the document's own description


def test_the_vim_driver_guide_shows_the_interface_from_its_docstrings(site):
    text = page_text(site, "vim-drivers")
    for method in ("deploy", "update", "restore", "terminate", "health", "cleanup"):
        assert f"{method}(" in text, method
