"""Sphinx configuration of the CDNaaS documentation site.

Build it (what ``tests/service/test_docs.py`` runs, warnings as errors)::

    .venv/bin/sphinx-build -W --keep-going -b html docs /tmp/cdnaas-docs

Pages are Markdown (MyST); the configuration reference is generated from
``cdnaas/common/settings.py`` (``_ext/cdnaas_settings.py``), the API reference from
``api-spec/`` (sphinxcontrib-openapi) and the driver and plugin interfaces from their
docstrings (autodoc).
"""
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS / "_ext"), str(DOCS.parent)]

project = "CDNaaS"
copyright = "CDNaaS developers"  # pylint: disable=redefined-builtin

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinxcontrib.openapi",
    "cdnaas_settings",
    "openapi_info",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# headings become link targets (`[the IM](instance-manager.md#heal)`) up to level 3
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"

html_theme = "alabaster"
html_title = "CDNaaS"
html_theme_options = {"description": "CDN-as-a-Service for a telco cloud",
                      "fixed_sidebar": True, "page_width": "1200px", "sidebar_width": "260px"}
