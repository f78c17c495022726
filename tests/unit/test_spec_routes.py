"""Every route a service serves is in its OpenAPI document, and vice versa."""
import importlib
import re

import pytest
from openapi_spec_validator import validate
from openapi_spec_validator.readers import read_from_filename

from cdnaas.common import config
from cdnaas.db import migrate
from cdnaas.db.engine import Database

METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE"}


def _create(service, tmp_path):
    module = importlib.import_module(f"cdnaas.{service}.app")
    url = f"sqlite:///{tmp_path / 'routes.db'}"
    migrate.upgrade(service, url)
    database = Database(url)
    kwargs = {"background": False} if service in ("so", "im") else {}
    if service == "ro":
        from cdnaas.ro.vim.noop import NoopDriver
        kwargs["driver"] = NoopDriver()
    return module.create_app(database, **kwargs)


@pytest.mark.parametrize("service", config.SERVICES)
def test_document_is_valid_openapi(service):
    document, uri = read_from_filename(str(config.api_spec_path(service)))
    validate(document, base_uri=uri)


@pytest.mark.parametrize("service", config.SERVICES)
def test_routes_match_the_document(service, tmp_path):
    app = _create(service, tmp_path)
    served = {(method, re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", r"{\1}", rule.rule))
              for rule in app.url_map.iter_rules() if rule.endpoint != "static"
              for method in rule.methods & METHODS}
    documented = app.extensions["openapi"].paths()
    assert served - documented == set(), "served but not documented"
    assert documented - served == set(), "documented but not served"
