"""Local API tokens: named users per tenant, scopes (read-only, purge-only, full) and
expiry, over real HTTP against five real services on the noop driver, on SQLite and on
a real PostgreSQL; the migration that brings them keeps the tokens issued before it.

Its tests that start no process are in tests/unit/test_api_tokens_units.py (the unit tier)."""
import hashlib

import pytest
import sqlalchemy

from cdnaas.api import tokens
from cdnaas.api.app import create_app
from cdnaas.common.timeutil import parse
from cdnaas.db import migrate
from cdnaas.db.engine import Database
from tests.support.api import Api, populated_stack, vcdn_body
from tests.service.test_cli import invoke, invoke_json

MAX_DAYS = 30


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def stack(request, tmp_path_factory):
    """A running stack (regions, hosts, the static template, tenants acme and globex) whose
    clock a test can move (``stack.clock``: a file of seconds ahead of real time), with
    tokens living at most 30 days."""
    folder = tmp_path_factory.mktemp(f"tokens-{request.param}")
    clock = folder / "clock"
    clock.write_text("")
    with populated_stack(request, folder, {"CDNAAS_CLOCK_FILE": str(clock),
                                           "CDNAAS_TOKEN_MAX_DAYS": str(MAX_DAYS)}) as running:
        running.clock = clock
        yield running


@pytest.fixture(scope="module")
def vcdn(stack):
    """An ACTIVE vCDN of acme."""
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body("scoped"))
    assert stack.acme.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
    return accepted["vcdn"]


def issued(stack, tenant="acme", **body):
    """A new token of ``tenant`` (issued by the operator) as an :class:`Api` client, with
    its answer as ``.issued``."""
    answer = stack.operator.ok("POST", f"/tenants/{tenant}/tokens", 201, json=body)
    client = Api(stack.urls["api"], answer["token"])
    client.issued = answer
    return client


def refused(response, status, field):
    """The error message of ``response``, once it is checked to be ``status`` naming ``field``."""
    assert response.status_code == status, response.text
    assert response.json()["error"].get("field") == field, response.text
    return response.json()["error"]["message"]


def test_a_read_only_token_reads_and_changes_nothing(stack, vcdn):
    reader = issued(stack, scope="read-only", description="dashboard")
    assert reader.issued["scope"] == "read-only" and reader.issued["user"] == "default"
    assert vcdn["id"] in [v["id"] for v in reader.ok("GET", "/vcdns")["vcdns"]]
    assert reader.ok("GET", f"/vcdns/{vcdn['id']}")["state"] == "ACTIVE"
    assert reader.ok("GET", f"/vcdns/{vcdn['id']}/operations")["operations"]
    before = stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")
    path = f"/vcdns/{vcdn['id']}"
    for method, route, body in (
            ("POST", "/vcdns", vcdn_body("sneaky")),
            ("PATCH", path, {"regions": [{"name": "eu-west", "demand": 5}]}),
            ("DELETE", path, None),
            ("POST", f"{path}/invalidations", {"paths": ["/a"]}),
            ("POST", "/tenants/acme/tokens", {}),  # no full token minted by a reader
            ("POST", "/tenants/acme/users", {"name": "mallory"}),
            ("DELETE", f"/tenants/acme/tokens/{reader.issued['id']}", None)):
        message = refused(reader.call(method, route, json=body), 403, None)
        assert "not allowed to roles reader (policy cdn:" in message, (method, route)
    assert stack.acme.ok("GET", path) == before
    assert [v["name"] for v in stack.acme.ok("GET", "/vcdns", params={"name": "sneaky"})["vcdns"]] == []


def test_a_purge_only_token_purges_its_vcdn_and_reads_nothing_else(stack, vcdn):
    purger = issued(stack, scope="purge-only", description="deploy pipeline")
    path = f"/vcdns/{vcdn['id']}"
    accepted = purger.ok("POST", f"{path}/invalidations", 202, json={"paths": ["/index.html"]})
    assert purger.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
    assert purger.ok("GET", path)["id"] == vcdn["id"]
    for method, route, body in (
            ("GET", "/vcdns", None),
            ("GET", f"{path}/operations", None),
            ("GET", f"{path}/usage", None),
            ("PATCH", path, {"regions": [{"name": "eu-west", "demand": 5}]}),
            ("DELETE", path, None),
            ("POST", f"{path}/prefetches", {"paths": ["/a"]}),
            ("POST", "/vcdns", vcdn_body("sneaky")),
            ("GET", "/tenants/acme/tokens", None)):
        message = refused(purger.call(method, route, json=body), 403, None)
        assert "not allowed to roles cdn_purger (policy cdn:" in message, (method, route)
    assert stack.acme.ok("GET", path)["state"] == "ACTIVE"
    # the purge route still hides other tenants' vCDNs
    other = issued(stack, "globex", scope="purge-only")
    assert other.call("POST", f"{path}/invalidations", json={"paths": ["/a"]}).status_code == 404


