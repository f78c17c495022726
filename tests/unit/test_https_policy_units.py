"""HTTPS policy (``https_policy``, :mod:`cdnaas.delivery.https`): the tests that start no
process (the unit tier); the others, and what the module covers, are in
tests/system/test_https_policy.py."""
import types

import pytest

from cdnaas.common import errors
from cdnaas.delivery import https
from cdnaas.vnf import fields
from cdnaas.vnf.balancer import lb_config

NAMES = ["www.policy-shop.com"]
FULL = {"http": "redirect", "min_tls_version": "1.3", "unknown_sni": "refuse",
        "hsts": {"max_age": 31536000, "include_subdomains": True, "preload": True}}


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
    # update flow gives the live balancers (tests/system/test_openstack_https_policy.py)
    before = ServiceInstanceGraph.from_dict(sample_sig())
    assert balancers.https_policy_changed(before, sig)
    renamed = ServiceInstanceGraph.from_dict(sample_sig())
    renamed.service = {**sig.service, "hostnames": NAMES + ["new.policy-shop.com"]}
    assert balancers.https_policy_changed(sig, renamed)
    assert not balancers.https_policy_changed(sig, sig)
