"""SIDR: template registration, validation and lookup, on SQLite and PostgreSQL.

Its tests that start no process are in tests/unit/test_sidr_units.py (the unit tier)."""
import copy
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import sqlalchemy
import yaml

from cdnaas.common import errors
from cdnaas.common.clients import SidrClient
from cdnaas.db import migrate
from cdnaas.db.engine import Database
from cdnaas.sidr import repository
from cdnaas.sidr.app import create_app
from tests.support.auth import signed
from tests.unit.test_sidr_units import STATIC_TEMPLATE, static  # noqa: F401 (fixtures)

TEMPLATES = "/sidr/v1/templates"


@pytest.fixture
def static_yaml():
    return STATIC_TEMPLATE.read_text(encoding="utf-8")


@pytest.fixture
def client(database_url):
    migrate.upgrade("sidr", database_url)
    database = Database(database_url)
    yield signed(create_app(database).test_client())
    database.dispose()


def version_of(document, version, flavor=None):
    """A copy of ``document`` as another version (and flavor)."""
    changed = copy.deepcopy(document)
    changed["version"] = version
    if flavor:
        changed["flavor"] = flavor
    return changed


def fields(response):
    return [d["field"] for d in response.json["error"]["details"]]


def test_migration_creates_the_table_on_each_backend(database_url):
    migrate.upgrade("sidr", database_url)
    migrate.upgrade("sidr", database_url)  # at head already: nothing to do
    engine = sqlalchemy.create_engine(database_url)
    try:
        inspector = sqlalchemy.inspect(engine)
        assert {"sidr_templates", "alembic_version_sidr"} <= set(inspector.get_table_names())
        columns = {c["name"] for c in inspector.get_columns("sidr_templates")}
        assert columns == {"id", "flavor", "version", "description", "plugin", "document", "created_at",
                           "deprecated_at"}
        unique = inspector.get_unique_constraints("sidr_templates")
        assert [sorted(u["column_names"]) for u in unique] == [["flavor", "version"]]
    finally:
        engine.dispose()


@pytest.mark.parametrize("content_type", ["application/yaml", "text/yaml"])
def test_register_static_template_as_yaml(client, static_yaml, static, content_type):
    response = client.post(TEMPLATES, data=static_yaml, content_type=content_type)

    assert response.status_code == 201, response.json
    assert response.headers["Location"] == f"{TEMPLATES}/static/1"
    body = response.json
    assert {k: body[k] for k in ("flavor", "version", "plugin", "technology")} == \
        {"flavor": "static", "version": 1, "plugin": "static", "technology": "vm"}
    assert body["description"] == static["description"]
    assert body["document"] == static
    assert body["created_at"].endswith("+00:00")


def test_register_static_template_as_json(client, static):
    response = client.post(TEMPLATES, json=static)

    assert response.status_code == 201, response.json
    assert response.json["document"] == static
    assert client.get(f"{TEMPLATES}/static/1").json == response.json


def test_list_get_latest_and_get_by_version(client, static):
    for version in (1, 3, 2):
        assert client.post(TEMPLATES, json=version_of(static, version)).status_code == 201
    assert client.post(TEMPLATES, json=version_of(static, 1, flavor="alpha")).status_code == 201

    listed = client.get(TEMPLATES).json["templates"]
    assert [(t["flavor"], t["version"]) for t in listed] == \
        [("alpha", 1), ("static", 1), ("static", 2), ("static", 3)]
    only_static = client.get(TEMPLATES, query_string={"flavor": "static"}).json["templates"]
    assert [t["version"] for t in only_static] == [1, 2, 3]
    assert client.get(TEMPLATES, query_string={"flavor": "none-yet"}).json == {"templates": []}

    latest = client.get(f"{TEMPLATES}/static")
    assert latest.status_code == 200
    assert latest.json["version"] == 3 and latest.json["document"]["version"] == 3
    second = client.get(f"{TEMPLATES}/static/2")
    assert second.status_code == 200 and second.json["version"] == 2


def test_duplicate_version_is_a_conflict(client, static, static_yaml):
    assert client.post(TEMPLATES, json=static).status_code == 201
    client.post(TEMPLATES, json=version_of(static, 2))

    response = client.post(TEMPLATES, data=static_yaml, content_type="application/yaml")

    assert response.status_code == 409
    error = response.json["error"]
    assert error["field"] == "version"
    assert "static version 1 already exists" in error["message"]
    assert "bump version (to 3 or more)" in error["message"]


