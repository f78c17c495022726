"""HTTPS on the ``openstack`` VIM driver against the mini cloud's Barbican and Octavia.

RO's secret flow as ``cdnaas.ro.app`` wires it: the driver's secret backend (Barbican)
under RO's :class:`~cdnaas.ro.secrets.SecretStore`, which the driver reads the
certificate container's href from. What only a cloud shows: the container and secrets
Barbican keeps, Octavia's TERMINATED_HTTPS listeners taking that container (Octavia's API
gives its service user read ACLs with the tenant's token and reads the certificate from
Barbican before it accepts a listener), a rotation swapping the container under the
listeners, HTTPS turned on and off on a live vCDN (a failure in the middle undone; the
RO dying in the middle of turning it on or off or of a rotation, restored), and
Barbican refusing or dying in the middle of a put. Certificates come from
``tests/support/certs.py``.
"""
import copy
import datetime as dt
import uuid

import pytest

from cdnaas.common import certificates, errors
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.db import migrate
from cdnaas.db.engine import Database
from cdnaas.ro import secrets
from cdnaas.ro.vim.base import DeploymentFailed, RemovalIncomplete, VimError
from cdnaas.ro.vim.pipeline import Undo
from cdnaas.ro.vim.openstack import balancers, cloud, plan
from cdnaas.ro.vim.openstack.barbican import _id
from tests.openstack.fixtures import ORIGIN
from tests.support.certs import TestCA, pem_cert
from tests.support.sigs import sample_sig
from tests.system.test_openstack_driver import batches, nothing_left

#: Barbican's default ``max_allowed_secret_in_bytes``
BARBICAN_MAX_SECRET = 20000


@pytest.fixture
def driver(driver, tmp_path):
    """The driver (tests/system/conftest.py) with RO's secret store (its own database, the
    material in Barbican)."""
    url = f"sqlite:///{tmp_path / 'ro.db'}"
    migrate.upgrade("ro", url)
    database = Database(url)
    driver.secrets = secrets.SecretStore(database, driver.secret_backend())
    yield driver
    database.dispose()


@pytest.fixture
def key_manager(driver):
    """openstacksdk's key_manager as the driver's account (project ``cdnaas``) sees it."""
    return driver.cloud.conn().key_manager


def https_sig(vcdn_id, caches, kept=None):
    """A SIG serving HTTPS with the certificate RO ``kept`` (None: HTTP only)."""
    document = sample_sig(vcdn_id, caches, cache_hosts=1)
    document["origin"] = dict(ORIGIN)
    if kept is not None:
        document["service"] = {"tls": {"certificate_ref": kept["ref"],
                                       "fingerprint_sha256": kept["fingerprint_sha256"]}}
    return ServiceInstanceGraph.from_dict(document)


def store_certificate(driver, vcdn_id):
    """A certificate for the vCDN's name, checked as SO does, kept by RO: ``(issued, kept)``."""
    issued = TestCA().issue([f"{vcdn_id}.cdn.example.net"])
    certificates.check(issued.chain_pem, issued.key_pem, [f"{vcdn_id}.cdn.example.net"],
                       dt.datetime.now(dt.timezone.utc))
    return issued, driver.secrets.store(vcdn_id, issued.chain_pem, issued.key_pem)


def in_barbican(key_manager, prefix="cdnaas-"):
    """Names of the secrets and containers whose name starts with ``prefix``."""
    return sorted([s.name for s in key_manager.secrets() if (s.name or "").startswith(prefix)]
                  + [c.name for c in key_manager.containers()
                     if (c.name or "").startswith(prefix)])


def listeners(admin_conn, lb_id):
    """``{protocol: listener}`` of balancer ``lb_id``."""
    lb = admin_conn.load_balancer.get_load_balancer(lb_id)
    found = [admin_conn.load_balancer.get_listener(item["id"]) for item in lb.listeners]
    return {listener.protocol: listener for listener in found}


