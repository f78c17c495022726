"""Managed certificates end to end on the local driver, issued by a real ACME CA (Pebble,
Debian's ``pebble``, real HTTP-01 validation: ``PEBBLE_VA_ALWAYS_VALID`` unset).

Pebble runs on this machine's loopback; its validation resolves the vCDN's custom name
through the vCDN's own geo-DNS (``-dnsserver``) and fetches
``http://<name>/.well-known/acme-challenge/<token>`` from the vCDN's balancer over its
region bridge (the root namespace holds the bridge's gateway address), whose caches
answer it statelessly (the thumbprint of SO's account in their config). SO orders the
certificate as soon as the vCDN is ACTIVE, installs it by the rotation path of an
uploaded one, and (``CDNAAS_ACME_RENEW_AT=0`` here: every pass is past the renewal
point) renews it again and again while HTTPS requests run: none fails.
"""
import json
import os
import ssl
import time

import pytest
import requests
from click.testing import CliRunner

from cdnaas.cli.main import cli
from cdnaas.common import challenges
from cdnaas.common.clients import RoClient
from cdnaas.ro.vim.local import clients
from tests.support.api import populate, vcdn_body
from tests.support import pebble
from tests.support.https_loop import RequestLoop, https_get, served_fingerprint
from tests.support.pebble import pebble_ca  # noqa: F401 (fixture)
from tests.support.stack import running_stack

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")

NAMES = ["www.managed-shop.com", "img.managed-shop.com"]
#: the renewal loop: at most this many requests, for at most this long
LOOP_REQUESTS, LOOP_SECONDS = 600, 45.0
#: renewals the loop must see (each a new certificate served)
RENEWALS = 2


@pytest.fixture(scope="module")
def stack(tmp_path_factory, pebble_ca):
    tmp = tmp_path_factory.mktemp("acme-stack")
    extra = {"CDNAAS_VIM_DRIVER": "local", "CDNAAS_LOG_LEVEL": "DEBUG",
             "CDNAAS_ACME_DIRECTORY": pebble.DIRECTORY,
             "CDNAAS_ACME_CA_BUNDLE": str(pebble_ca / "ca.pem"),
             "CDNAAS_ACME_INTERVAL": "0.5", "CDNAAS_ACME_RENEW_AT": "0"}
    with running_stack(None, tmp, extra_env=extra) as running:
        yield populate(running)


def _served(viewer, balancer, name, root_pem):
    """The fingerprint of what the balancer serves for ``name``, verified against
    ``root_pem`` (None: it does not verify, e.g. HTTP only or another CA)."""
    try:
        return served_fingerprint(viewer.namespace, balancer, name, root_pem)
    except (ssl.SSLError, OSError):
        return None


