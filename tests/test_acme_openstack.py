"""Managed certificates on the ``openstack`` driver.

The guest side for real: the cache's nginx config exactly as the driver's cloud-init
user-data writes it (``userdata.cache``: a vCDN whose certificate is managed and whose
every path needs a signed URL), run by real nginx on a loopback address, a real dnsmasq
resolving the customer's names to it, and a real ACME CA (Pebble, real HTTP-01
validation) that SO's order (:func:`cdnaas.so.acme.issue`) takes from order to valid to
certificate: the cache answers the CA from its config, ahead of its access control,
nothing pushed per order. The mini cloud's Nova is fake (no guests), so against it: the
caches' user-data carry the answer, Octavia's HTTP listener lets the challenge path
through the vCDN's redirect to HTTPS (an L7 REDIRECT_TO_POOL to its own pool, first),
and RO takes the order's answers for the deployment (no 502 any more), refusing another
account's (409).
"""
import dataclasses
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import dns.resolver
import pytest
import requests
import yaml
from cryptography import x509

from cdnaas.common import challenges, errors, ports
from cdnaas.db import migrate
from cdnaas.db.engine import Database
from cdnaas.delivery import access, https
from cdnaas.ro.models import DeploymentRecord, utcnow
from cdnaas.ro.service import DeploymentService
from cdnaas.ro.vim.openstack import userdata
from cdnaas.so import acme, tls
from tests.support import pebble
from tests.support.pebble import pebble_ca  # noqa: F401 (fixture)
from tests.test_access import signed
from tests.test_comforts_unit import openstack_sig
from tests.test_openstack_driver import nothing_left, servers_of, user_data
from tests.test_openstack_https_policy import l7_policies
from tests.test_openstack_tls import (driver, https_sig, listeners,  # noqa: F401 (fixture)
                                      store_certificate)
from tests.test_vnf_rendering import need, running

NAMES = ["www.os-managed-shop.com", "img.os-managed-shop.com"]
#: the cache's address (it listens on port 80, as on its guest): nothing else uses it
CACHE_ADDRESS = "127.0.83.61"


@pytest.fixture
def account(tmp_path, monkeypatch, pebble_ca):  # noqa: F811
    """SO's ACME account in this test's folder, ordering from Pebble."""
    monkeypatch.setenv("CDNAAS_ACME_ACCOUNT_FILE", str(tmp_path / "acme-account.json"))
    monkeypatch.setenv("CDNAAS_ACME_DIRECTORY", pebble.DIRECTORY)
    monkeypatch.setenv("CDNAAS_ACME_CA_BUNDLE", str(pebble_ca / "ca.pem"))
    monkeypatch.setenv("CDNAAS_ACME_TIMEOUT", "60")


def managed_service(**more):
    """The SIG's ``service`` of a managed certificate for :data:`NAMES`, as SO makes it."""
    return {**tls.sig_service(tls.record({}, NAMES, None, managed=True)), **more}


class CachesChecked:
    """Stands in for RO's client: RO's check of the order's answers against the SIG
    (:func:`cdnaas.common.challenges.check_answered`), and each answer fetched from the
    running cache as the CA will (it must give it before the CA is told to validate)."""

    def __init__(self, service):
        self.service = service
        self.fetched = []

    def check_challenges(self, _vcdn_id, answers):
        challenges.check_answered(self.service, answers)
        for answer in answers:
            got = requests.get(f"http://{CACHE_ADDRESS}{challenges.PATH_PREFIX}"
                               f"{answer['token']}", headers={"Host": NAMES[0]}, timeout=5)
            self.fetched.append((got.status_code, got.text == answer["key_authorization"]))


@pytest.fixture
def cache_guest(account):
    """The cache nginx of a managed vCDN as its cloud-init writes it, running on
    :data:`CACHE_ADDRESS`:80; yields its SIG's ``service``."""
    need("nginx", root=True)
    service = managed_service(access=access.check(signed(paths=("/",)), "access"))
    sig = dataclasses.replace(openstack_sig({"north": 1}), service=service)
    cache = sig.vnfs_in(role="cache")[0]
    document = yaml.safe_load(userdata.cache(sig, cache, CACHE_ADDRESS, "192.0.2.10",
                                             balancers=["127.0.0.0/8"]))
    # nginx's workers (www-data, as on the guest) must reach the prefix: not under /tmp's
    # 0700 pytest folders
    prefix = Path(tempfile.mkdtemp(prefix="acme-guest-"))
    prefix.chmod(0o755)
    try:
        for entry in document["write_files"]:
            if entry["path"].startswith(userdata.PREFIX) or entry["path"].endswith("nginx.conf"):
                assert entry.get("encoding") is None, entry["path"]
                target = prefix / Path(entry["path"]).name if entry["path"].endswith(
                    "nginx.conf") else prefix / Path(entry["path"]).relative_to(userdata.PREFIX)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(entry["content"].replace(userdata.PREFIX, str(prefix)))
                target.chmod(int(entry["permissions"], 8))
        for folder in ("logs", "temp"):  # the unit's ExecStartPre
            (prefix / folder).mkdir()
        conf = prefix / "nginx.conf"
        with running(["nginx", "-p", f"{prefix}/", "-c", str(conf)], "the cache",
                     lambda: requests.get(f"http://{CACHE_ADDRESS}/", timeout=1) is not None):
            yield service
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