def read_acl(key_manager, href):
    """The users Barbican's ACL of ``href`` (a secret or container) lets read it."""
    kind = "containers" if "/containers/" in href else "secrets"
    answer = key_manager.get(f"/{kind}/{_id(href)}/acl")
    assert answer.status_code == 200, answer.text
    return set(answer.json()["read"].get("users", []))


def test_an_https_vcdn_serves_barbicans_certificate_rotates_it_and_leaves_nothing(
        driver, key_manager, admin_conn):
    store = driver.secrets
    vcdn_id = f"tls-{uuid.uuid4().hex[:8]}"
    caches = {"north": 1, "south": 1}
    first, kept = store_certificate(driver, vcdn_id)
    container_ref = store.external_ref(kept["ref"])
    deployment = renewed = None
    try:
        # Barbican keeps it as Octavia reads it: a certificate container of three secrets
        assert kept["backend"] == "barbican"
        container = key_manager.get_container(_id(container_ref))
        assert (container.type, container.name) == ("certificate", f"cdnaas-{kept['ref']}")
        refs = {item["name"]: item["secret_ref"] for item in container.secret_refs}
        assert set(refs) == {"certificate", "private_key", "intermediates"}
        secret = {name: key_manager.get_secret(_id(href)) for name, href in refs.items()}
        assert {name: s.secret_type for name, s in secret.items()} == {
            "certificate": "certificate", "private_key": "private", "intermediates": "opaque"}
        assert [pem_cert(first.cert).strip(), first.key_pem.strip()] == [
            secret["certificate"].payload.strip(), secret["private_key"].payload.strip()]
        assert "BEGIN CERTIFICATE" in secret["intermediates"].payload
        # and gives the chain and key back as RO stored them (PEM blocks one per line)
        loaded = store.load(kept["ref"])
        assert (loaded.certificate, loaded.private_key) == (first.chain_pem, first.key_pem)

        sig = https_sig(vcdn_id, caches, kept)
        deployment = driver.deploy(sig)
        octavia = admin_conn.identity.find_user("octavia", domain_id="default",
                                                ignore_missing=False).id
        https_ids = {}
        for region in sig.regions:
            info = deployment.resources["regions"][region.name]
            found = listeners(admin_conn, info["lb_id"])
            assert set(found) == {"HTTP", "TERMINATED_HTTPS"}
            https = found["TERMINATED_HTTPS"]
            # Octavia took the container: its API read it from Barbican to accept it
            assert (https.protocol_port, https.default_tls_container_ref,
                    https.provisioning_status) == (443, container_ref, "ACTIVE")
            assert https.alpn_protocols == ["h2", "http/1.1"]  # Octavia 18: API 2.2x
            assert (info["tls_listener_id"], info["tls_pool_id"]) == (
                https.id, https.default_pool_id)
            https_ids[region.name] = https.id
            caches_here = sorted(v.address for v in deployment.vnfs
                                 if v.region == region.name and v.role == "cache")
            for pool_id in (info["pool_id"], info["tls_pool_id"]):
                assert sorted(m.address for m in admin_conn.load_balancer.members(pool_id)) \
                    == caches_here
        # ...with its service user, once it let it read each (the tenant's token set the ACLs)
        for href in [container_ref, *refs.values()]:
            assert octavia in read_acl(key_manager, href), href

        # rotation: a renewed certificate, the update RO runs for a PATCH
        second, renewed = store_certificate(driver, vcdn_id)
        new_ref = store.external_ref(renewed["ref"])
        rotated = https_sig(vcdn_id, caches, renewed)
        reports = []
        deployment = driver.update(deployment, rotated, lambda *r: reports.append(r),
                                   previous=sig)
        assert ("rotate certificates", 2, 2) in reports
        for region in sig.regions:
            info = deployment.resources["regions"][region.name]
            https = listeners(admin_conn, info["lb_id"])["TERMINATED_HTTPS"]
            assert (https.id, https.default_tls_container_ref, https.provisioning_status) == (
                https_ids[region.name], new_ref, "ACTIVE")
        assert store.load(renewed["ref"]).facts.fingerprint_sha256 == second.fingerprint
        # the previous certificate is no longer used: SO deletes it, and Barbican lets it go
        store.delete(kept["ref"])
        assert in_barbican(key_manager, f"cdnaas-{kept['ref']}") == []
        assert len(in_barbican(key_manager, f"cdnaas-{renewed['ref']}")) == 4

        # HTTPS off on the live vCDN: the listeners deploy made, and their pools, go
        before = deployment
        deployment = driver.update(deployment, https_sig(vcdn_id, caches), previous=rotated)
        assert_http_only(admin_conn, before, deployment)
    finally:
        if deployment is not None:
            driver.terminate(deployment)
        for done in (kept, renewed):  # what SO deletes when the vCDN ends
            if done is not None:
                store.delete(done["ref"])
    assert leftovers(admin_conn, vcdn_id) == {}
    assert in_barbican(key_manager, f"cdnaas-{kept['ref']}") == []
    assert in_barbican(key_manager, f"cdnaas-{renewed['ref']}") == []
    assert store.list(vcdn_id) == []


