"""The customer API's oslo.policy rules: the tests that start no process (the unit tier); the
others, and what the module covers, are in tests/service/test_policy.py."""
import os
import re

import pytest
from flask import request
from keystoneauth1 import access
from keystonemiddleware.auth_token import _user_plugin

from cdnaas.api import auth, keystone, policy, tokens
from cdnaas.api.app import create_app
from cdnaas.common import errors
from cdnaas.db import migrate
from cdnaas.db.engine import Database

METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE"}

TENANT = auth.Caller("acme", tokens.SCOPE_ROLES[tokens.FULL])
OPERATOR = auth.Caller("admin", tokens.SCOPE_ROLES[tokens.FULL] | {"admin"}, system=True)
READER = auth.Caller("acme", frozenset({"reader"}))
PURGER = auth.Caller("acme", frozenset({"cdn_purger"}))
SYSTEM_ADMIN = auth.Caller("", frozenset({"reader", "member", "admin"}), system=True)
SYSTEM_READER = auth.Caller("", frozenset({"reader"}), system=True)
PROJECT_ADMIN = auth.Caller("acme", frozenset({"reader", "member", "admin"}))


@pytest.fixture
def app(tmp_path, monkeypatch):
    monkeypatch.delenv("CDNAAS_POLICY_FILE", raising=False)
    monkeypatch.delenv("CDNAAS_AUTH_STRATEGY", raising=False)
    url = f"sqlite:///{tmp_path / 'api.db'}"
    migrate.upgrade("api", url)
    database = Database(url)
    yield create_app(database)
    database.dispose()


def allowed(endpoint, caller):
    try:
        policy.authorize(endpoint, caller)
    except errors.Forbidden:
        return False
    return True


def test_every_route_but_the_public_ones_has_its_rule_naming_its_method_and_path(app):
    checked = 0
    for rule in app.url_map.iter_rules():
        if auth.is_public(rule.endpoint) or rule.endpoint == "static":
            continue
        declared = policy.rule_of(rule.endpoint)
        assert declared is not None, f"{rule.rule} has no policy rule"
        path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
        assert declared.operations == [{"method": m, "path": path}
                                       for m in rule.methods & METHODS], rule.endpoint
        assert re.fullmatch(r"cdn:[a-z_]+:[a-z_]+", declared.name)
        checked += 1
    names = [r.name for r in policy.list_rules()]
    assert len(names) == len(set(names)) == checked + len(policy.BASE_RULES)


@pytest.mark.parametrize("endpoint, callers", [
    ("api.list_vcdns", {TENANT, OPERATOR, READER, SYSTEM_ADMIN, SYSTEM_READER, PROJECT_ADMIN}),
    # a purge-only caller reads the vCDN it purges (and follows the operation)
    ("api.get_vcdn", {TENANT, OPERATOR, READER, PURGER, SYSTEM_ADMIN, SYSTEM_READER, PROJECT_ADMIN}),
    ("api.vcdn_usage", {TENANT, OPERATOR, READER, SYSTEM_ADMIN, SYSTEM_READER, PROJECT_ADMIN}),
    ("api.create_vcdn", {TENANT, OPERATOR, PROJECT_ADMIN}),  # a project of one's own
    ("api.create_quote", {TENANT, OPERATOR, READER, PROJECT_ADMIN}),
    ("api.update_vcdn", {TENANT, OPERATOR, SYSTEM_ADMIN, PROJECT_ADMIN}),
    ("api.delete_vcdn", {TENANT, OPERATOR, SYSTEM_ADMIN, PROJECT_ADMIN}),
    ("api.invalidate_vcdn", {TENANT, OPERATOR, PURGER, SYSTEM_ADMIN, PROJECT_ADMIN}),
    ("api.prefetch_vcdn", {TENANT, OPERATOR, SYSTEM_ADMIN, PROJECT_ADMIN}),
    ("api.list_hosts", {OPERATOR, SYSTEM_ADMIN, SYSTEM_READER}),
    ("api.create_region", {OPERATOR, SYSTEM_ADMIN}),
    ("api.create_tenant", {OPERATOR, SYSTEM_ADMIN}),
    ("api_calibration.start_calibration", {OPERATOR, SYSTEM_ADMIN}),
])
def test_the_defaults_by_role_and_scope(endpoint, callers):
    everyone = {TENANT, OPERATOR, READER, PURGER, SYSTEM_ADMIN, SYSTEM_READER, PROJECT_ADMIN}
    assert {c for c in everyone if allowed(endpoint, c)} == callers


def test_a_refusal_says_what_the_route_is_for_and_which_rule_refused():
    with pytest.raises(errors.Forbidden, match=r"Register a region \(operator\): this route "
                       r"takes a system-scoped token, not a project-scoped one \(policy "
                       r"cdn:region:create\)"):
        policy.authorize("api.create_region", PROJECT_ADMIN)
    with pytest.raises(errors.Forbidden, match=r"End a vCDN: not allowed to roles reader "
                       r"\(policy cdn:vcdn:delete: \(rule:system_admin or rule:project_member"):
        policy.authorize("api.delete_vcdn", READER)


def test_a_local_token_is_read_from_either_header_and_the_rules_decide(app):
    client = app.test_client()
    operator = tokens.bootstrap_token(app.extensions["db"], "admin")
    bearer = {"Authorization": f"Bearer {operator}"}
    assert client.post("/api/v1/tenants", json={"name": "acme"}, headers=bearer).status_code == 201
    acme = client.post("/api/v1/tenants/acme/tokens", json={}, headers=bearer).get_json()["token"]
    assert client.get("/api/v1/tenants", headers={"X-Auth-Token": operator}).status_code == 200
    refused = client.get("/api/v1/tenants", headers={"X-Auth-Token": acme})
    assert refused.status_code == 403 and "operator" in refused.get_json()["error"]["message"]
    assert client.get("/api/v1/tenants/acme/tokens",
                      headers={"X-Auth-Token": acme}).status_code == 200
    assert client.get("/api/v1/tenants").status_code == 401
    assert client.get("/api/v1/tenants", headers={"X-Auth-Token": "cdn_x_y"}).status_code == 401
    assert client.get("/healthz").status_code == 200


