"""RO's secret store (cdnaas.ro.secrets) on SQLite and PostgreSQL, and its Barbican backend's
translation (cdnaas.ro.vim.openstack.barbican) with a recording key manager: the tests that
start no process (the unit tier); the others, and what the module covers, are in
tests/service/test_secrets.py."""
import copy
import datetime as dt
import os
import stat
import types

import pytest

from cdnaas.common import answers, certificates, errors, keyfiles
from cdnaas.ro import secrets
from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.openstack import barbican, plan
from cdnaas.so import states
from cdnaas.so.models import Instance
from tests.support.certs import TestCA
from tests.support.sigs import sample_sig
from tests.unit.test_so_retry import (FakeRo, add_instance, database, runner,  # noqa: F401
                                 wait_ended)

NAMES = ["cdn.example.com"]


@pytest.fixture(scope="module")
def issued():
    return TestCA().issue(NAMES)


@pytest.fixture
def bundle(issued):
    return certificates.check(issued.chain_pem, issued.key_pem, NAMES,
                              dt.datetime.now(dt.timezone.utc))


def test_the_key_file_is_private_and_made_once(tmp_path):
    path = keyfiles.ensure_secret_key(tmp_path / "state" / "secrets.key")
    first = path.read_text()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert keyfiles.ensure_secret_key(path).read_text() == first


# -- Barbican (translation, with a recording key manager) --------------------------------

class RecordingKeyManager:
    """What BarbicanBackend asks of openstacksdk's key_manager, answered as Barbican would."""

    def __init__(self, fail_on=None):
        self.calls, self.secrets, self.containers = [], {}, {}
        self.fail_on = fail_on

    def create_secret(self, **attrs):
        self.calls.append(("create_secret", attrs["name"]))
        if self.fail_on == attrs["name"]:
            raise RuntimeError("barbican down")
        href = f"https://barbican/v1/secrets/s{len(self.secrets)}"
        self.secrets[href.rsplit("/", 1)[1]] = attrs
        return types.SimpleNamespace(secret_ref=href)

    def create_container(self, **attrs):
        self.calls.append(("create_container", attrs["name"]))
        href = f"https://barbican/v1/containers/c{len(self.containers)}"
        self.containers[href.rsplit("/", 1)[1]] = attrs
        return types.SimpleNamespace(container_ref=href, **attrs)

    def get_container(self, container_id):
        return types.SimpleNamespace(id=container_id, **self.containers[container_id])

    def get_secret(self, secret_id):
        return types.SimpleNamespace(payload=self.secrets[secret_id]["payload"])

    def delete_container(self, container, ignore_missing=True):
        self.calls.append(("delete_container", container.id))
        self.containers.pop(container.id, None)

    def delete_secret(self, secret_id, ignore_missing=True):
        self.calls.append(("delete_secret", secret_id))
        self.secrets.pop(secret_id, None)


def test_a_bundle_becomes_octavias_certificate_container(bundle):
    specs = dict(barbican.secret_specs("r1", bundle))
    assert list(specs) == ["certificate", "private_key", "intermediates"]
    assert specs["certificate"]["payload"].count("BEGIN CERTIFICATE") == 1
    assert specs["intermediates"]["payload"].count("BEGIN CERTIFICATE") == 1
    assert specs["private_key"]["secret_type"] == "private"
    assert all(s["payload_content_type"] == "text/plain" for s in specs.values())
    container = barbican.container_spec("r1", {"certificate": "h1", "private_key": "h2"})
    assert container == {"name": "cdnaas-r1", "type": "certificate",
                         "secret_refs": [{"name": "certificate", "secret_ref": "h1"},
                                         {"name": "private_key", "secret_ref": "h2"}]}


def test_the_barbican_backend_keeps_gives_and_removes_a_bundle(bundle):
    manager = RecordingKeyManager()
    backend = barbican.BarbicanBackend(lambda: types.SimpleNamespace(key_manager=manager))
    ciphertext, href = backend.put("r1", "vcdn-1", bundle)
    assert ciphertext is None and href.endswith("/containers/c0")
    record = types.SimpleNamespace(id="r1", external_ref=href)
    chain, key = backend.get(record)
    assert chain == bundle.certificate and key == bundle.private_key
    backend.remove(record)
    assert manager.secrets == {} and manager.containers == {}


def test_a_failed_barbican_put_leaves_no_secret(bundle):
    manager = RecordingKeyManager(fail_on="cdnaas-r1-intermediates")
    backend = barbican.BarbicanBackend(lambda: types.SimpleNamespace(key_manager=manager))
    with pytest.raises(VimError) as caught:
        backend.put("r1", "vcdn-1", bundle)
    assert manager.secrets == {} and "BEGIN" not in str(caught.value)