def assert_as_recorded(admin_conn, deployment, container_ref=None):
    """Each balancer of ``deployment`` is ACTIVE with exactly its recorded listeners and
    pools: HTTP only, or with the recorded HTTPS listener taking ``container_ref`` and
    its recorded pool; each pool's members are the region's caches."""
    for region, info in deployment.resources["regions"].items():
        lb = admin_conn.load_balancer.get_load_balancer(info["lb_id"])
        found = listeners(admin_conn, info["lb_id"])
        pools = [info["pool_id"]]
        assert (lb.provisioning_status, found["HTTP"].default_pool_id,
                found["HTTP"].provisioning_status) == ("ACTIVE", info["pool_id"], "ACTIVE")
        if container_ref is None:
            assert list(found) == ["HTTP"]
            assert not {"tls_listener_id", "tls_pool_id"} & set(info)
        else:
            https = found["TERMINATED_HTTPS"]
            assert (https.id, https.default_pool_id, https.default_tls_container_ref,
                    https.alpn_protocols, https.provisioning_status) == (
                info["tls_listener_id"], info["tls_pool_id"], container_ref,
                ["h2", "http/1.1"], "ACTIVE")
            pools.append(info["tls_pool_id"])
        assert len(lb.listeners) == len(found) == len(pools)
        assert sorted(p["id"] for p in lb.pools) == sorted(pools)
        caches_here = sorted(v.address for v in deployment.vnfs
                             if v.region == region and v.role == "cache")
        for pool_id in pools:
            assert sorted(m.address for m in admin_conn.load_balancer.members(pool_id)) \
                == caches_here


def assert_http_only(admin_conn, before, after):
    """Each region of ``after`` (``before`` with HTTPS turned off) serves HTTP only
    (:func:`assert_as_recorded`): its HTTPS listener and pool are gone, its HTTP
    listener's pool is the one it had."""
    assert_as_recorded(admin_conn, after)
    for region, info in after.resources["regions"].items():
        was = before.resources["regions"][region]
        assert info["pool_id"] == was["pool_id"]
        assert cloud.found(admin_conn.load_balancer.find_listener, was["tls_listener_id"]) is None
        assert cloud.found(admin_conn.load_balancer.find_pool, was["tls_pool_id"]) is None


def deployed_plain(driver, caches):
    """A new vCDN of ``caches`` deployed serving HTTP only, and a certificate RO keeps
    for it: ``(plain SIG, deployment, kept)``."""
    plain = https_sig(f"tls-{uuid.uuid4().hex[:8]}", caches)
    deployment = driver.deploy(plain)
    _issued, kept = store_certificate(driver, plain.vcdn_id)
    return plain, deployment, kept


def without_https(resources):
    """A copy of a deployment's record without its regions' HTTPS listener and pool ids."""
    record = copy.deepcopy(resources)
    for info in record["regions"].values():
        info.pop("tls_listener_id", None)
        info.pop("tls_pool_id", None)
    return record


