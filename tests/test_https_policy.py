"""HTTPS policy (``https_policy``, :mod:`cdnaas.delivery.https`): checked and rendered
(nginx -t on every variant, with a certificate naming an OCSP responder), then end to end
on the local driver (real nginx, a viewer's curl and openssl in its region's namespace):
plain HTTP redirected (301/308 with path and query) or refused (403), HSTS on HTTPS only,
TLS 1.2 refused under a 1.3 minimum, a name the vCDN does not serve (or none) failing the
handshake, a PATCH of the policy reloading the balancer with no request failed, and
hostile or contradictory bodies refused naming the field with nothing written."""
import http.server
import json
import socket
import ssl
import threading
import types
import time

import pytest
import requests
from click.testing import CliRunner

from cdnaas.cli.main import cli
from cdnaas.common import certificates, challenges, errors
from cdnaas.common.clients import RoClient
from cdnaas.common.ports import free_loopback_ports
from cdnaas.delivery import https
from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.local import clients, netns
from cdnaas.ro.vim.local.system import run
from cdnaas.vnf import fields, tools
from cdnaas.vnf.balancer import lb_config
from tests.support.api import vcdn_body
from tests.support.certs import TestCA
from tests.support.delivery import local_stack
from tests.test_vnf_rendering import need, running

NAMES = ["www.policy-shop.com"]
PATH = "/objects/chunk-low"
#: the PATCH's request loop: at most this many requests, for at most this long
LOOP_REQUESTS, LOOP_SECONDS = 300, 20.0
#: curl's exit codes: TLS handshake failed; HTTP/2 stream refused by a leaving worker's
#: GOAWAY (not processed, retried as browsers do: tests/test_tls.py)
HANDSHAKE_FAILED, GOAWAY_REFUSED = 35, 16
#: an OCSP responder named by address (TEST-NET-1: never reached), so nginx keeps
#: stapling on without resolving a name as it loads its config
RESPONDER = "http://192.0.2.1/ocsp"
FULL = {"http": "redirect", "min_tls_version": "1.3", "unknown_sni": "refuse",
        "hsts": {"max_age": 31536000, "include_subdomains": True, "preload": True}}


@pytest.fixture(scope="module")
def ca():
    return TestCA()


# --- checked and rendered ---------------------------------------------------------------

def test_the_defaults_are_not_stored_and_the_stored_form_checks_again():
    assert https.check({}, "https_policy") is None
    assert https.check(https.DEFAULTS, "https_policy") is None
    stored = https.check({"http": "refuse", "hsts": {"max_age": 600}}, "https_policy")
    assert stored == {"http": "refuse", "min_tls_version": "1.2", "unknown_sni": "refuse",
                      "hsts": {"max_age": 600, "include_subdomains": False, "preload": False}}
    assert https.check(stored, "https_policy") == stored
    assert https.view(None) == https.DEFAULTS and https.view(stored) == stored
    assert https.render(https.check(FULL, "f")) == {
        "http": "redirect", "protocols": "TLSv1.3", "reject_unknown_sni": True,
        "hsts": "max-age=31536000; includeSubDomains; preload"}
    assert https.render(None) == {"http": "allow", "hsts": None, "reject_unknown_sni": True,
                                  "protocols": "TLSv1.2 TLSv1.3"}


