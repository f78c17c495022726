"""HTTPS on custom names, end to end on the local driver (real nginx and dnsmasq): a
viewer of a region resolves the tenant's own name through the vCDN's DNS, fetches over
HTTP/2 with the tenant's certificate (checked against a throwaway CA), the certificate
is rotated by PATCH while HTTPS requests run (none fails), hostile certificates are
refused, the key is found nowhere but in RO's encrypted store and the balancers' 0600
files, and nothing of it is left once the vCDN ends.

Its tests that start no process are in tests/unit/test_tls_units.py (the unit tier)."""
import hashlib
import json
import os
import stat
import time

import pytest
import requests
from click.testing import CliRunner

from cdnaas.cli.main import cli
from cdnaas.common.clients import RoClient, SoClient
from cdnaas.ro.vim.local import clients
from tests.support.api import populate, vcdn_body
from tests.support.certs import TestCA, key_marker, pem_key, rsa_key
from tests.support.https_loop import PATH, RequestLoop, https_get, served_fingerprint
from tests.support.stack import running_stack

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")

NAMES = ["cdn.shop-example.com", "img.shop-example.com"]
#: the rotation's request loop: at most this many requests, for at most this long
LOOP_REQUESTS, LOOP_SECONDS = 400, 20.0


@pytest.fixture(scope="module")
def ca():
    return TestCA()


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tls-stack")
    extra = {"CDNAAS_VIM_DRIVER": "local", "CDNAAS_LOG_LEVEL": "DEBUG"}
    with running_stack(None, tmp, extra_env=extra) as running:
        yield populate(running)


def _body(name, origin, issued, hostnames=NAMES):
    return vcdn_body(name, origin=f"http://127.0.0.1:{origin.server_address[1]}",
                     hostnames=hostnames,
                     certificate={"certificate": issued.chain_pem, "private_key": issued.key_pem})


def _secrets(stack, vcdn_id):
    return stack.client(RoClient).secrets(vcdn_id)


def test_https_on_custom_names_with_rotation_that_drops_nothing(stack, origin, ca, tmp_path):
    first, second = ca.issue(NAMES), ca.issue(["*.shop-example.com"], key=rsa_key(2048))
    cafile = tmp_path / "ca.pem"
    cafile.write_text(ca.root_pem)
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=_body("shop", origin, first))
    assert stack.acme.wait(accepted["operation"]["id"], timeout=90)["state"] == "COMPLETED"
    vcdn = stack.acme.ok("GET", f"/vcdns/{accepted['vcdn']['id']}")
    assert vcdn["hostnames"] == NAMES
    assert vcdn["tls"]["fingerprint_sha256"] == first.fingerprint
    assert vcdn["tls"]["hostnames"] == NAMES and vcdn["tls"]["subject"] == f"CN={NAMES[0]}"
    assert {"not_after", "issuer"} <= set(vcdn["tls"])
    entry = vcdn["entry_point"]
    balancer = vcdn["regions"][0]["load_balancer"]
    expected = requests.get(f"http://127.0.0.1:{origin.server_address[1]}{PATH}",
                            timeout=10).content

    with clients.client(vcdn["id"], "eu-west", "10.1.0.40") as viewer:
        for name in NAMES + [entry["hostname"]]:  # every name, through the vCDN's DNS
            assert viewer.resolve(entry["dns_servers"][0], name) == [balancer], name
        version, status, body, _error = https_get(viewer, NAMES[0], balancer, cafile)
        assert (version, status) == ("2", 200) and body == expected
        assert viewer.fetch(f"http://{NAMES[1]}{PATH}", resolve=(NAMES[1], balancer))[0] == 200
        assert served_fingerprint(viewer.namespace, balancer, NAMES[0],
                                   ca.root_pem) == first.fingerprint
        old_ref = _secrets(stack, vcdn["id"])[0].ref

        with RequestLoop(viewer, NAMES[1], balancer, cafile, LOOP_REQUESTS,
                         LOOP_SECONDS) as loop:  # across the rotation
            time.sleep(0.5)
            started = time.monotonic()
            patched = stack.acme.ok("PATCH", f"/vcdns/{vcdn['id']}", 202, json={"certificate": {
                "certificate": second.chain_pem, "private_key": second.key_pem}})
            operation = stack.acme.wait(patched["operation"]["id"], timeout=60)
            assert operation["state"] == "COMPLETED", operation
            rotation = time.monotonic() - started
            time.sleep(1.0)
        print(f"rotation: {rotation:.2f} s from PATCH to COMPLETED; {len(loop.outcomes)} "
              f"HTTP/2 requests across it, {len(loop.failed)} failed, {len(loop.retried)} "
              "refused by an old worker's GOAWAY and retried")
        assert len(loop.outcomes) >= 10 and loop.failed == [], \
            (len(loop.outcomes), loop.failed[:5])
        deadline = time.monotonic() + 5  # the reload is signalled: the master takes a moment
        while served_fingerprint(viewer.namespace, balancer, NAMES[1],
                                  ca.root_pem) != second.fingerprint:
            assert time.monotonic() < deadline, "the balancer still serves the old certificate"
            time.sleep(0.1)

    assert stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")["tls"]["fingerprint_sha256"] == \
        second.fingerprint
    kept = _secrets(stack, vcdn["id"])
    assert [s.fingerprint_sha256 for s in kept] == [second.fingerprint]
    assert old_ref not in {s.ref for s in kept}  # the old secret went after the swap
    files = sorted((stack.state_dir / "local").rglob("tls/*"))
    assert files and all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    assert all(second.fingerprint[:16] in f.name for f in files)  # the old files went too
    assert stat.S_IMODE(files[0].parent.stat().st_mode) == 0o700

    _assert_key_only_in_its_places(stack, vcdn["id"], [first.key_pem, second.key_pem])

    ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn['id']}", 202)
    assert stack.acme.wait(ended["operation"]["id"], timeout=60)["state"] == "COMPLETED"
    assert _secrets(stack, vcdn["id"]) == []
    assert list((stack.state_dir / "local").rglob("tls/*")) == []
    _assert_key_only_in_its_places(stack, vcdn["id"], [second.key_pem])


