"""Service-to-service authentication: the tests that start no process (the unit tier); the
others, and what the module covers, are in tests/service/test_service_auth.py."""
import re
import stat

import pytest

from cdnaas.common import errors, service_auth

NOW = 1_800_000_000


@pytest.fixture
def key(tmp_path):
    return service_auth.ensure_key(tmp_path / "service.key")


# -- tokens -------------------------------------------------------------------------------------

def test_a_token_names_its_caller_and_verifies_until_it_expires(key):
    token = service_auth.token("so", key, now=NOW)
    assert service_auth.verify(token, key, now=NOW) == "so"
    assert service_auth.verify(token, key, now=NOW + service_auth.TOKEN_TTL_SECONDS) == "so"
    with pytest.raises(errors.Unauthorized, match="expired"):
        service_auth.verify(token, key, now=NOW + service_auth.TOKEN_TTL_SECONDS + 1)


def test_the_key_file_is_private_and_made_once(tmp_path):
    path = service_auth.ensure_key(tmp_path / "k" / "service.key")
    first = path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert re.fullmatch(r"[0-9a-f]{64}\n", first)
    service_auth.ensure_key(path)
    assert path.read_text() == first


@pytest.mark.parametrize("presented", [
    "", "svc1", "svc1.so", "svc1.so.1", "svc1.so.1.2.3", "svc2.so.1800000000.00",
    "svc1.SO.1800000000.00", "svc1.so.-1.00", "svc1.so.1800000000.",
    "svc1.so.\u0661\u0668\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660.00",  # Arabic digits
    "svc1.so.99999999999999999999999.00", "svc1.s\x00o.1800000000.00",
    "svc1.so.1800000000." + "0" * 64, "svc1.so.1800000000." + "é" * 64, "x" * 100_000,
    "svc1.metrics.1800000000.zz", None, 42,
])
def test_malformed_or_forged_tokens_are_refused(key, presented):
    with pytest.raises(errors.Unauthorized):
        service_auth.verify(presented, key, now=NOW)


def test_a_token_signed_with_another_key_or_for_later_is_refused(key, tmp_path):
    other = service_auth.ensure_key(tmp_path / "other.key")
    with pytest.raises(errors.Unauthorized, match="not signed"):
        service_auth.verify(service_auth.token("so", other, now=NOW), key, now=NOW)
    with pytest.raises(errors.Unauthorized, match="future"):
        service_auth.verify(service_auth.token("so", key, now=NOW + 3600), key, now=NOW)
    with pytest.raises(ValueError):
        service_auth.token("so", key, ttl=service_auth.TOKEN_TTL_SECONDS + 1)


def test_rotation_keeps_the_old_key_valid_until_finished(key):
    old = service_auth.token("so", key)
    kept = service_auth.rotate(key)
    assert len(kept) == 2
    new = service_auth.token("so", key)
    assert service_auth.verify(old, key) == service_auth.verify(new, key) == "so"
    assert service_auth.rotate(key, finish=True) == kept[:1]
    assert service_auth.verify(new, key) == "so"
    with pytest.raises(errors.Unauthorized, match="not signed"):
        service_auth.verify(old, key)


def test_metrics_tokens_live_long_but_only_for_metrics(key):
    token = service_auth.token(service_auth.METRICS_CALLER, key, now=NOW, ttl=90 * 86400)
    assert service_auth.verify(token, key, now=NOW + 89 * 86400) == "metrics"


@pytest.mark.parametrize("value", [None, "", "Basic dXNlcjpwYXNz", "Bearer", "Bearer   "])
def test_a_request_without_a_bearer_credential_is_refused(value):
    with pytest.raises(errors.Unauthorized, match="internal service"):
        service_auth.bearer(value)