@pytest.mark.parametrize("value, field", [
    ("redirect", "https_policy"), ({"http": "upgrade"}, "https_policy.http"),
    ({"http": "redirect;"}, "https_policy.http"), ({"min_tls_version": "1.1"},
                                                    "https_policy.min_tls_version"),
    ({"min_tls_version": 1.3}, "https_policy.min_tls_version"),
    ({"unknown_sni": "maybe"}, "https_policy.unknown_sni"),
    ({"hsts": {"max_age": -1}}, "https_policy.hsts.max_age"),
    ({"hsts": {"max_age": 63072001}}, "https_policy.hsts.max_age"),
    ({"hsts": {"max_age": "1; evil"}}, "https_policy.hsts.max_age"),
    ({"hsts": {"max_age": True}}, "https_policy.hsts.max_age"),
    ({"hsts": {}}, "https_policy.hsts.max_age"),
    ({"hsts": {"max_age": 600, "preload": True, "include_subdomains": True}},
     "https_policy.hsts.preload"),
    ({"hsts": {"max_age": 31536000, "preload": True}}, "https_policy.hsts.preload"),
    ({"hsts": {"max_age": 600, "include_subdomains": "yes"}},
     "https_policy.hsts.include_subdomains"),
    ({"hsts": "max-age=1"}, "https_policy.hsts"), ({"tls": "1.3"}, "https_policy.tls"),
])
def test_hostile_policies_are_refused_naming_the_field(value, field):
    with pytest.raises(errors.BadRequest) as refused:
        https.check(value, "https_policy")
    assert refused.value.field == field


def _lb(tmp_path, policy, issued=None, **tls):
    chain, key = tmp_path / "c.crt", tmp_path / "c.key"
    if issued is not None:
        chain.write_text(issued.chain_pem)
        key.write_text(issued.key_pem)
    return lb_config(
        name="lb", workers=1, listen_address="127.0.0.1", listen_port=8000,
        members=[("c", "127.0.0.1", 8081)], prefix_dir=str(tmp_path),
        management_sources=["127.0.0.1"], server_names=NAMES,
        tls=None if issued is None else {"port": 8443, "certificate": str(chain),
                                         "key": str(key), **tls},
        service={"https_policy": https.check(policy, "https_policy")})


@pytest.mark.parametrize("policy", [
    {}, FULL, {"http": "refuse", "unknown_sni": "serve"},
    {"hsts": {"max_age": 0}, "min_tls_version": "1.3"},
])
@pytest.mark.parametrize("responder", [None, RESPONDER, "http://ocsp.policy-ca.test/"])
def test_every_policy_passes_nginx_with_stapling_where_a_responder_is_named(
        tmp_path, ca, policy, responder):
    issued = ca.issue(NAMES, ocsp_url=responder)
    stapling = bool(certificates.ocsp_responders(issued.chain_pem))
    assert stapling == (responder is not None)
    text = _lb(tmp_path, policy, issued, stapling=stapling)
    tools.check_nginx(text, str(tmp_path))
    assert ("ssl_stapling on;" in text) == stapling
    assert ("ssl_reject_handshake on;" in text) == (policy.get("unknown_sni") != "serve")
    rendered = https.render(https.check(policy, "p"))
    # the default server's TLS versions are the handshake's: both servers say the same
    assert text.count(f"ssl_protocols {rendered['protocols']};") == \
        (2 if rendered["reject_unknown_sni"] else 1)
    assert text.count("Strict-Transport-Security") == (2 if rendered["hsts"] else 0)
    assert ("return 301 https://$host:8443$request_uri;" in text) == \
        (policy.get("http") == "redirect")


def test_without_a_certificate_nothing_is_rendered_and_a_redirect_is_refused(tmp_path):
    plain = _lb(tmp_path, {"hsts": {"max_age": 600}})
    # (the usage log names $ssl_* variables on every balancer: look for the TLS directives)
    assert "ssl_certificate" not in plain and "ssl_protocols" not in plain
    assert "Strict-Transport-Security" not in plain
    with pytest.raises(fields.ConfigError, match="https_policy.http redirect"):
        _lb(tmp_path, {"http": "redirect"})


def test_a_policy_needing_https_names_what_to_change():
    with pytest.raises(errors.Unprocessable) as refused:
        https.check_served({"http": "refuse"}, False)
    assert refused.value.field == "https_policy.http"
    with pytest.raises(errors.Unprocessable) as refused:
        https.check_served({"http": "redirect"}, False, field="certificate")
    assert refused.value.field == "certificate"
    https.check_served({"http": "redirect"}, True)
    https.check_served(None, False)


# --- end to end on the local driver -----------------------------------------------------

@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    yield from local_stack(tmp_path_factory)