def leftovers(admin_conn, vcdn_id):
    """What :func:`nothing_left` finds of the vCDN, and its Octavia listeners (by name)."""
    left = nothing_left(admin_conn, vcdn_id)
    prefix = plan.resource_name(vcdn_id, "")
    names = sorted(l.name for l in admin_conn.load_balancer.listeners()
                   if (l.name or "").startswith(prefix))
    return {**left, "listeners": names} if names else left


def test_https_is_turned_on_and_off_on_a_live_plain_vcdn(driver, admin_conn):
    caches = {"north": 2, "south": 1}
    plain, deployment, kept = deployed_plain(driver, caches)
    vcdn_id = plain.vcdn_id
    container_ref = driver.secrets.external_ref(kept["ref"])
    try:
        http = {r: listeners(admin_conn, i["lb_id"])["HTTP"].id
                for r, i in deployment.resources["regions"].items()}
        secure = https_sig(vcdn_id, caches, kept)
        reports = []
        before = deployment
        deployment = driver.update(deployment, secure, lambda *r: reports.append(r),
                                   previous=plain)
        assert ("turn HTTPS on", 2, 2) in reports
        for region, info in deployment.resources["regions"].items():
            found = listeners(admin_conn, info["lb_id"])
            assert set(found) == {"HTTP", "TERMINATED_HTTPS"}
            https = found["TERMINATED_HTTPS"]
            assert (https.protocol_port, https.default_tls_container_ref,
                    https.provisioning_status) == (443, container_ref, "ACTIVE")
            assert https.alpn_protocols == ["h2", "http/1.1"]
            assert (info["tls_listener_id"], info["tls_pool_id"]) == (
                https.id, https.default_pool_id)
            assert admin_conn.load_balancer.get_load_balancer(info["lb_id"]) \
                .provisioning_status == "ACTIVE"
            assert found["HTTP"].id == http[region]
            caches_here = sorted(v.address for v in deployment.vnfs
                                 if v.region == region and v.role == "cache")
            assert len(caches_here) == caches[region]
            for pool_id in (info["pool_id"], info["tls_pool_id"]):
                assert sorted(m.address for m in admin_conn.load_balancer.members(pool_id)) \
                    == caches_here
            assert {k: v for k, v in info.items() if not k.startswith("tls_")} == \
                before.resources["regions"][region]

        before = deployment
        deployment = driver.update(deployment, plain, previous=secure)
        assert_http_only(admin_conn, before, deployment)
        assert {r: listeners(admin_conn, i["lb_id"])["HTTP"].id
                for r, i in deployment.resources["regions"].items()} == http
    finally:
        driver.terminate(deployment)
        driver.secrets.delete(kept["ref"])
    assert leftovers(admin_conn, vcdn_id) == {}


def test_https_turned_on_is_undone_when_octavia_refuses_a_region(driver, admin_conn,
                                                                   monkeypatch):
    """The first region gets its HTTPS listener and pool; the second is given a container
    Barbican does not have, which Octavia refuses: the first region's listener and pool
    are deleted, the record is unchanged."""
    caches = {"north": 1, "south": 1}
    plain, deployment, kept = deployed_plain(driver, caches)
    vcdn_id = plain.vcdn_id
    record = copy.deepcopy(deployment.resources)
    real, given = balancers.listeners, []

    def listeners_of(secrets, conn, sig, region):
        specs = real(secrets, conn, sig, region)
        if len(specs) > 1:  # HTTPS: the listener's certificate container
            container = specs[1]["default_tls_container_ref"]
            if given:  # the regions after the first: a container that does not exist
                container = container.rsplit("/", 1)[0] + f"/{uuid.uuid4()}"
                specs[1]["default_tls_container_ref"] = container
            given.append(container)
        return specs
    monkeypatch.setattr(balancers, "listeners", listeners_of)
    try:
        with pytest.raises(DeploymentFailed, match="(?s)certificate.*previous caches"):
            driver.update(deployment, https_sig(vcdn_id, caches, kept), previous=plain)
        assert len(given) == 2
        assert deployment.resources == record
        for info in record["regions"].values():
            assert list(listeners(admin_conn, info["lb_id"])) == ["HTTP"]
            assert admin_conn.load_balancer.get_load_balancer(info["lb_id"]) \
                .provisioning_status == "ACTIVE"
            assert [p.id for p in admin_conn.load_balancer.pools(
                loadbalancer_id=info["lb_id"])] == [info["pool_id"]]
    finally:
        driver.terminate(deployment)
        driver.secrets.delete(kept["ref"])
    assert nothing_left(admin_conn, vcdn_id) == {}