def test_an_expired_token_is_refused_saying_when(stack):
    short = issued(stack, expires_in=3600, description="an hour")
    assert short.ok("GET", "/flavors")
    expires_at = short.issued["expires_at"]
    assert expires_at and short.issued["expired"] is False
    stack.clock.write_text("+7200")  # two hours later, for every service of the stack
    try:
        message = refused(short.call("GET", "/flavors"), 401, None)
        assert "expired" in message and expires_at in message
        listed = {t["id"]: t for t in stack.operator.ok("GET", "/tenants/acme/tokens")["tokens"]}
        assert listed[short.issued["id"]]["expired"] is True
        assert listed[short.issued["id"]]["expires_at"] == expires_at
    finally:
        stack.clock.write_text("")
    assert short.ok("GET", "/flavors")  # the clock is back: an hour is not over yet


def test_without_an_expiry_a_token_lives_the_maximum(stack):
    default = issued(stack)
    lifetime = parse(default.issued["expires_at"]) - parse(default.issued["created_at"])
    assert abs(lifetime.total_seconds() - MAX_DAYS * 86400) < 5
    stack.clock.write_text(str(MAX_DAYS * 86400 + 60))
    try:
        assert "expired" in refused(default.call("GET", "/flavors"), 401, None)
    finally:
        stack.clock.write_text("")


@pytest.mark.parametrize("body, status, field, saying", [
    ({"scope": "admin"}, 400, "scope", "admin"),
    ({"expires_at": "2001-01-01T00:00:00Z"}, 400, "expires_at", "not in the future"),
    ({"expires_in": 0}, 400, "expires_in", "expires_in"),
    ({"expires_in": (MAX_DAYS + 1) * 86400}, 400, "expires_in", f"at most {MAX_DAYS} days"),
    ({"expires_at": "2098-01-01T00:00:00Z"}, 400, "expires_at", f"at most {MAX_DAYS} days"),
    ({"expires_in": 60, "expires_at": "2098-01-01T00:00:00Z"}, 400, "expires_at", "not both"),
    ({"user": "nobody"}, 422, "user", "no user nobody"),
    ({"user": "Not A Name"}, 400, "user", "user"),
])
def test_a_bad_token_request_names_the_field_and_issues_nothing(stack, body, status, field,
                                                                saying):
    before = stack.operator.ok("GET", "/tenants/acme/tokens")["tokens"]
    message = refused(stack.operator.call("POST", "/tenants/acme/tokens", json=body), status, field)
    assert saying in message
    assert stack.operator.ok("GET", "/tenants/acme/tokens")["tokens"] == before


def test_deleting_a_user_revokes_its_tokens(stack):
    created = stack.acme.ok("POST", "/tenants/acme/users", 201, json={"name": "ci"})
    assert created == {**created, "name": "ci", "tenant": "acme", "tokens": 0}
    refused(stack.acme.call("POST", "/tenants/acme/users", json={"name": "ci"}), 409, "name")
    first = Api(stack.urls["api"], stack.acme.ok(
        "POST", "/tenants/acme/tokens", 201, json={"user": "ci", "scope": "read-only"})["token"])
    second = issued(stack, user="ci")
    assert first.ok("GET", "/flavors") and second.ok("GET", "/flavors")
    users = {u["name"]: u for u in stack.acme.ok("GET", "/tenants/acme/users")["users"]}
    assert users["ci"]["tokens"] == 2 and "default" in users
    only_ci = stack.acme.ok("GET", "/tenants/acme/tokens", params={"user": "ci"})["tokens"]
    assert {t["user"] for t in only_ci} == {"ci"} and len(only_ci) == 2
    # another tenant neither sees nor deletes acme's users
    assert stack.globex.call("GET", "/tenants/acme/users").status_code == 404
    assert stack.globex.call("DELETE", "/tenants/acme/users/ci").status_code == 404

    stack.acme.ok("DELETE", "/tenants/acme/users/ci", 204)
    for client in (first, second):
        assert refused(client.call("GET", "/flavors"), 401, None) == "the token is unknown or revoked"
    assert "ci" not in [u["name"] for u in stack.acme.ok("GET", "/tenants/acme/users")["users"]]
    assert "ci" not in {t["user"] for t in stack.acme.ok("GET", "/tenants/acme/tokens")["tokens"]}
    refused(stack.acme.call("DELETE", "/tenants/acme/users/ci"), 404, "user")
    assert stack.acme.ok("GET", "/flavors")  # the default user's token still works