def _assert_key_only_in_its_places(stack, vcdn_id, keys):
    """No key is in an answer, a log, a database file or the SIG: only in the balancers'
    own key files (``tls/*.key`` under the local driver's VNF folders)."""
    markers = [key_marker(k) for k in keys]
    answers = [stack.acme.call("GET", f"/vcdns/{vcdn_id}").text,
               stack.acme.call("GET", f"/vcdns/{vcdn_id}/operations").text,
               str(stack.client(SoClient).sig(vcdn_id)),
               str(stack.client(RoClient).get_deployment(vcdn_id)),
               str(stack.client(RoClient).secrets(vcdn_id))]
    for marker in markers:
        assert not any(marker in a for a in answers)
    for path in stack.state_dir.rglob("*"):
        if not path.is_file() or (path.parent.name == "tls" and path.suffix == ".key"):
            continue
        data = path.read_bytes()
        for marker in markers:
            assert marker.encode() not in data, f"key material in {path}"


@pytest.mark.parametrize("case, status, field", [
    ("garbage key", 400, "certificate.private_key"),
    ("NUL in key", 400, "certificate.private_key"),
    ("DER key", 400, "certificate.private_key"),
    ("encrypted key", 400, "certificate.private_key"),
    ("key of another certificate", 422, "certificate.private_key"),
    ("huge key", 400, "certificate.private_key"),
    ("key as the certificate", 400, "certificate.certificate"),
    ("expired", 422, "certificate.certificate"),
    ("name not covered", 422, "certificate.certificate"),
    ("not an object", 400, "certificate"),
    ("key missing", 400, "certificate.private_key"),
    ("wildcard hostname", 400, "hostnames[0]"),
    ("operator's domain", 400, "hostnames[1]"),
    ("hostname twice", 400, "hostnames[1]"),
    ("hostile hostname", 400, "hostnames[0]"),
    ("17 hostnames", 400, "hostnames"),
])
def test_hostile_bodies_are_refused_naming_the_field_without_echo(stack, origin, ca, case,
                                                                  status, field):
    good = ca.issue(NAMES)
    cert, key, names = good.chain_pem, good.key_pem, list(NAMES)
    certificate = None
    kept_before = _secrets(stack, None)
    if case == "garbage key":
        key = "-----BEGIN PRIVATE KEY-----\n;{$x}\n-----END PRIVATE KEY-----\n"
    elif case == "NUL in key":
        key = key.replace("\n", "\x00", 2)
    elif case == "DER key":
        key = "".join(chr(b) for b in hashlib.sha256(key.encode()).digest()) * 20
    elif case == "encrypted key":
        from cryptography.hazmat.primitives import serialization  # pylint: disable=import-outside-toplevel
        loaded = serialization.load_pem_private_key(key.encode(), None)
        key = loaded.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.BestAvailableEncryption(b"pw")).decode()
    elif case == "key of another certificate":
        key = ca.issue(NAMES).key_pem
    elif case == "huge key":
        key = key * 200
    elif case == "key as the certificate":
        cert = key
    elif case == "expired":
        import datetime as dt  # pylint: disable=import-outside-toplevel
        now = dt.datetime.now(dt.timezone.utc)
        old = ca.issue(NAMES, not_before=now - dt.timedelta(days=9),
                       not_after=now - dt.timedelta(days=1))
        cert, key = old.chain_pem, old.key_pem
    elif case == "name not covered":
        names = NAMES + ["other.example.org"]
    elif case == "not an object":
        certificate = good.chain_pem + good.key_pem
    elif case == "key missing":
        certificate = {"certificate": cert}
    elif case == "wildcard hostname":
        names = ["*.shop-example.com"]
    elif case == "operator's domain":
        names = [NAMES[0], "shop.globex.cdn.example.net"]
    elif case == "hostname twice":
        names = [NAMES[0], NAMES[0].upper()]
    elif case == "hostile hostname":
        names = ["cdn.example.com;\n}server{"]
    elif case == "17 hostnames":
        names = [f"n{i}.shop-example.com" for i in range(17)]
    body = vcdn_body("hostile", origin=f"http://127.0.0.1:{origin.server_address[1]}",
                     hostnames=names,
                     certificate=certificate or {"certificate": cert, "private_key": key})
    response = stack.acme.call("POST", "/vcdns", json=body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["field"] == field, response.text
    for line in good.key_pem.splitlines()[1:-1]:
        assert line not in response.text
    assert _secrets(stack, None) == kept_before  # nothing was stored, or it was deleted


def test_a_name_is_served_by_one_vcdn_and_a_certificate_alone_covers_the_own_name(
        stack, origin, ca):
    own = "solo.acme.cdn.example.net"
    issued = ca.issue([own])
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=_body("solo", origin, issued,
                                                                hostnames=[]))
    vcdn_id = accepted["vcdn"]["id"]
    try:
        assert accepted["vcdn"]["tls"]["hostnames"] == []
        stack.acme.wait(accepted["operation"]["id"], timeout=90)
        # a hostname the certificate does not cover: refused, nothing changes
        refused = stack.acme.call("PATCH", f"/vcdns/{vcdn_id}", json={"hostnames": [NAMES[0]]})
        assert refused.status_code == 422 and refused.json()["error"]["field"] == "hostnames[0]"
        other = ca.issue(["www.other-shop.org"])
        body = _body("taken", origin, other, hostnames=["www.other-shop.org"])
        first = stack.globex.ok("POST", "/vcdns", 202, json=body)
        clash = stack.acme.call("POST", "/vcdns", json={**body, "name": "clash"})
        assert clash.status_code == 409 and clash.json()["error"]["field"] == "hostnames[0]"
        assert "globex" not in clash.text  # whose vCDN it is stays private
        stack.globex.wait(first["operation"]["id"], timeout=90)
        stack.globex.wait(stack.globex.ok("DELETE", f"/vcdns/{first['vcdn']['id']}",
                                          202)["operation"]["id"], timeout=60)
        assert _secrets(stack, first["vcdn"]["id"]) == []
    finally:
        ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn_id}", 202)
        stack.acme.wait(ended["operation"]["id"], timeout=60)
    assert _secrets(stack, vcdn_id) == []