def dying_at(monkeypatch, call, when):
    """openstacksdk's Octavia ``call`` (a proxy method) stops, as the RO dying there
    would, where ``when(*args, **attrs)`` (its arguments) is true; it runs elsewhere."""
    from openstack.load_balancer.v2 import _proxy
    real = getattr(_proxy.Proxy, call)

    def dying(self, *args, **attrs):
        if when(*args, **attrs):
            raise VimError(f"the RO died at {call}")
        return real(self, *args, **attrs)
    monkeypatch.setattr(_proxy.Proxy, call, dying)


def restore_twice(driver, deployment, sig, monkeypatch):
    """``driver.restore(deployment, sig)``, then again on what it returns: that second
    one writes nothing to Octavia but the member batches of the recorded pools, and
    gives the same deployment back. Returns the first one's."""
    restored = driver.restore(deployment, sig)
    calls = driver.cloud.calls
    before = {key: calls[key] for key in list(calls) if key[0] == "load_balancer"}
    with monkeypatch.context() as watched:
        members = batches(watched)
        again = driver.restore(restored, sig)
    writes = {method: n - before.get((service, method), 0)
              for (service, method), n in list(calls.items())
              if service == "load_balancer" and method != "GET"
              and n != before.get((service, method), 0)}
    pools = sorted(p for info in restored.resources["regions"].values()
                   for p in (info["pool_id"], info.get("tls_pool_id")) if p)
    assert writes == {"PUT": len(pools)}
    assert sorted(pool for pool, _addresses in members) == pools
    assert again.resources == restored.resources
    return restored


def test_restore_deletes_the_https_an_interrupted_update_was_turning_on(
        driver, admin_conn, monkeypatch):
    """HTTPS turned on, the RO dies as south's pool is made: north has its HTTPS listener
    and pool (with members), south its listener alone, the record neither. Restore with
    the plain SIG deletes them (pools first); restoring again writes nothing."""
    caches = {"north": 2, "south": 1}
    plain, deployment, kept = deployed_plain(driver, caches)
    vcdn_id = plain.vcdn_id
    record = copy.deepcopy(deployment.resources)
    north, south = record["regions"]["north"], record["regions"]["south"]
    try:
        with monkeypatch.context() as dying:
            dying.setattr(Undo, "run", lambda self: [])
            dying_at(dying, "create_pool", lambda **attrs: admin_conn.load_balancer.get_listener(
                attrs["listener_id"]).load_balancers[0]["id"] == south["lb_id"])
            with pytest.raises(DeploymentFailed, match="the RO died at create_pool"):
                driver.update(deployment, https_sig(vcdn_id, caches, kept), previous=plain)
        assert deployment.resources == record
        for info, pools in ((north, 2), (south, 1)):
            assert set(listeners(admin_conn, info["lb_id"])) == {"HTTP", "TERMINATED_HTTPS"}
            assert len(admin_conn.load_balancer.get_load_balancer(info["lb_id"]).pools) \
                == pools
        assert listeners(admin_conn, south["lb_id"])["TERMINATED_HTTPS"].default_pool_id \
            is None

        restored = restore_twice(driver, deployment, plain, monkeypatch)
        assert restored.resources == record
        assert_as_recorded(admin_conn, restored)
    finally:
        driver.terminate(deployment)
        driver.secrets.delete(kept["ref"])
    assert leftovers(admin_conn, vcdn_id) == {}