def test_an_operators_scoped_tokens_keep_their_scope(stack):
    reader = issued(stack, "admin", scope="read-only")
    assert reader.ok("GET", "/flavors")
    assert reader.ok("GET", "/tenants")  # an operator's read-only token reads operator views
    message = refused(reader.call("POST", "/regions", json={"name": "x", "client_prefixes": []}),
                      403, None)
    assert "not allowed to roles reader" in message
    assert refused(reader.call("POST", "/tenants", json={"name": "evil"}), 403, None)
    assert "evil" not in [t["name"] for t in stack.operator.ok("GET", "/tenants")["tenants"]]


def test_the_cli_manages_users_and_scoped_tokens(stack):
    env, operator = {**stack.env, "COLUMNS": "250"}, stack.operator_token
    assert invoke_json(["user", "create", "globex", "robot"], env, operator)["name"] == "robot"
    token = invoke_json(["token", "create", "globex", "--user", "robot", "--scope", "purge-only",
                         "--expires-in", "7d"], env, operator)
    assert (token["user"], token["scope"]) == ("robot", "purge-only")
    table = invoke(["token", "list", "globex", "--user", "robot"], env, operator)
    assert table.exit_code == 0
    assert all(word in table.stdout for word in ("robot", "purge-only", token["expires_at"][:10]))
    users = invoke(["user", "list", "globex"], env, operator)
    assert users.exit_code == 0 and "robot" in users.stdout
    too_long = invoke(["token", "create", "globex", "--expires-in", f"{MAX_DAYS + 1}d"],
                      env, operator)
    assert too_long.exit_code == 1 and "field: expires_in" in too_long.stderr
    deleted = invoke(["user", "delete", "globex", "robot"], env, operator)
    assert deleted.exit_code == 0 and "revoked" in deleted.stdout
    assert Api(stack.urls["api"], token["token"]).call("GET", "/flavors").status_code == 401


# -- the Caller a token gives, and the migration --------------------------------------------


def test_tokens_issued_before_users_existed_keep_working(database_url):
    """api_0001 -> head on SQLite and PostgreSQL: each tenant gets the user default, its
    old tokens move to it, full and without expiry, and still open the API."""
    secret = "cdn_00aa11bb22cc33dd_issued-before-the-migration"
    migrate.upgrade("api", database_url, "api_0001")
    engine = sqlalchemy.create_engine(database_url)
    with engine.begin() as connection:
        connection.execute(sqlalchemy.text(
            "INSERT INTO api_tenants (name, role, created_at) VALUES "
            "('acme', 'tenant', '2025-01-01 00:00:00+00'), ('root', 'operator', '2025-01-01 00:00:00+00')"))
        connection.execute(sqlalchemy.text(
            "INSERT INTO api_tokens (id, tenant_name, secret_hash, description, created_at) "
            "VALUES ('00aa11bb22cc33dd', 'acme', :hash, 'old', '2025-01-02 00:00:00+00')"),
            {"hash": hashlib.sha256(secret.encode()).hexdigest()})
    engine.dispose()
    migrate.upgrade("api", database_url)
    database = Database(database_url)
    try:
        client = create_app(database).test_client()
        answer = client.get("/api/v1/tenants/acme/tokens", headers={"Authorization": f"Bearer {secret}"})
        assert answer.status_code == 200, answer.text
        [token] = answer.json["tokens"]
        assert (token["id"], token["user"], token["scope"], token["expires_at"], token["expired"]) \
            == ("00aa11bb22cc33dd", "default", "full", None, False)
        users = client.get("/api/v1/tenants/acme/users", headers={"Authorization": f"Bearer {secret}"})
        assert [(u["name"], u["tokens"]) for u in users.json["users"]] == [("default", 1)]
        with database.sessions() as session:
            assert tokens.caller_for_secret(session, secret).roles == {"reader", "member"}
        # root (an operator with no token yet) has its default user too: the bootstrap uses it
        assert tokens.bootstrap_token(database, "root").startswith("cdn_")
    finally:
        database.dispose()