def _curl(viewer, url, *options, resolve_to=None, timeout=10):
    """``(curl's exit code, status, {header: value})`` of one request from ``viewer``
    (``resolve_to``: the balancer its URL's name is pinned to, on the URL's port)."""
    command = ["curl", "-s", "-o", "/dev/null", "-D", "-", "--max-time", str(timeout),
               "-w", "%{exitcode}", *options]
    if resolve_to:
        host = url.split("/")[2]
        command += ["--resolve", f"{host}:{443 if url.startswith('https:') else 80}:"
                                 f"{resolve_to}"]
    out = run(command + [url], check=False, timeout=timeout + 5, namespace=viewer.namespace)
    head, _, code = out.rpartition("\n")
    lines = [line.strip() for line in head.splitlines() if line.strip()]
    status = int(lines[0].split()[1]) if lines and lines[0].startswith("HTTP/") else 0
    headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    return int(code or -1), status, headers


def _handshake(viewer, balancer, name):
    """Whether a TLS handshake naming ``name`` (None: no SNI) with ``balancer`` succeeds
    (``openssl s_client``, no verification: the handshake alone is asked)."""
    command = ["openssl", "s_client", "-connect", f"{balancer}:443", "-brief"]
    command += ["-servername", name] if name else ["-noservername"]
    try:  # s_client ends 0 once connected (its input is empty), 1 when the handshake fails
        run(command, input_text="", timeout=15, namespace=viewer.namespace)
    except VimError:
        return False
    return True


def _resumes(viewer, balancer, name, cafile):
    """Whether a viewer's second TLS connection naming ``name`` resumes the session of its
    first (each reads an answer, so a TLS 1.3 session's ticket has arrived)."""
    context = ssl.create_default_context(cafile=str(cafile))
    session = None
    for _ in range(2):
        with netns.entered(viewer.namespace):
            raw = socket.create_connection((balancer, 443), timeout=5)
        with context.wrap_socket(raw, server_hostname=name, session=session) as tls:
            tls.sendall(f"HEAD {PATH} HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n"
                        .encode())
            while tls.recv(65536):
                pass
            session, reused = tls.session, tls.session_reused
    return reused


def _deploy(stack, origin, ca, name, policy, responder=None):
    issued = ca.issue(NAMES, ocsp_url=responder)
    body = vcdn_body(name, origin=f"http://127.0.0.1:{origin.server_address[1]}",
                     hostnames=NAMES, https_policy=policy,
                     certificate={"certificate": issued.chain_pem, "private_key": issued.key_pem})
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
    assert stack.acme.wait(accepted["operation"]["id"], timeout=90)["state"] == "COMPLETED"
    return stack.acme.ok("GET", f"/vcdns/{accepted['vcdn']['id']}")


def _end(stack, vcdn_id):
    ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn_id}", 202)
    assert stack.acme.wait(ended["operation"]["id"], timeout=60)["state"] == "COMPLETED"