def test_restore_makes_again_the_https_an_interrupted_update_was_turning_off_or_rotating(
        driver, admin_conn, monkeypatch):
    """HTTPS turned off, the RO dies as south's listener goes (its pool gone): north serves
    HTTP only. Restore with the HTTPS SIG makes north's listener and pool again and
    south's pool, with members and the recorded container, and records their ids. Then
    a rotation dies at south: north has the new container, which restore takes back."""
    vcdn_id = f"tls-{uuid.uuid4().hex[:8]}"
    caches = {"north": 1, "south": 1}
    _issued, kept = store_certificate(driver, vcdn_id)
    container_ref = driver.secrets.external_ref(kept["ref"])
    secure = https_sig(vcdn_id, caches, kept)
    deployment = renewed = None
    try:
        deployment = driver.deploy(secure)
        record = copy.deepcopy(deployment.resources)
        north, south = record["regions"]["north"], record["regions"]["south"]
        assert_as_recorded(admin_conn, deployment, container_ref)
        with monkeypatch.context() as dying:
            dying_at(dying, "delete_listener",
                     lambda listener, **_: listener == south["tls_listener_id"])
            with pytest.raises(RemovalIncomplete, match="the RO died at delete_listener; the "
                                                        "update is done"):
                driver.update(deployment, https_sig(vcdn_id, caches), previous=secure)
        assert list(listeners(admin_conn, north["lb_id"])) == ["HTTP"]
        assert listeners(admin_conn, south["lb_id"])["TERMINATED_HTTPS"].id == \
            south["tls_listener_id"]
        for info in (north, south):
            assert [p["id"] for p in admin_conn.load_balancer.get_load_balancer(
                info["lb_id"]).pools] == [info["pool_id"]]

        restored = restore_twice(driver, deployment, secure, monkeypatch)
        regions = restored.resources["regions"]
        assert regions["south"]["tls_listener_id"] == south["tls_listener_id"]
        assert regions["north"]["tls_listener_id"] != north["tls_listener_id"]
        assert all(regions[r]["tls_pool_id"] != record["regions"][r]["tls_pool_id"]
                   for r in regions)
        assert without_https(restored.resources) == without_https(record)
        assert_as_recorded(admin_conn, restored, container_ref)

        deployment = restored
        _second, renewed = store_certificate(driver, vcdn_id)
        with monkeypatch.context() as dying:
            dying.setattr(Undo, "run", lambda self: [])
            dying_at(dying, "update_listener",
                     lambda listener, **_: listener == regions["south"]["tls_listener_id"])
            with pytest.raises(DeploymentFailed, match="the RO died at update_listener"):
                driver.update(deployment, https_sig(vcdn_id, caches, renewed),
                              previous=secure)
        assert {r: listeners(admin_conn, i["lb_id"])["TERMINATED_HTTPS"]
                .default_tls_container_ref for r, i in regions.items()} == {
            "north": driver.secrets.external_ref(renewed["ref"]), "south": container_ref}

        rotated_back = restore_twice(driver, deployment, secure, monkeypatch)
        assert rotated_back.resources == deployment.resources
        assert_as_recorded(admin_conn, rotated_back, container_ref)
    finally:
        if deployment is not None:
            driver.terminate(deployment)
        for done in (kept, renewed):
            if done is not None:
                driver.secrets.delete(done["ref"])
    assert leftovers(admin_conn, vcdn_id) == {}


def test_octavia_refuses_a_container_barbican_no_longer_has(driver, key_manager, admin_conn):
    """The proof the listeners' container is checked: deleted in Barbican behind RO's back
    (an operator's cleanup), Octavia refuses the listener and the deployment is undone."""
    vcdn_id = f"tls-{uuid.uuid4().hex[:8]}"
    _issued, kept = store_certificate(driver, vcdn_id)
    container_ref = driver.secrets.external_ref(kept["ref"])
    key_manager.delete_container(_id(container_ref), ignore_missing=False)
    with pytest.raises(DeploymentFailed, match="(?s)certificate.*everything created was "
                                               "removed"):
        driver.deploy(https_sig(vcdn_id, {"north": 1}, kept))
    assert nothing_left(admin_conn, vcdn_id) == {}
    driver.secrets.delete(kept["ref"])  # its container gone already: its secrets go
    assert in_barbican(key_manager, f"cdnaas-{kept['ref']}") == []