def _wait(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, what
        time.sleep(0.25)


def test_a_managed_certificate_is_issued_by_http01_and_renewed_without_a_failed_request(
        stack, origin, pebble_ca, tmp_path):
    created = json.loads(cdnaas(
        stack, "--json", "vcdn", "create", "--name", "managed", "--flavor", "static",
        "--origin", f"http://127.0.0.1:{origin.server_address[1]}", "--region", "eu-west:100",
        "--lease-hours", "2", *(f"--hostname={name}" for name in NAMES),
        "--managed-certificate"))
    vcdn_id = created["vcdn"]["id"]
    assert stack.acme.wait(created["operation"]["id"], timeout=90)["state"] == "COMPLETED"
    vcdn = stack.acme.ok("GET", f"/vcdns/{vcdn_id}")
    assert vcdn["managed_certificate"] is True
    balancer = vcdn["regions"][0]["load_balancer"]
    dns_server = vcdn["entry_point"]["dns_servers"][0]

    # the CA is up only now: SO's first orders failed (retried, waiting longer each time)
    with pebble.running(pebble_ca, f"{dns_server}:53") as root_pem, \
            clients.client(vcdn_id, "eu-west", "10.1.0.41") as viewer:
        # the caches answer any base64url token with SO's account thumbprint, from
        # their config; anything else under the prefix is not answered
        token = "A" * 43
        status, _headers, body = viewer.fetch(
            f"http://{NAMES[0]}{challenges.PATH_PREFIX}{token}", resolve=(NAMES[0], balancer))
        assert status == 200
        assert challenges.KEY_AUTHORIZATION.fullmatch(body.decode())["token"] == token
        status, _headers, body = viewer.fetch(
            f"http://{NAMES[0]}{challenges.PATH_PREFIX}..%2f..%2fnginx.conf",
            resolve=(NAMES[0], balancer))
        assert status != 200 or b"." + token.encode() not in body

        first = _wait(lambda: _served(viewer, balancer, NAMES[0], root_pem), 60,
                      "no certificate chaining to Pebble's root is served")
        shown = stack.acme.ok("GET", f"/vcdns/{vcdn_id}")["tls"]
        assert shown["names"] == sorted(NAMES) and shown["expiry_state"] == "ok"
        assert shown["days_left"] > 30
        shown_by_cli = cdnaas(stack, "vcdn", "show", vcdn_id)
        assert f"{shown['days_left']} days left, ok" in shown_by_cli
        assert "managed (ACME" in shown_by_cli
        cafile = tmp_path / "pebble-root.pem"
        cafile.write_text(root_pem)
        version, status, body, _error = https_get(viewer, NAMES[1], balancer, cafile)
        assert (version, status) == ("2", 200) and body

        seen = [first]
        with RequestLoop(viewer, NAMES[1], balancer, cafile, LOOP_REQUESTS,
                         LOOP_SECONDS) as loop:  # across the renewals
            started = time.monotonic()
            while len(seen) <= RENEWALS and time.monotonic() - started < LOOP_SECONDS - 5:
                served = _served(viewer, balancer, NAMES[0], root_pem)
                if served and served != seen[-1]:
                    seen.append(served)
                time.sleep(0.2)
        print(f"managed certificate: {len(seen) - 1} renewals in {time.monotonic() - started:.1f}"
              f" s; {len(loop.outcomes)} HTTP/2 requests across them, {len(loop.failed)} "
              f"failed, {len(loop.retried)} refused by an old worker's GOAWAY and retried")
        assert len(seen) > RENEWALS, f"only {len(seen) - 1} renewal(s) served"
        assert len(loop.outcomes) >= 10 and loop.failed == [], \
            (len(loop.outcomes), loop.failed[:5])
        operations = stack.acme.ok("GET", f"/vcdns/{vcdn_id}/operations")["operations"]
        assert sum(o["reason"] == "certificate renewal" and o["state"] == "COMPLETED"
                   for o in operations) >= RENEWALS + 1

    _end(stack, vcdn_id)
    assert stack.client(RoClient).secrets(vcdn_id) == []
    # no private key in clear (account's or certificates') but the balancers' key files,
    # gone with the vCDN: not in SO's account file, a log or a database file
    for path in stack.state_dir.rglob("*"):
        if path.is_file():
            assert b"PRIVATE KEY-----" not in path.read_bytes(), path
    assert (stack.state_dir / "acme-account.json").stat().st_size > 0


def cdnaas(stack, *args):
    """The CLI's output of ``args`` as the tenant acme (exit code 0)."""
    env = {**stack.env, "CDNAAS_TOKEN": stack.acme.token, "COLUMNS": "200"}
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _end(stack, vcdn_id):
    """DELETE the vCDN once no renewal of it runs (bounded), and wait for its end."""
    deadline = time.monotonic() + 60
    while True:
        response = stack.acme.call("DELETE", f"/vcdns/{vcdn_id}")
        if response.status_code == 202:
            break
        assert response.status_code == 409 and time.monotonic() < deadline, response.text
        time.sleep(0.5)
    assert stack.acme.wait(response.json()["operation"]["id"], timeout=60)["state"] == \
        "COMPLETED"


def test_managed_certificate_bodies_are_refused_naming_the_field(stack, origin):
    base = {"origin": f"http://127.0.0.1:{origin.server_address[1]}"}
    for certificate, hostnames, status, field in (
            ({"managed": True}, [], 422, "hostnames"),
            ({"managed": False}, NAMES, 400, "certificate.managed"),
            ({"managed": True, "certificate": "x"}, NAMES, 400, "certificate.managed"),
            ({"managed": "yes"}, NAMES, 400, "certificate.managed")):
        response = stack.acme.call("POST", "/vcdns", json=vcdn_body(
            "refused", hostnames=hostnames, certificate=certificate, **base))
        assert response.status_code == status, response.text
        assert response.json()["error"]["field"] == field, response.text
    assert stack.acme.ok("GET", "/vcdns?name=refused")["vcdns"] == []


def test_challenge_answers_are_checked_where_ro_takes_them(stack):
    response = requests.put(f"{stack.urls['ro']}/ro/v1/deployments/none/acme-challenges",
                            headers=stack.service_headers(), timeout=10,
                            json={"challenges": [{"token": "../../etc/passwd",
                                                  "key_authorization": "x"}]})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["field"] == "challenges[0].token"