def test_redirect_hsts_tls13_and_unknown_names_refused_then_patched_without_a_failure(
        stack, origin, ca, tmp_path):
    vcdn = _deploy(stack, origin, ca, "strict", FULL, responder=RESPONDER)
    vcdn_id, name, own = vcdn["id"], NAMES[0], vcdn["entry_point"]["hostname"]
    assert vcdn["https_policy"] == FULL
    balancer = vcdn["regions"][0]["load_balancer"]
    cafile = tmp_path / "ca.pem"
    cafile.write_text(ca.root_pem)
    conf = next((stack.state_dir / "local").glob(f"*/{vcdn_id}/*-lb-*/nginx.conf")).read_text()
    assert "ssl_stapling on;" in conf  # the certificate names a responder (never reached)
    verify = ("--cacert", str(cafile))
    with clients.client(vcdn_id, "eu-west", "10.1.0.41") as viewer:
        code, status, headers = _curl(viewer, f"http://{name}{PATH}?v=1&w=2", resolve_to=balancer)
        assert (code, status) == (0, 301), headers
        assert headers.get("location") == f"https://{name}{PATH}?v=1&w=2", headers
        assert "strict-transport-security" not in headers
        code, status, headers = _curl(viewer, f"http://{name}/upload", "-X", "POST", "-d", "x=1",
                                      resolve_to=balancer)
        assert status == 308 and headers["location"] == f"https://{name}/upload"
        code, status, headers = _curl(viewer, f"https://{name}{PATH}", *verify,
                                      resolve_to=balancer)
        assert (code, status) == (0, 200)
        assert headers["strict-transport-security"] == \
            "max-age=31536000; includeSubDomains; preload"
        code, status, _ = _curl(viewer, f"https://{name}{PATH}", *verify, "--tls-max", "1.2",
                                resolve_to=balancer)
        assert (code, status) == (HANDSHAKE_FAILED, 0)  # TLS 1.2 offered, 1.3 required
        # names the vCDN does not serve, or none (by address), fail the handshake itself
        for url, pin in ((f"https://unknown.policy-shop.com{PATH}", balancer),
                         (f"https://{balancer}{PATH}", None)):
            code, status, _ = _curl(viewer, url, "-k", resolve_to=pin)
            assert (code, status) == (HANDSHAKE_FAILED, 0), url
        assert not _handshake(viewer, balancer, "unknown.policy-shop.com")
        assert not _handshake(viewer, balancer, None)
        assert _handshake(viewer, balancer, name) and _handshake(viewer, balancer, own)
        # sessions resume though the default server (which refuses) sees them first
        assert _resumes(viewer, balancer, name, cafile)

        outcomes, retried, stop = [], [], threading.Event()

        def loop():  # HTTPS requests back to back, across the PATCH
            deadline = time.monotonic() + LOOP_SECONDS
            while not stop.is_set() and len(outcomes) < LOOP_REQUESTS \
                    and time.monotonic() < deadline:
                outcome = _curl(viewer, f"https://{name}{PATH}", *verify, resolve_to=balancer)
                if outcome[0] == GOAWAY_REFUSED:  # not processed: retried (RFC 9113 6.8)
                    retried.append(outcome)
                    outcome = _curl(viewer, f"https://{name}{PATH}", *verify,
                                    resolve_to=balancer)
                outcomes.append(outcome[:2])
        worker = threading.Thread(target=loop)
        worker.start()
        try:
            time.sleep(0.5)
            relaxed = {"http": "refuse", "unknown_sni": "serve"}
            patched = stack.acme.ok("PATCH", f"/vcdns/{vcdn_id}", 202,
                                    json={"https_policy": relaxed})
            operation = stack.acme.wait(patched["operation"]["id"], timeout=60)
            assert operation["state"] == "COMPLETED", operation
            time.sleep(1.0)
        finally:
            stop.set()
            worker.join()
        failed = [o for o in outcomes if o != (0, 200)]
        print(f"https_policy PATCH: {len(outcomes)} HTTPS requests across it, {len(failed)} "
              f"failed, {len(retried)} refused by an old worker's GOAWAY and retried")
        assert len(outcomes) >= 10 and failed == [], (len(outcomes), failed[:5])

        deadline = time.monotonic() + 5  # the reload is signalled: the master takes a moment
        while _curl(viewer, f"http://{name}{PATH}", resolve_to=balancer)[1] != 403:
            assert time.monotonic() < deadline, "plain HTTP is still not refused"
            time.sleep(0.1)
        code, status, headers = _curl(viewer, f"https://{name}{PATH}", *verify, "--tls-max",
                                      "1.2", resolve_to=balancer)
        assert (code, status) == (0, 200) and "strict-transport-security" not in headers
        code, status, _ = _curl(viewer, f"https://{balancer}{PATH}", "-k")
        assert (code, status) == (0, 200)  # unknown_sni serve: by address too
        assert _handshake(viewer, balancer, None)

    # the certificate cannot go while the policy refuses plain HTTP: nothing changes
    kept = stack.acme.ok("GET", f"/vcdns/{vcdn_id}")
    refused = stack.acme.call("PATCH", f"/vcdns/{vcdn_id}", json={"certificate": None})
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "certificate"
    assert stack.acme.ok("GET", f"/vcdns/{vcdn_id}") == kept
    # both at once is fine: HTTP only, served
    both = stack.acme.ok("PATCH", f"/vcdns/{vcdn_id}", 202,
                         json={"certificate": None, "https_policy": None})
    assert stack.acme.wait(both["operation"]["id"], timeout=60)["state"] == "COMPLETED"
    vcdn = stack.acme.ok("GET", f"/vcdns/{vcdn_id}")
    assert vcdn["tls"] is None and vcdn["https_policy"] == https.DEFAULTS
    with clients.client(vcdn_id, "eu-west", "10.1.0.42") as viewer:
        assert _curl(viewer, f"http://{name}{PATH}", resolve_to=balancer)[1] == 200
    _end(stack, vcdn_id)


