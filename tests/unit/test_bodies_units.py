"""The request-body gate (cdnaas.common.bodies) with the worst bytes, against each service's
app: the tests that start no process (the unit tier); the others, and what the module
covers, are in tests/service/test_bodies.py."""
import importlib
import io
import json

import pytest

from cdnaas.api import tokens
from cdnaas.common import bodies, settings
from cdnaas.db import migrate
from cdnaas.db.engine import Database
from cdnaas.ro.vim.noop import NoopDriver
from tests.support.auth import signed

MAX_BODY_BYTES = settings.BY_NAME["CDNAAS_MAX_BODY_BYTES"].default

#: (service, method, path of a JSON operation that stores what it is given, listing path)
TARGETS = {
    "api": ("POST", "/api/v1/tenants", "/api/v1/tenants"),
    "so": ("POST", "/so/v1/regions", "/so/v1/regions"),
    "sidr": ("POST", "/sidr/v1/templates", "/sidr/v1/templates"),
    "ro": ("PUT", "/ro/v1/deployments/vcdn-1", "/ro/v1/deployments"),
    "im": ("POST", "/im/v1/reconcile", "/im/v1/actions"),
}
JSON = "application/json"


def _database(service, tmp_path):
    url = f"sqlite:///{tmp_path / f'{service}.db'}"
    migrate.upgrade(service, url)
    return Database(url)


@pytest.fixture(scope="module")
def clients(tmp_path_factory):
    """A test client per service (internal ones signed, the API's with an operator token)."""
    made, databases = {}, []
    for service in TARGETS:
        database = _database(service, tmp_path_factory.mktemp(service))
        databases.append(database)
        module = importlib.import_module(f"cdnaas.{service}.app")
        kwargs = {"so": {"background": False}, "im": {"background": False},
                  "ro": {"driver": NoopDriver()}}.get(service, {})
        client = module.create_app(database, **kwargs).test_client()
        if service == "api":
            token = tokens.bootstrap_token(database, "admin")
            client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {token}"
        else:
            signed(client)
        made[service] = client
    yield made
    for database in databases:
        database.dispose()


def _assert_refused(response, status, field):
    assert response.status_code == status, response.data[:300]
    assert response.mimetype == "application/json"
    error = response.json["error"]
    assert error["code"] == status
    assert error["field"] == field, error
    assert error["details"][0]["field"] == field
    return error


@pytest.mark.parametrize("service", TARGETS)
def test_chunked_oversized_body_is_refused(clients, service):
    """A body without Content-Length is cut at the limit, not read whole."""
    method, path, _listing = TARGETS[service]
    body = io.BytesIO(b'{"name": "' + b"a" * (MAX_BODY_BYTES + 1) + b'"}')
    response = clients[service].open(path, method=method, input_stream=body,
                                     headers={"Content-Type": JSON, "Transfer-Encoding": "chunked"},
                                     environ_overrides={"wsgi.input_terminated": True})
    _assert_refused(response, 413, "body")


@pytest.mark.parametrize("service", ["api", "so", "sidr", "ro"])
def test_empty_json_body_is_a_missing_body(clients, service):
    method, path, _listing = TARGETS[service]
    response = clients[service].open(path, method=method, data=b"",
                                     headers={"Content-Type": JSON})
    _assert_refused(response, 400, "body")


@pytest.mark.parametrize("service", ["api", "so", "ro"])
@pytest.mark.parametrize("mimetype", ["text/plain", "application/x-www-form-urlencoded",
                                      "application/xml"])
def test_wrong_content_type_is_refused(clients, service, mimetype):
    method, path, _listing = TARGETS[service]
    response = clients[service].open(path, method=method, data=b'{"name": "a"}',
                                     headers={"Content-Type": mimetype})
    assert response.status_code == 400
    assert response.json["error"]["code"] == 400


def test_host_numbers_beyond_the_database_are_refused(clients):
    so = clients["so"]
    assert so.post("/so/v1/regions", json={"name": "r1", "client_prefixes": ["10.1.0.0/16"]}
                   ).status_code == 201
    for field, value in (("ram_mb", 2 ** 63), ("ram_mb", 2 ** 31), ("vcpus", 2 ** 63),
                         ("idle_watts", 1e308 * 10)):
        body = {"name": "h1", "vcpus": 4, "ram_mb": 4096, field: value}
        raw = json.dumps(body).encode()  # 1e308 * 10 is written as Infinity
        response = so.post("/so/v1/regions/r1/hosts", data=raw, headers={"Content-Type": JSON})
        assert response.status_code == 400, response.json
        assert response.json["error"]["field"] in (field, "body")
    assert so.get("/so/v1/regions/r1/hosts").json["hosts"] == []


@pytest.mark.parametrize("path", ["/sidr/v1/templates/static/9223372036854775808",
                                  "/sidr/v1/templates/static/2147483648",
                                  "/sidr/v1/templates/static/-1",
                                  "/sidr/v1/templates/static/1e400"])
def test_template_version_path_segment_is_bounded(clients, path):
    response = clients["sidr"].get(path)
    _assert_refused(response, 400, "version")


# -- unit checks of the parsers -----------------------------------------------------------

def test_valid_json_passes_untouched():
    text = '{"a": [1, -9223372036854775808, 9223372036854775807, 1.5e300, "\\ud83d\\ude00", null]}'
    assert bodies.load_json(text.encode()) == json.loads(text)


def test_depth_limit_counts_brackets_outside_strings_only():
    inside = b'{"a": "' + b"[" * 10_000 + b'"}'
    assert bodies.load_json(inside) == {"a": "[" * 10_000}
    nested = b"[" * bodies.MAX_DEPTH + b"]" * bodies.MAX_DEPTH
    assert bodies.load_json(nested) is not None
    with pytest.raises(Exception, match="deeper"):
        bodies.load_json(b"[" + nested + b"]")


def test_unauthenticated_bad_bodies_answer_401_first(clients):
    for service, (method, path, _listing) in TARGETS.items():
        client = clients[service]
        response = client.open(path, method=method, data=b"\xff" * 10,
                               headers={"Content-Type": JSON, "Authorization": ""})
        assert response.status_code == 401, (service, response.json)
    oversized = b"a" * (MAX_BODY_BYTES + 1)
    response = clients["api"].post("/api/v1/tenants", data=oversized,
                                   headers={"Content-Type": JSON, "Authorization": ""})
    assert response.status_code == 401