def test_ro_refuses_a_key_that_is_not_the_certificates(stack, ca):
    stranger = pem_key(rsa_key(2048))
    response = requests.post(f"{stack.urls['ro']}/ro/v1/secrets", timeout=10,
                             headers=stack.service_headers(),
                             json={"owner": "x", "certificate": ca.issue(NAMES).chain_pem,
                                   "private_key": stranger})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "certificate.private_key"
    assert key_marker(stranger) not in response.text


def test_the_cli_leases_rotates_and_showshttps_get(stack, origin, ca, tmp_path):
    issued = ca.issue(["cli.shop-example.com"])
    (tmp_path / "cert.pem").write_text(issued.chain_pem)
    (tmp_path / "key.pem").write_text(issued.key_pem)
    env = {**stack.env, "CDNAAS_TOKEN": stack.acme.token, "COLUMNS": "200"}

    def cdnaas(*args):
        result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert key_marker(issued.key_pem) not in result.output
        return result.output

    created = json.loads(cdnaas(
        "--json", "vcdn", "create", "--name", "cli", "--flavor", "static",
        "--origin", f"http://127.0.0.1:{origin.server_address[1]}", "--region", "eu-west:100",
        "--lease-hours", "2", "--hostname", "cli.shop-example.com",
        "--certificate", str(tmp_path / "cert.pem"), "--private-key", str(tmp_path / "key.pem")))
    vcdn_id = created["vcdn"]["id"]
    assert stack.acme.wait(created["operation"]["id"], timeout=90)["state"] == "COMPLETED"
    shown = cdnaas("vcdn", "show", vcdn_id)
    assert issued.fingerprint in shown and "cli.shop-example.com" in shown
    assert "CN=cli.shop-example.com" in shown
    cdnaas("vcdn", "update", vcdn_id, "--no-tls", "--wait", "--timeout", "60")
    assert "no (HTTP only)" in cdnaas("vcdn", "show", vcdn_id)
    assert _secrets(stack, vcdn_id) == []
    ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn_id}", 202)
    stack.acme.wait(ended["operation"]["id"], timeout=60)