@pytest.mark.parametrize("policy, certificate, status, field", [
    ({"http": "redirect"}, False, 422, "https_policy.http"),
    ({"http": "refuse"}, False, 422, "https_policy.http"),
    ({"http": "upgrade"}, True, 400, "https_policy.http"),
    ({"min_tls_version": "1.0"}, True, 400, "https_policy.min_tls_version"),
    ({"hsts": {"max_age": 99999999999}}, True, 400, "https_policy.hsts.max_age"),
    ({"hsts": {"max_age": 60, "preload": True, "include_subdomains": True}}, True, 400,
     "https_policy.hsts.preload"),
    ({"unknown_sni": "serve\n}"}, True, 400, "https_policy.unknown_sni"),
    ({"extra": 1}, True, 400, "https_policy"),
])
def test_hostile_or_contradictory_bodies_write_nothing(stack, origin, ca, policy, certificate,
                                                       status, field):
    before, kept = stack.acme.ok("GET", "/vcdns"), stack.client(RoClient).secrets(None)
    issued = ca.issue(NAMES)
    extra = {"hostnames": NAMES, "certificate": {"certificate": issued.chain_pem,
                                                 "private_key": issued.key_pem}} \
        if certificate else {}
    body = vcdn_body("hostile", origin=f"http://127.0.0.1:{origin.server_address[1]}",
                     https_policy=policy, **extra)
    response = stack.acme.call("POST", "/vcdns", json=body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["field"].startswith(field), response.text
    assert stack.acme.ok("GET", "/vcdns") == before  # no vCDN written
    assert stack.client(RoClient).secrets(None) == kept  # no certificate kept


def test_the_cli_sets_shows_and_replaces_the_policy(stack, origin, ca, tmp_path):
    issued = ca.issue(["cli.policy-shop.com"])
    (tmp_path / "cert.pem").write_text(issued.chain_pem)
    (tmp_path / "key.pem").write_text(issued.key_pem)
    (tmp_path / "policy.yaml").write_text("http: redirect\nmin_tls_version: '1.3'\n"
                                          "hsts: {max_age: 600}\n")
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "bad.yaml").write_text("http: [unclosed\n")
    env = {**stack.env, "CDNAAS_TOKEN": stack.acme.token, "COLUMNS": "250"}

    def cdnaas(*args, code=0):
        result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result.output

    created = json.loads(cdnaas(
        "--json", "vcdn", "create", "--name", "cli-policy", "--flavor", "static",
        "--origin", f"http://127.0.0.1:{origin.server_address[1]}", "--region", "eu-west:100",
        "--lease-hours", "2", "--hostname", "cli.policy-shop.com",
        "--certificate", str(tmp_path / "cert.pem"), "--private-key", str(tmp_path / "key.pem"),
        "--https-policy", str(tmp_path / "policy.yaml")))
    vcdn_id = created["vcdn"]["id"]
    assert stack.acme.wait(created["operation"]["id"], timeout=90)["state"] == "COMPLETED"
    assert "HTTP redirect, TLS 1.3+, unknown names refused, HSTS max-age=600" in \
        cdnaas("vcdn", "show", vcdn_id)
    assert "--https-policy" in cdnaas("vcdn", "update", vcdn_id, "--https-policy",
                                      str(tmp_path / "bad.yaml"), code=2)
    cdnaas("vcdn", "update", vcdn_id, "--https-policy", str(tmp_path / "empty.yaml"), "--wait",
           "--timeout", "60")
    assert stack.acme.ok("GET", f"/vcdns/{vcdn_id}")["https_policy"] == https.DEFAULTS
    _end(stack, vcdn_id)


