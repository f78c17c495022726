"""RO's secret store (cdnaas.ro.secrets) on SQLite and PostgreSQL, and its Barbican
backend's translation (cdnaas.ro.vim.openstack.barbican) with a recording key manager;
the Barbican calls themselves run against the mini OpenStack's Barbican in
tests/system/test_openstack_tls.py.

Its tests that start no process are in tests/unit/test_secrets_units.py (the unit tier)."""

import pytest

from cdnaas.common import errors, keyfiles
from cdnaas.db import migrate
from cdnaas.db.engine import Database
from cdnaas.ro import secrets
from cdnaas.ro.models import DeploymentRecord, SecretRecord, utcnow
from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.secret_backends import FernetBackend
from tests.support.certs import TestCA, key_marker
from tests.unit.test_so_retry import database
from tests.unit.test_secrets_units import NAMES, issued  # noqa: F401 (fixtures)


@pytest.fixture
def store(database_url, tmp_path):
    migrate.upgrade("ro", database_url)
    database = Database(database_url)
    key = keyfiles.ensure_secret_key(tmp_path / "secrets.key")
    yield secrets.SecretStore(database, FernetBackend(key))
    database.dispose()


def test_a_secret_is_kept_encrypted_listed_without_material_and_deleted(store, issued):
    kept = store.store("vcdn-1", issued.chain_pem, issued.key_pem)
    assert kept["fingerprint_sha256"] == issued.fingerprint and kept["backend"] == "fernet"
    assert store.list("vcdn-1") == [kept] and store.list("other") == []
    with store.database.sessions() as session:
        row = session.get(SecretRecord, kept["ref"])
        assert key_marker(issued.key_pem) not in row.ciphertext
    loaded = store.load(kept["ref"])
    assert loaded.facts.fingerprint_sha256 == issued.fingerprint
    assert loaded.private_key.strip() == issued.key_pem.strip()
    store.delete(kept["ref"])
    store.delete(kept["ref"])  # gone already: success
    assert store.list("vcdn-1") == []
    with pytest.raises(errors.NotFound):
        store.load(kept["ref"])


def test_a_secret_a_running_deployment_uses_is_kept(store, issued):
    kept = store.store("vcdn-2", issued.chain_pem, issued.key_pem)
    with store.database.transaction() as session:
        session.add(DeploymentRecord(
            id="vcdn-2", driver="noop", status="ACTIVE", steps=[], created_at=utcnow(),
            sig={"service": {"tls": {"certificate_ref": kept["ref"]}}}))
    with pytest.raises(errors.Conflict):
        store.delete(kept["ref"])
    with store.database.transaction() as session:
        session.get(DeploymentRecord, "vcdn-2").status = "DELETED"
    store.delete(kept["ref"])


def test_another_key_file_cannot_read_it(store, issued, tmp_path):
    kept = store.store("vcdn-3", issued.chain_pem, issued.key_pem)
    other = secrets.SecretStore(store.database, FernetBackend(
        keyfiles.ensure_secret_key(tmp_path / "other.key")))
    with pytest.raises(VimError, match="cannot be decrypted"):
        other.load(kept["ref"])


def test_ro_refuses_what_is_not_a_certificate_and_its_key(store, issued):
    with pytest.raises(errors.Unprocessable):
        store.store("vcdn-4", issued.chain_pem, TestCA().issue(NAMES).key_pem)
    with pytest.raises(errors.BadRequest):
        store.store("vcdn-4", "garbage", issued.key_pem)
    assert store.list("vcdn-4") == []
