"""Local API tokens: the tests that start no process (the unit tier); the others, and what the
module covers, are in tests/service/test_api_tokens.py."""

import pytest

from cdnaas.api import tokens
from cdnaas.api.models import User
from cdnaas.common import errors
from cdnaas.db import migrate
from cdnaas.db.engine import Database


# -- the Caller a token gives, and the migration --------------------------------------------

def test_each_scope_gives_its_roles_and_operators_system_scope(tmp_path):
    url = f"sqlite:///{tmp_path / 'api.db'}"
    migrate.upgrade("api", url)
    database = Database(url)
    try:
        operator_secret = tokens.bootstrap_token(database, "root")
        tokens.bootstrap_token(database, "acme", role="tenant")
        secrets = {}
        with database.transaction() as session:
            for tenant in ("root", "acme"):
                user = session.get(User, (tenant, "default"))
                for scope in tokens.SCOPES:
                    secrets[tenant, scope] = tokens.issue(session, user, scope)[1]
        with database.sessions() as session:
            callers = {key: tokens.caller_for_secret(session, secret)
                       for key, secret in secrets.items()}
            assert tokens.caller_for_secret(session, operator_secret).is_operator
            with pytest.raises(errors.Unauthorized):
                tokens.caller_for_secret(session, "cdn_0_forged")
    finally:
        database.dispose()
    assert {key: (c.roles, c.system, c.user) for key, c in callers.items()} == {
        ("acme", "read-only"): ({"reader"}, False, "default"),
        ("acme", "purge-only"): ({"cdn_purger"}, False, "default"),
        ("acme", "full"): ({"reader", "member"}, False, "default"),
        ("root", "read-only"): ({"reader"}, True, "default"),
        ("root", "purge-only"): ({"cdn_purger"}, True, "default"),
        ("root", "full"): ({"reader", "member", "admin"}, True, "default"),
    }
    # every token of the operator tenant has system scope; the policy gives only the full
    # one the operator's changes (admin)
    assert [key for key, c in callers.items() if c.is_operator] == [
        ("root", "read-only"), ("root", "purge-only"), ("root", "full")]
