"""Managed certificates without a CA: expiry states, when SO renews, the challenge answers
RO takes and checks against the SIG, the body's managed certificate through a vCDN's
changes, SO's account thumbprint in the SIG, and the caches' stateless answer and
Octavia's L7 policies as they are rendered."""
import dataclasses
import datetime as dt

import pytest
from acme import challenges as acme_challenges

from cdnaas.common import certificates, challenges, errors
from cdnaas.common.sig import Origin
from cdnaas.ro.vim.openstack import plan
from cdnaas.so import acme, acme_account, tls
from cdnaas.so.models import Instance
from cdnaas.vnf import balancer, cache, fields, templates
from tests.support.databases import migrated

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
TOKEN = "Zm9vYmFyYmF6cXV4X3Rva2VuXzEyMw"
THUMBPRINT = "A" * 43


def _iso(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize("days, state", [(90, "ok"), (30, "ok"), (29, "expiring"),
                                         (0, "expiring"), (-1, "expired")])
def test_expiry_warns_within_the_warning_days(days, state):
    shown = certificates.expiry(_iso(NOW + dt.timedelta(days=days, hours=1)), NOW, 30)
    assert shown == {"days_left": days, "expiry_state": state}


def _facts(names, days=90, age_days=0):
    start = NOW - dt.timedelta(days=age_days)
    return {"not_before": _iso(start), "not_after": _iso(start + dt.timedelta(days=days)),
            "names": names, "fingerprint_sha256": "ab" * 32}


def test_renewal_is_due_at_two_thirds_of_the_lifetime_or_when_names_change(monkeypatch):
    monkeypatch.setenv("CDNAAS_ACME_RENEW_AT", "0.6667")
    names = ["a.example.com"]
    managed = {"hostnames": names, "managed_certificate": True}
    assert acme.due({"hostnames": names, "tls": _facts(names)}, NOW) is None  # uploaded
    assert acme.due(managed, NOW) == "first certificate"
    assert acme.due({**managed, "tls": _facts(names, age_days=59)}, NOW) is None
    assert acme.due({**managed, "tls": _facts(names, age_days=61)}, NOW) == "renewal"
    assert acme.due({**managed, "hostnames": names + ["b.example.com"],
                     "tls": _facts(names)}, NOW) == "hostnames changed"


@pytest.fixture
def database(tmp_path):
    with migrated("so", f"sqlite:///{tmp_path / 'so.db'}") as found:
        yield found


def _add(database, cases):
    """Instances ``(id, state, days left or None: no certificate, managed)``."""
    with database.transaction() as session:
        for name, state, days, managed in cases:
            facts = None if days is None else _facts(["a.example.com"], days=days + 100,
                                                     age_days=100)
            session.add(Instance(id=name, tenant="acme", name=name, flavor="static",
                                 template_version=1, origin="http://o:80", regions=[],
                                 lease_start=NOW, lease_end=NOW, state=state, sig={},
                                 service=tls.record({}, ["a.example.com"], facts, managed)))


def test_the_view_warns_from_the_first_expiry_reminder_on(monkeypatch):
    monkeypatch.setenv("CDNAAS_CERT_EXPIRY_DAYS", "14,45,7")
    service = {"tls": _facts(["a.example.com"], days=140, age_days=100)}  # 40 days left
    assert tls.view(service, NOW)["tls"]["expiry_state"] == "expiring"
    monkeypatch.setenv("CDNAAS_CERT_EXPIRY_DAYS", "30,14")
    assert tls.view(service, NOW)["tls"]["expiry_state"] == "ok"


def test_a_failed_order_is_retried_later_and_later_and_nothing_is_installed(database,
                                                                           monkeypatch):
    monkeypatch.setenv("CDNAAS_ACME_DIRECTORY", "https://ca.example.net/dir")
    monkeypatch.setenv("CDNAAS_ACME_INTERVAL", "10")
    _add(database, [("new", "ACTIVE", None, True), ("busy", "UPDATING", None, True),
                    ("uploaded", "ACTIVE", None, False)])
    ordered, submitted = [], []

    def refused(vcdn_id, hostnames):
        ordered.append((vcdn_id, hostnames))
        raise acme.OrderFailed("the CA could not validate")
    renewer = acme.Renewer(database, submitted.append, issue_certificate=refused)
    for seconds in (0, 5, 10, 15, 29, 31, 69, 71):
        assert renewer.renew_once(NOW + dt.timedelta(seconds=seconds)) == []
    # waits of 10, 20 and 40 s after each failure: orders at the passes of 0, 10, 31 and
    # 71 s (not before 10, 30 and 70), only of the ACTIVE managed vCDN; nothing installed
    assert ordered == [("new", ["a.example.com"])] * 4 and submitted == []


@pytest.mark.parametrize("answers, field", [
    ("x", "challenges"), ([{"token": TOKEN}], "challenges[0]"),
    ([{"token": "../../nginx.conf", "key_authorization": "x"}], "challenges[0].token"),
    ([{"token": "short", "key_authorization": f"short.{THUMBPRINT}"}], "challenges[0].token"),
    ([{"token": TOKEN, "key_authorization": f"{TOKEN}.{THUMBPRINT}\n"}],
     "challenges[0].key_authorization"),
    ([{"token": TOKEN, "key_authorization": f"{TOKEN[:-1]}x.{THUMBPRINT}"}],
     "challenges[0].key_authorization"),
    ([{"token": TOKEN, "key_authorization": f"{TOKEN}.{THUMBPRINT}"}] * 2, "challenges[1].token"),
    ([{"token": f"{TOKEN}{i}", "key_authorization": f"{TOKEN}{i}.{THUMBPRINT}"}
      for i in range(33)], "challenges"),
])
def test_hostile_challenge_answers_are_refused_naming_the_item(answers, field):
    with pytest.raises(errors.BadRequest) as refused:
        challenges.parse(answers)
    assert refused.value.field == field


def test_a_managed_certificate_goes_through_a_vcdns_changes(monkeypatch):
    monkeypatch.setenv("CDNAAS_ACME_DIRECTORY", "https://ca.example.net/dir")
    names = ["a.example.com"]
    hostnames, bundle, managed = tls.accept({"hostnames": names,
                                             "certificate": {"managed": True}}, "own", NOW)
    assert (hostnames, bundle, managed) == (names, None, True)
    service = tls.record({}, hostnames, None, managed)
    assert service == {"hostnames": names, "managed_certificate": True}
    # new names while managed: no coverage check (SO orders for them), but not none
    changed, _ = tls.change(service, {"hostnames": names + ["b.example.com"]}, "own", NOW, None)
    assert tls.managed_of(changed)
    with pytest.raises(errors.Unprocessable) as refused:
        tls.change(service, {"hostnames": []}, "own", NOW, None)
    assert refused.value.field == "hostnames"
    ended, _ = tls.change(service, {"certificate": None}, "own", NOW, None)
    assert not tls.managed_of(ended)
    monkeypatch.delenv("CDNAAS_ACME_DIRECTORY")
    with pytest.raises(errors.Unprocessable) as refused:
        tls.accept({"hostnames": names, "certificate": {"managed": True}}, "own", NOW)
    assert refused.value.field == "certificate.managed"


def _cache(tmp_path, service, **values):
    return cache.cache_config(name="c", workers=1, listen_address="127.0.0.1",
                                  listen_port=8080, origin=Origin("http", "o.example.com", 80),
                                  origin_address="127.0.0.1", prefix_dir=str(tmp_path),
                                  management_sources=["127.0.0.1"], service=service, **values)


def test_caches_answer_challenges_only_for_a_managed_certificate(tmp_path):
    answer = f'return 200 "$1.{THUMBPRINT}";'
    assert "acme-challenge" not in _cache(tmp_path, {})
    text = _cache(tmp_path, {"managed_certificate": True, challenges.FIELD: THUMBPRINT})
    assert answer in text
    # ahead of the access control, in the server's rewrite phase
    server = text[text.index("server_name _;"):]
    assert server.index(answer) < server.index("location")
    # the shield serves caches, not the CA
    assert "acme-challenge" not in _cache(tmp_path, {challenges.FIELD: THUMBPRINT},
                                          shield=True)


@pytest.mark.parametrize("hostile", [
    "A" * 42, "A" * 44, "A" * 42 + '"', "A" * 42 + ";", "A" * 42 + "$", "A" * 42 + "\n",
    "A" * 42 + "}", "A" * 42 + "=", "A" * 41 + "\u00e9", 43, None, ["A" * 43], ""])
def test_a_hostile_thumbprint_is_refused_naming_the_field_and_nothing_is_rendered(
        tmp_path, hostile):
    with pytest.raises(errors.BadRequest) as refused:
        challenges.check_thumbprint(hostile)
    assert refused.value.field == challenges.FIELD
    if hostile is not None:  # None: no managed certificate, nothing to render
        with pytest.raises(fields.ConfigError, match="service.acme_thumbprint"):
            _cache(tmp_path, {challenges.FIELD: hostile})
        with pytest.raises(fields.ConfigError, match="service.acme_thumbprint"):
            balancer.lb_config(name="lb", workers=1, listen_address="127.0.0.1",
                                listen_port=8080, members=[("c", "127.0.0.1", 8081)],
                                prefix_dir=str(tmp_path), management_sources=["127.0.0.1"],
                                service={challenges.FIELD: hostile})


def test_a_flavor_cache_template_without_the_answer_is_refused_for_a_managed_certificate(
        tmp_path):
    stock = (templates.TEMPLATES_DIR / templates.CACHE_TEMPLATE).read_text()
    (tmp_path / "plain-cache.conf.j2").write_text(
        stock.replace('{% include "nginx-acme-challenge.conf.j2" %}\n', ""))
    flavor = templates.FlavorConfig(template="plain-cache.conf.j2", folders=(str(tmp_path),))
    with pytest.raises(fields.ConfigError, match="nginx-acme-challenge.conf.j2"):
        _cache(tmp_path, {challenges.FIELD: THUMBPRINT}, flavor=flavor)
    assert _cache(tmp_path, {}, flavor=flavor)  # fine without a managed certificate


def _answer(token, thumbprint=THUMBPRINT):
    return {"token": token, "key_authorization": f"{token}.{thumbprint}"}


def test_ro_takes_answers_the_caches_give_and_refuses_others_naming_the_item():
    service = {"managed_certificate": True, challenges.FIELD: THUMBPRINT}
    challenges.check_answered(service, [_answer(TOKEN), _answer(TOKEN + "2")])
    challenges.check_answered({}, [])  # nothing asked, nothing to answer
    with pytest.raises(errors.Conflict) as refused:
        challenges.check_answered(service, [_answer(TOKEN), _answer(TOKEN + "2", "B" * 43)])
    assert refused.value.field == "challenges[1].key_authorization"
    assert THUMBPRINT in refused.value.message and "B" * 43 not in refused.value.message
    with pytest.raises(errors.Conflict) as refused:
        challenges.check_answered({"managed_certificate": True}, [_answer(TOKEN)])
    assert refused.value.field == "challenges"
    with pytest.raises(errors.BadRequest) as refused:
        challenges.check_answered(service, [{"token": TOKEN, "key_authorization":
                                             f'{TOKEN}.{THUMBPRINT[:-1]}"'}])
    assert refused.value.field == "challenges[0].key_authorization"
    with pytest.raises(errors.BadRequest) as refused:
        challenges.check_answered({challenges.FIELD: "x;"}, [_answer(TOKEN)])
    assert refused.value.field == f"service.{challenges.FIELD}"


def test_the_sig_carries_the_account_thumbprint_every_key_authorization_ends_in(
        tmp_path, monkeypatch):
    monkeypatch.setenv("CDNAAS_ACME_ACCOUNT_FILE", str(tmp_path / "account.json"))
    names = ["a.example.com"]
    managed = tls.record({}, names, None, managed=True)
    thumbprint = tls.sig_service(managed)[challenges.FIELD]
    assert challenges.check_thumbprint(thumbprint) == thumbprint
    assert challenges.FIELD not in tls.sig_service(tls.record({}, names, None))
    jwk, uri = acme_account.load("https://ca.example.net/dir")
    assert uri is None
    token = acme_challenges.HTTP01(token=b"t" * 32)
    assert token.key_authorization(jwk).endswith(f".{thumbprint}")
    # the key outlives a CA that forgot the account and a move to another CA
    acme_account.save_url("https://ca.example.net/dir", "https://ca.example.net/acct/1")
    assert acme_account.load("https://ca.example.net/dir")[1] == "https://ca.example.net/acct/1"
    assert acme_account.load("https://other.example.net/dir")[1] is None
    acme_account.forget_url()
    assert acme_account.load("https://ca.example.net/dir")[1] is None
    assert tls.sig_service(managed)[challenges.FIELD] == thumbprint
    # the file is sealed: no key in clear
    assert b"PRIVATE KEY" not in (tmp_path / "account.json").read_bytes()
    (tmp_path / "account.key").write_text("replaced\n")
    with pytest.raises(errors.CdnaasError, match="ACME account"):
        tls.sig_service(managed)


@pytest.mark.parametrize("mode", ["redirect", "refuse"])
def test_octavia_lets_the_challenge_path_through_ahead_of_a_redirect_or_refusal(mode):
    policy = {"http": mode}
    plain = plan.http_l7_policies(policy, ["a.example.com"], ["t"])
    passed = plan.http_l7_policies(policy, ["a.example.com"], ["t"], acme_pool="lb-http")
    assert passed[0] == {"name": "acme-http01", "action": "REDIRECT_TO_POOL",
                         "redirect_pool": {"name": "lb-http"}, "tags": ["t"], "position": 1,
                         "rules": [{"type": "PATH", "compare_type": "STARTS_WITH",
                                    "value": challenges.PATH_PREFIX}]}
    assert [dict(p, position=p["position"] - 1) for p in passed[1:]] == plain
    assert plan.http_l7_policies({"http": "allow"}, ["a.example.com"], acme_pool="x") == []
    specs = plan.listeners("lb-http", ["t"], container_ref="ref", policy=policy,
                           names=["a.example.com"], acme=True)
    assert specs[0]["l7policies"][0]["redirect_pool"] == {"name": specs[0]["default_pool"][
        "name"]}