# --- the Octavia balancer's listeners (OpenStack: the arguments sent, no cloud) ----------

def test_octavia_listeners_carry_the_policy():
    from cdnaas.ro.vim.openstack import plan  # pylint: disable=import-outside-toplevel
    names = ["vcdn.acme.cdn.example.net", NAMES[0]]
    http, tls = plan.listeners("lb", ["t"], container_ref="https://barbican/c", alpn=True,
                               policy_api=True, policy=https.check(FULL, "p"), names=names)
    assert tls["tls_versions"] == ["TLSv1.3"]
    assert (tls["hsts_max_age"], tls["hsts_include_subdomains"], tls["hsts_preload"]) == \
        (31536000, True, True)
    assert [(p["action"], p["redirect_prefix"], p["redirect_http_code"], p["position"],
             p["rules"]) for p in http["l7policies"]] == [
        ("REDIRECT_PREFIX", f"https://{name}", 301, index,
         [{"type": "HOST_NAME", "compare_type": "EQUAL_TO", "value": name}])
        for index, name in enumerate(names, start=1)]
    http, tls = plan.listeners("lb", ["t"], container_ref="https://barbican/c",
                               policy=https.check({"http": "refuse"}, "p"), names=names)
    assert [p["action"] for p in http["l7policies"]] == ["REJECT"]
    assert http["l7policies"][0]["rules"] == [
        {"type": "PATH", "compare_type": "STARTS_WITH", "value": "/"}]
    assert "tls_versions" not in tls and "hsts_max_age" not in tls  # any API takes it
    # the defaults: no L7 policy; without a certificate: HTTP alone, as before
    assert "l7policies" not in plan.listeners("lb", ["t"], container_ref="c", names=names)[0]
    assert len(plan.listeners("lb", ["t"], policy=https.check({"hsts": {"max_age": 1}}, "p"),
                              names=names)) == 1


def test_octavia_without_hsts_or_a_stored_policy_gone_bad_is_refused():
    from cdnaas.ro.vim.base import DeploymentFailed  # pylint: disable=import-outside-toplevel
    from cdnaas.ro.vim.openstack import plan  # pylint: disable=import-outside-toplevel
    for asked in ({"hsts": {"max_age": 60}}, {"min_tls_version": "1.3"}):
        with pytest.raises(DeploymentFailed, match="2.27"):
            plan.listeners("lb", [], container_ref="c", policy_api=False,
                           policy=https.check(asked, "p"))
    plan.listeners("lb", [], container_ref="c", policy_api=False,
                   policy=https.check({"http": "refuse"}, "p"))  # L7 policies: any API
    with pytest.raises(DeploymentFailed, match="service.https_policy.http"):
        plan.tls_listener_policy({"http": "redirect; return 200", "hsts": None,
                                  "min_tls_version": "1.2", "unknown_sni": "refuse"})
    assert plan.octavia_supports(["v2.0", "v2.27"], plan.HSTS_VERSION)
    assert not plan.octavia_supports(["v2.26", "x"], plan.HSTS_VERSION)