def test_octavia_listeners_terminate_https_with_alpn_where_the_api_takes_it():
    plain = plan.listeners("lb", ["t"])
    assert [(l["protocol"], l["protocol_port"]) for l in plain] == [("HTTP", 80)]
    both = plan.listeners("lb", ["t"], "https://barbican/v1/containers/c0", alpn=True)
    https = both[1]
    assert (https["protocol"], https["protocol_port"]) == ("TERMINATED_HTTPS", 443)
    assert https["default_tls_container_ref"].endswith("/c0")
    assert https["alpn_protocols"] == ["h2", "http/1.1"]
    assert https["default_pool"]["name"] != both[0]["default_pool"]["name"]
    assert "alpn_protocols" not in plan.listeners("lb", ["t"], "x", alpn=False)[1]
    assert plan.alpn_supported(["v2.0", "v2.19", "v2.27"])
    assert not plan.alpn_supported(["v2.0", "v2.19"]) and not plan.alpn_supported([])


# -- SO deletes references once no SIG uses them (its runner, with an RO in memory) -------

class TlsRo(FakeRo):
    """:class:`FakeRo` keeping secret references ``{ref: owner}`` too, and the SIG each
    deployment runs: like RO (:meth:`cdnaas.ro.secrets.SecretStore.delete`), it refuses
    (409) to delete a reference a running deployment's SIG still uses."""

    def __init__(self, kept):
        super().__init__()
        self.kept = dict(kept)
        self.sigs = {}

    def deploy(self, deployment_id, sig):
        deployment = super().deploy(deployment_id, sig)
        self.sigs[deployment_id] = copy.deepcopy(sig)
        return deployment

    def secrets(self, owner):
        self._reach("secrets")
        return [answers.Secret(ref=ref, owner=who, backend="fernet", fingerprint_sha256="0" * 64,
                               created_at="2026-01-01T00:00:00+00:00")
                for ref, who in self.kept.items() if who == owner]

    def delete_secret(self, ref):
        self._reach("delete_secret")
        if ref not in self.kept:
            return
        users = [i for i, sig in self.sigs.items()
                 if self.deployments[i]["status"] in secrets.USING and secrets._uses(sig, ref)]
        if users:
            raise errors.Conflict(f"secret {ref} is used by deployment {users[0]}; delete it "
                                  "once no SIG of the vCDN refers to it", field="ref")
        del self.kept[ref]


def _with_tls(sig, ref):
    sig["service"] = {"tls": {"certificate_ref": ref, "fingerprint_sha256": "0" * 64}}
    return sig


@pytest.fixture
def ro():
    """The RO of test_so_retry's ``runner`` fixture, keeping references too."""
    return TlsRo({"old": "t1", "new": "t1", "other": "t2"})


def test_the_fake_ro_keeps_a_secret_a_running_deployment_uses_as_ro_does(ro):
    ro.deploy("t1", _with_tls(sample_sig("t1"), "old"))
    with pytest.raises(errors.Conflict):
        ro.delete_secret("old")
    ro.delete_secret("new")  # not in the running SIG
    ro.undeploy("t1")
    ro.delete_secret("old")
    ro.delete_secret("old")  # gone already: success
    assert ro.kept == {"other": "t2"}


def test_a_completed_rotation_deletes_the_previous_secret(database, ro, runner):
    previous, rotated = _with_tls(sample_sig("t1"), "old"), _with_tls(sample_sig("t1"), "new")
    ro.deploy("t1", previous)
    operation_id = add_instance(database, states.UPDATE, rotated, states.UPDATING, previous)
    runner.run(operation_id)
    assert wait_ended(database, operation_id) == ("COMPLETED", None, "ACTIVE")
    assert ro.kept == {"new": "t1", "other": "t2"}


def test_a_rolled_back_rotation_deletes_the_new_secret_and_restores_the_facts(
        database, ro, runner):
    previous, rotated = _with_tls(sample_sig("t1"), "old"), _with_tls(sample_sig("t1"), "new")
    ro.deploy("t1", previous)
    operation_id = add_instance(database, states.UPDATE, rotated, states.UPDATING, previous)
    with database.transaction() as session:
        session.get(Instance, "t1").service = {"tls": rotated["service"]["tls"]}
    ro.refuse = errors.BadRequest("the VIM refused the listener")
    runner.run(operation_id)
    assert wait_ended(database, operation_id)[0] == "ROLLED_BACK"
    assert ro.kept == {"old": "t1", "other": "t2"}
    with database.sessions() as session:
        assert session.get(Instance, "t1").service["tls"]["certificate_ref"] == "old"


def test_the_end_of_a_vcdn_deletes_every_secret_of_it(database, ro, runner):
    sig = _with_tls(sample_sig("t1"), "new")
    ro.deploy("t1", sig)
    operation_id = add_instance(database, states.TERMINATE, sig, states.DELETING)
    runner.run(operation_id)
    assert wait_ended(database, operation_id)[0] == "COMPLETED"
    assert ro.kept == {"other": "t2"}