def test_a_refused_request_is_refused_before_its_body_is_read(app):
    client = app.test_client()
    operator = tokens.bootstrap_token(app.extensions["db"], "admin")
    client.post("/api/v1/tenants", json={"name": "acme"}, headers={"X-Auth-Token": operator})
    acme = client.post("/api/v1/tenants/acme/tokens", json={},
                       headers={"X-Auth-Token": operator}).get_json()["token"]
    answer = client.post("/api/v1/tenants", json={"colour": "red"},
                         headers={"X-Auth-Token": acme})
    assert answer.status_code == 403  # not 400: a caller refused learns nothing of the body


def test_a_route_without_a_rule_is_refused(app):
    app.add_url_rule("/api/v1/unruled", "unruled", lambda: "served")
    operator = tokens.bootstrap_token(app.extensions["db"], "admin")
    answer = app.test_client().get("/api/v1/unruled", headers={"X-Auth-Token": operator})
    assert answer.status_code == 403
    assert answer.get_json()["error"]["message"] == "no policy rule is declared for unruled"


def test_a_policy_file_overrides_a_default_and_is_read_again_when_it_changes(
        tmp_path, monkeypatch):
    path = tmp_path / "policy.yaml"
    path.write_text('"cdn:vcdn:purge": "rule:system_admin"\n')
    monkeypatch.setenv("CDNAAS_POLICY_FILE", str(path))
    assert not allowed("api.invalidate_vcdn", TENANT)
    assert allowed("api.invalidate_vcdn", OPERATOR)
    assert allowed("api.delete_vcdn", TENANT)  # a rule the file does not name keeps its default
    path.write_text('"cdn:vcdn:delete": "role:nobody"\n')
    stamp = path.stat().st_mtime + 2
    os.utime(path, (stamp, stamp))
    assert allowed("api.invalidate_vcdn", TENANT) and not allowed("api.delete_vcdn", TENANT)
    monkeypatch.delenv("CDNAAS_POLICY_FILE")
    assert allowed("api.delete_vcdn", TENANT)


@pytest.mark.parametrize("variable, value, message", [
    ("CDNAAS_POLICY_FILE", "/nonexistent/policy.yaml", "no such file"),
    ("CDNAAS_AUTH_STRATEGY", "ldap", "one of local, keystone"),
    ("CDNAAS_AUTH_STRATEGY", "keystone", "needs CDNAAS_KEYSTONE_CLOUD"),
])
def test_a_setting_that_cannot_work_stops_the_start(tmp_path, monkeypatch, variable, value,
                                                     message):
    monkeypatch.setenv(variable, value)
    monkeypatch.delenv("CDNAAS_KEYSTONE_CLOUD", raising=False)
    with pytest.raises(errors.CdnaasError, match=message):
        create_app(Database(f"sqlite:///{tmp_path / 'api.db'}"))


def _keystone_request(app, token, headers):
    """A request as ``auth_token`` passes it on: its headers and the validated token."""
    auth_ref = access.create(body=token)
    environ = {"keystone.token_auth": _user_plugin.UserAuthPlugin(auth_ref, None)}
    return app.test_request_context("/api/v1/vcdns", environ_base=environ,
                                    headers={"X-Identity-Status": "Confirmed", **headers})


@pytest.mark.parametrize("scope, roles, operator_project, expected", [
    ({"project_id": "0a1b" * 8}, ["member", "reader"], None,
     auth.Caller("0a1b" * 8, frozenset({"member", "reader"}), "u1", False)),
    ({"project_id": "0a1b" * 8}, ["admin", "member", "reader"], "0a1b" * 8,
     auth.Caller("0a1b" * 8, frozenset({"admin", "member", "reader"}), "u1", True)),
    ({"project_id": "0a1b" * 8}, ["Reader", "member"], "0a1b" * 8,  # no admin: no operator
     auth.Caller("0a1b" * 8, frozenset({"member", "reader"}), "u1", False)),
    ({"system": {"all": True}}, ["admin", "member", "reader"], None,
     auth.Caller("", frozenset({"admin", "member", "reader"}), "u1", True)),
])
def test_the_keystone_caller_is_read_from_what_auth_token_confirmed(
        app, monkeypatch, scope, roles, operator_project, expected):
    if operator_project:
        monkeypatch.setenv("CDNAAS_KEYSTONE_OPERATOR_PROJECT", operator_project)
    token = {"token": {"methods": ["password"], "user": {"id": "u1", "name": "u1"},
                       "expires_at": "2099-01-01T00:00:00Z",
                       "roles": [{"id": f"id-{r}", "name": r} for r in roles],
                       **({"project": {"id": scope["project_id"], "name": "p"}}
                          if "project_id" in scope else {"system": {"all": True}})}}
    headers = {"X-Roles": ",".join(roles), "X-User-Id": "u1",
               **({"X-Project-Id": scope["project_id"]} if "project_id" in scope else {})}
    with _keystone_request(app, token, headers):
        assert keystone.caller(request) == expected
    with _keystone_request(app, token, {**headers, "X-Identity-Status": "Invalid"}):
        with pytest.raises(errors.Unauthorized):
            keystone.caller(request)