def test_the_cloud_init_cache_answers_pebble_and_the_order_ends_in_a_certificate(
        cache_guest, pebble_ca, tmp_path):  # noqa: F811
    need("dnsmasq")
    # every path needs a signed URL: the challenge is answered ahead of that
    assert requests.get(f"http://{CACHE_ADDRESS}/video/seg-1.m4s", timeout=5).status_code == 403
    token = "x" * 43
    answered = requests.get(f"http://{CACHE_ADDRESS}{challenges.PATH_PREFIX}{token}", timeout=5)
    assert (answered.status_code, answered.text) == (
        200, f"{token}.{cache_guest[challenges.FIELD]}")
    for hostile in ("short", "..%2f..%2fnginx.conf", f"{token}%0a", f"{token}/x"):
        got = requests.get(f"http://{CACHE_ADDRESS}{challenges.PATH_PREFIX}{hostile}", timeout=5)
        assert got.status_code != 200 and cache_guest[challenges.FIELD] not in got.text, hostile

    dns_port = ports.free_loopback_ports(1)[0]
    resolver = ["dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts",
                "--bind-interfaces", "--listen-address=127.0.0.1", f"--port={dns_port}",
                f"--pid-file={tmp_path / 'dnsmasq.pid'}", "--log-facility=-",
                *(f"--address=/{name}/{CACHE_ADDRESS}" for name in NAMES)]
    with running(resolver, "dnsmasq", lambda: _resolves(dns_port)), \
            pebble.running(pebble_ca, f"127.0.0.1:{dns_port}") as root_pem:
        checked = CachesChecked(cache_guest)
        chain, key = acme.issue("os-managed", NAMES, ro=checked)
    assert checked.fetched == [(200, True)] * len(NAMES)
    (tmp_path / "root.pem").write_text(root_pem)
    (tmp_path / "chain.pem").write_text(chain)
    leaf = x509.load_pem_x509_certificate(chain.encode("ascii"))
    names = sorted(leaf.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName))
    assert names == sorted(NAMES)
    verified = subprocess.run(["openssl", "verify", "-CAfile", str(tmp_path / "root.pem"),
                               "-untrusted", str(tmp_path / "chain.pem"),
                               str(tmp_path / "chain.pem")], capture_output=True, text=True)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "PRIVATE KEY" in key
    print(f"ACME on the OpenStack cache config: {len(NAMES)} challenges answered by nginx "
          f"from its config, order valid, certificate for {', '.join(names)}")


def _resolves(port):
    """Whether the dnsmasq on ``port`` answers the first name with the cache."""
    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers, resolver.port = ["127.0.0.1"], port
    return [a.address for a in resolver.resolve(NAMES[0], "A", lifetime=1)] == [CACHE_ADDRESS]


# --- the driver against the mini cloud -----------------------------------------------------

def test_a_managed_vcdn_on_openstack_answers_challenges_through_octavias_redirect(
        driver, admin_conn, account, tmp_path):  # noqa: F811
    vcdn_id = f"acme-{uuid.uuid4().hex[:8]}"
    _issued, kept = store_certificate(driver, vcdn_id)
    sig = https_sig(vcdn_id, {"north": 1}, kept)
    sig.service.update(managed_service(https_policy=https.check({"http": "redirect"},
                                                                 "https_policy")))
    thumbprint = sig.service[challenges.FIELD]
    url = f"sqlite:///{tmp_path / 'ro.db'}"
    migrate.upgrade("ro", url)
    database = Database(url)
    deployment = None
    try:
        deployment = driver.deploy(sig)
        info = deployment.resources["regions"]["north"]
        http = listeners(admin_conn, info["lb_id"])["HTTP"]
        assert l7_policies(admin_conn, http, ("redirect_pool_id", "redirect_prefix")) == [
            ("REDIRECT_TO_POOL", http.default_pool_id, None,
             [("PATH", "STARTS_WITH", challenges.PATH_PREFIX)]),
            *(("REDIRECT_PREFIX", None, f"https://{name}", [("HOST_NAME", "EQUAL_TO", name)])
              for name in [sig.hostname, *NAMES])]
        for name, server in servers_of(admin_conn, deployment).items():
            files = {f["path"]: f.get("content") for f in
                     yaml.safe_load(user_data(server))["write_files"]}
            nginx = files.get(f"{userdata.CONF_DIR}/nginx.conf") or ""
            assert (f'return 200 "$1.{thumbprint}";' in nginx) == name.startswith(
                "north-cache"), name

        with database.transaction() as session:
            session.add(DeploymentRecord(id=vcdn_id, driver=driver.name, status="ACTIVE",
                                         steps=[], created_at=utcnow(), sig=sig.to_dict(),
                                         deployment=deployment.to_dict()))
        ro = DeploymentService(database, driver)
        token = "t" * 43
        assert ro.check_challenges(vcdn_id, {"challenges": [
            {"token": token, "key_authorization": f"{token}.{thumbprint}"}]}) == {"answered": 1}
        with pytest.raises(errors.Conflict) as refused:
            ro.check_challenges(vcdn_id, {"challenges": [
                {"token": token, "key_authorization": f"{token}.{'B' * 43}"}]})
        assert refused.value.field == "challenges[0].key_authorization"
        ro.pool.shutdown()
    finally:
        if deployment is not None:
            driver.terminate(deployment)
        with database.transaction() as session:  # the secret is in use while it is not
            for record in session.query(DeploymentRecord).all():
                record.mark("DELETED")
        driver.secrets.delete(kept["ref"])
        database.dispose()
    assert nothing_left(admin_conn, vcdn_id) == {}