def test_a_chain_barbican_refuses_leaves_no_secret(driver, key_manager, monkeypatch):
    """RO takes chains up to 64 KiB; Barbican (as shipped) keeps secrets up to 20000 bytes:
    the intermediates of a chain SO accepts are refused (422, naming their size and the
    limit) before anything is stored. An operator who sets the limit above what Barbican
    keeps gets Barbican's refusal (413) after two secrets were made, which are deleted."""
    vcdn_id = f"tls-{uuid.uuid4().hex[:8]}"
    name = f"{vcdn_id}.cdn.example.net"
    ca = TestCA()
    issued = ca.issue([name], with_chain=False)
    now = dt.datetime.now(dt.timezone.utc)
    # the same intermediate (subject and key) signed again, listing many names
    bulky = TestCA._sign(ca.inter.subject, ca.inter_key.public_key(), ca.root.subject,
                         ca.root_key, now, ca=True,
                         names=[f"edge-{i:04d}.cdn.example.net" for i in range(575)])
    chain = issued.chain_pem + pem_cert(bulky)
    certificates.check(chain, issued.key_pem, [name], now)  # SO takes it
    assert BARBICAN_MAX_SECRET < len(pem_cert(bulky)) < certificates.MAX_CHAIN_CHARS
    before = in_barbican(key_manager)
    with pytest.raises(errors.Unprocessable, match=rf"intermediates take {len(pem_cert(bulky))} "
                                                   "bytes; this cloud keeps secrets of at most "
                                                   "20000 .CDNAAS_OS_BARBICAN_MAX_SECRET_BYTES"):
        driver.secrets.store(vcdn_id, chain, issued.key_pem)
    assert in_barbican(key_manager) == before
    monkeypatch.setenv("CDNAAS_OS_BARBICAN_MAX_SECRET_BYTES", str(64 << 10))
    with pytest.raises(errors.UpstreamError, match="Barbican did not keep the certificate: "
                                                   "HttpException 413"):
        driver.secrets.store(vcdn_id, chain, issued.key_pem)
    assert in_barbican(key_manager) == before
    assert driver.secrets.list(vcdn_id) == []


def test_barbican_dying_mid_put_is_an_upstream_error_naming_what_stays(
        driver, key_manager, minicloud_outage):
    """Barbican stops after the certificate and key secrets were made: RO keeps no
    reference and says which secrets stay (nothing can delete them while it is away)."""
    vcdn_id = f"tls-{uuid.uuid4().hex[:8]}"
    issued = TestCA().issue([f"{vcdn_id}.cdn.example.net"])
    before = in_barbican(key_manager)
    session = driver.cloud.conn().session.session  # requests' session of the driver's calls
    made = []

    def stop_after_two_secrets(response, *_args, **_kwargs):
        if response.request.method == "POST" and response.request.url.endswith("/secrets"):
            made.append(response.status_code)
            if len(made) == 2:
                minicloud_outage.stop("barbican")
    session.hooks["response"].append(stop_after_two_secrets)
    try:
        with pytest.raises(errors.UpstreamError) as refused:
            driver.secrets.store(vcdn_id, issued.chain_pem, issued.key_pem)
    finally:
        session.hooks["response"].remove(stop_after_two_secrets)
    assert made == [201, 201]
    message = str(refused.value)
    assert "Barbican did not keep the certificate: ConnectFailure" in message
    assert "BEGIN" not in message
    assert driver.secrets.list(vcdn_id) == []
    minicloud_outage.start("barbican")
    stays = sorted(set(in_barbican(key_manager)) - set(before))
    try:
        prefix = stays[0].rsplit("-", 1)[0]  # cdnaas-<ref>
        assert stays == [f"{prefix}-certificate", f"{prefix}-private_key"]
        assert f"2 secret(s) named {prefix}-* it made could not be deleted" in message
    finally:  # the operator's cleanup the message asks for
        for secret in key_manager.secrets():
            if secret.name in stays:
                key_manager.delete_secret(_id(secret.secret_ref))
    assert in_barbican(key_manager) == before