def test_concurrent_duplicate_is_a_conflict(client, static, monkeypatch):
    assert client.post(TEMPLATES, json=static).status_code == 201
    # another process stored the same version between the check and the insert
    monkeypatch.setattr(repository, "find", lambda session, flavor, version: None)

    response = client.post(TEMPLATES, json=static)

    assert response.status_code == 409
    assert "static version 1 already exists" in response.json["error"]["message"]
    assert len(client.get(TEMPLATES).json["templates"]) == 1


def test_invalid_template_lists_every_problem(client, static):
    broken = copy.deepcopy(static)
    broken["colour"] = "blue"                       # unknown field
    del broken["plugin"]                            # missing required field
    broken["technology"] = "bare-metal"             # not in the enum
    broken["vnfs"]["cache"]["vcpus"] = {"min": 4, "max": 2}  # min > max

    response = client.post(TEMPLATES, json=broken)

    assert response.status_code == 400
    assert set(fields(response)) == {"colour", "plugin", "technology", "vnfs.cache.vcpus"}
    message = response.json["error"]["message"]
    assert "4 problem(s)" in message
    assert "min (4) is greater than max (2)" in message
    assert "use one of vm, container" in message
    assert client.get(TEMPLATES).json == {"templates": []}


def test_yaml_template_is_validated_like_json(client, static):
    broken = copy.deepcopy(static)
    broken["vnfs"]["dns"]["instances"] = {"min": 0, "max": 1}
    broken["vnfs"]["load_balancer"]["bogus"] = True

    response = client.post(TEMPLATES, data=yaml.safe_dump(broken), content_type="application/yaml")

    assert response.status_code == 400
    assert set(fields(response)) == {"vnfs.dns.instances.min", "vnfs.load_balancer.bogus"}


def test_malformed_yaml_names_the_line(client, static_yaml):
    malformed = static_yaml.replace("technology: vm", "technology: [vm")

    response = client.post(TEMPLATES, data=malformed, content_type="application/yaml")

    assert response.status_code == 400
    error = response.json["error"]
    assert error["field"] == "body"
    assert "does not parse at line" in error["message"]


def test_unknown_flavor_and_version_are_not_found(client, static):
    missing = client.get(f"{TEMPLATES}/gold")
    assert missing.status_code == 404
    assert "no template for flavor 'gold'" in missing.json["error"]["message"]
    assert missing.json["error"]["field"] == "flavor"

    client.post(TEMPLATES, json=static)
    assert client.get(f"{TEMPLATES}/gold/1").status_code == 404
    no_version = client.get(f"{TEMPLATES}/static/7")
    assert no_version.status_code == 404
    assert "stored versions: 1" in no_version.json["error"]["message"]
    assert client.get(f"{TEMPLATES}/static/seven").status_code == 400


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_healthy(url, process, deadline=30.0):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if process.poll() is not None:
            raise AssertionError(f"cdnaas-sidr exited with {process.returncode}")
        try:
            if requests.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"cdnaas-sidr did not answer {url}/healthz within {deadline} s")


def test_real_process_serves_the_client(tmp_path, static):
    database_url = f"sqlite:///{tmp_path / 'sidr.db'}"
    migrate.upgrade("sidr", database_url)
    url = f"http://127.0.0.1:{_free_port()}"
    env = {**os.environ, "CDNAAS_SIDR_URL": url, "CDNAAS_DATABASE_URL": database_url,
           "CDNAAS_STATE_DIR": str(tmp_path / "state")}
    script = Path(sys.executable).with_name("cdnaas-sidr")
    process = subprocess.Popen([str(script)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    try:
        _wait_healthy(url, process)
        client = SidrClient(base_url=url, timeout=10)

        registered = client.register_template(static)
        assert registered["flavor"] == "static" and registered["version"] == 1
        assert client.get_template("static").body == registered
        assert client.get_template("static", 1).body == registered
        assert [t.body for t in client.list_templates(flavor="static")] == [registered]
        with pytest.raises(errors.Conflict):
            client.register_template(static)
        with pytest.raises(errors.NotFound):
            client.get_template("gold")
    finally:
        process.terminate()
        process.wait(timeout=10)
        process.stdout.close()
