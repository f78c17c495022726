"""Driving the customer API in end-to-end tests: a small client and sample data."""
import contextlib
import time
from pathlib import Path

import requests

from tests.support import postgres
from tests.support.stack import running_stack

TEMPLATE = Path(__file__).resolve().parents[2] / "plugins/static/template.yaml"
LEASE = {"end": "2099-01-01T00:00:00Z"}


class Api:
    """A tiny client of the customer API for one token (``x_auth_token``: sent as Keystone's
    clients send theirs, ``X-Auth-Token: <token>``, not ``Authorization: Bearer <token>``)."""

    def __init__(self, base, token=None, x_auth_token=False):
        self.base, self.session, self.token = base, requests.Session(), token
        if token and x_auth_token:
            self.session.headers["X-Auth-Token"] = token
        elif token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def call(self, method, path, **kwargs):
        return self.session.request(method, f"{self.base}/api/v1{path}", timeout=30, **kwargs)

    def ok(self, method, path, status=200, **kwargs):
        response = self.call(method, path, **kwargs)
        assert response.status_code == status, response.text
        return response.json() if response.content else None

    def wait(self, operation_id, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            operation = self.ok("GET", f"/operations/{operation_id}")
            if operation["state"] in ("COMPLETED", "FAILED", "ROLLED_BACK"):
                return operation
            time.sleep(0.1)
        raise AssertionError(f"operation {operation_id} did not end: {operation}")


def vcdn_body(name, demands=(("eu-west", 1000),), **overrides):
    body = {"name": name, "flavor": "static", "origin": "http://origin.example.com:8080",
            "regions": [{"name": r, "demand": d, "quality": {"min_mos": 4.0}} for r, d in demands],
            "lease": LEASE}
    body.update(overrides)
    return body


def populate(running):
    operator = Api(running.urls["api"], running.operator_token)
    populate_catalogue(operator)
    tokens = {}
    for tenant in ("acme", "globex"):
        operator.ok("POST", "/tenants", 201, json={"name": tenant})
        tokens[tenant] = operator.ok("POST", f"/tenants/{tenant}/tokens", 201, json={})["token"]
    running.operator = operator
    running.acme = Api(running.urls["api"], tokens["acme"])
    running.globex = Api(running.urls["api"], tokens["globex"])
    return running


def populate_catalogue(operator):
    """Regions eu-west (the default), us-east and doomed with their hosts, and the static
    flavor's template, registered by ``operator`` (an operator's :class:`Api`)."""
    for name, prefix, default in (("eu-west", "10.1.0.0/16", True), ("us-east", "10.2.0.0/16", False),
                                  ("doomed", "10.9.0.0/16", False)):
        operator.ok("POST", "/regions", 201, json={"name": name, "client_prefixes": [prefix],
                                                   "zone": f"az-{name}", "default": default})
    for region, host, vcpus in (("eu-west", "eu-1", 8), ("eu-west", "eu-2", 8),
                                ("us-east", "us-1", 8), ("doomed", "doomed-1", 8)):
        operator.ok("POST", f"/regions/{region}/hosts", 201,
                    json={"name": host, "vcpus": vcpus, "ram_mb": 32768})
    sidr = operator.call("POST", "/templates", data=TEMPLATE.read_bytes(),
                         headers={"Content-Type": "application/yaml"})
    assert sidr.status_code == 201, sidr.text


@contextlib.contextmanager
def populated_stack(request, tmp_path, extra_env=None):
    """A running stack on the backend ``request.param`` names (``sqlite``: the embedded
    default; ``postgresql``: a fresh database of the tests' PostgreSQL), with regions,
    hosts, the static template and tenants acme and globex (:func:`populate`)."""
    with contextlib.ExitStack() as contexts:
        url = None
        if request.param == "postgresql":
            url = contexts.enter_context(postgres.fresh_database(
                request.getfixturevalue("postgres_admin_url")))
        yield populate(contexts.enter_context(running_stack(url, tmp_path,
                                                            extra_env=extra_env)))