def test_the_octavia_driver_sends_the_policy_with_the_balancer_and_sees_a_change(
        monkeypatch):
    from cdnaas.common.sig import ServiceInstanceGraph  # pylint: disable=import-outside-toplevel
    from cdnaas.ro.vim.openstack import cloud as oscloud  # pylint: disable=import-outside-toplevel
    from cdnaas.ro.vim.openstack import balancers  # pylint: disable=import-outside-toplevel
    from cdnaas.ro.vim.openstack.driver import OpenStackDriver  # pylint: disable=import-outside-toplevel
    from tests.support.sigs import sample_sig  # pylint: disable=import-outside-toplevel
    sig = ServiceInstanceGraph.from_dict(sample_sig())
    sig.service = {"hostnames": NAMES, "tls": {"certificate_ref": "ref-1"},
                   "https_policy": https.check(FULL, "p")}
    monkeypatch.setattr(oscloud, "octavia_versions", lambda conn: ["v2.0", "v2.27"])
    driver = OpenStackDriver()
    driver.secrets = types.SimpleNamespace(external_ref=lambda ref: f"https://barbican/{ref}")
    region = sig.regions[0].name
    http, tls = balancers.listeners(driver.secrets, None, sig, region)
    assert tls["default_tls_container_ref"] == "https://barbican/ref-1"
    assert tls["tls_versions"] == ["TLSv1.3"] and tls["hsts_preload"] is True
    assert [p["redirect_prefix"] for p in http["l7policies"]] == \
        [f"https://{name}" for name in [sig.hostname, *NAMES]]
    # a change of the policy, or a new name the redirect must match, is a change the
    # update flow gives the live balancers (tests/test_openstack_https_policy.py)
    before = ServiceInstanceGraph.from_dict(sample_sig())
    assert balancers.https_policy_changed(before, sig)
    renamed = ServiceInstanceGraph.from_dict(sample_sig())
    renamed.service = {**sig.service, "hostnames": NAMES + ["new.policy-shop.com"]}
    assert balancers.https_policy_changed(sig, renamed)
    assert not balancers.https_policy_changed(sig, sig)


@pytest.mark.parametrize("mode", ["redirect", "refuse"])
def test_the_balancer_lets_acme_challenges_reach_the_caches_over_plain_http(tmp_path, ca,
                                                                             mode):
    """With a managed certificate, plain HTTP of the ACME HTTP-01 path goes to the caches
    (which answer it) whatever the policy does to plain HTTP; every other path is
    redirected or refused as before. Real nginx in front of a member that says so."""
    need("nginx", root=True)
    member = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Member)
    threading.Thread(target=member.serve_forever, daemon=True).start()
    port, https_port, management = free_loopback_ports(3)
    chain, key = tmp_path / "c.crt", tmp_path / "c.key"
    issued = ca.issue(NAMES)
    chain.write_text(issued.chain_pem)
    key.write_text(issued.key_pem)
    text = lb_config(
        name="lb", workers=1, listen_address="127.0.0.1", listen_port=port,
        members=[("c", "127.0.0.1", member.server_address[1])], prefix_dir=str(tmp_path),
        management_sources=["127.0.0.1"], management_port=management, server_names=NAMES,
        user="root", daemon=False,
        tls={"port": https_port, "certificate": str(chain), "key": str(key)},
        service={"https_policy": https.check({"http": mode}, "https_policy"),
                 "managed_certificate": True, challenges.FIELD: "T" * 43})
    (tmp_path / "logs").mkdir(exist_ok=True)
    (tmp_path / "nginx.conf").write_text(text)
    try:
        with running(["nginx", "-p", f"{tmp_path}/", "-c", str(tmp_path / "nginx.conf")],
                     "the balancer",
                     lambda: requests.get(f"http://127.0.0.1:{management}/", timeout=1)
                     is not None):
            def plain(path):
                return requests.get(f"http://127.0.0.1:{port}{path}", timeout=5,
                                    headers={"Host": NAMES[0]}, allow_redirects=False)
            challenge = plain(f"{challenges.PATH_PREFIX}{'k' * 43}")
            assert (challenge.status_code, challenge.text) == (200, "member")
            other = plain("/objects/chunk-low")
            assert other.status_code == (301 if mode == "redirect" else 403)
            assert plain(f"{challenges.PATH_PREFIX}x/../../objects").status_code == \
                other.status_code
    finally:
        member.shutdown()
        member.server_close()


class _Member(http.server.BaseHTTPRequestHandler):
    """A balancer member (a cache) that answers every GET with ``member``."""

    def do_GET(self):  # noqa: N802 (the http.server name)
        self.send_response(200)
        self.send_header("Content-Length", "6")
        self.end_headers()
        self.wfile.write(b"member")

    def log_message(self, *_args):
        pass
