"""Managed certificates without a CA: expiry states, when SO renews, the challenge answers
RO takes, the body's managed certificate through a vCDN's changes, and the balancer's
challenge location as nginx reads it."""
import datetime as dt
import stat

import pytest

from cdnaas.common import certificates, challenges, errors
from cdnaas.ro import vnfconfig
from cdnaas.ro.vim.local import challenge_files
from cdnaas.so import acme, tls
from cdnaas.so.models import Instance
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


def _lb(tmp_path, **values):
    return vnfconfig.lb_config(name="lb", workers=1, listen_address="127.0.0.1",
                               listen_port=8080, members=[("c", "127.0.0.1", 8081)],
                               prefix_dir=str(tmp_path), management_sources=["127.0.0.1"],
                               **values)


def test_the_balancer_answers_challenges_only_for_a_managed_certificate(tmp_path):
    assert challenges.PATH_PREFIX not in _lb(tmp_path)
    text = _lb(tmp_path, acme_challenges=f"{tmp_path}/acme-challenge")
    assert f"alias {tmp_path}/acme-challenge/$1;" in text
    for hostile in ("relative/dir", f"{tmp_path}/../etc", f"{tmp_path}/x;"):
        with pytest.raises(vnfconfig.ConfigError, match="acme_challenges"):
            _lb(tmp_path, acme_challenges=hostile)


def test_a_flavor_balancer_template_without_challenges_is_refused_for_a_managed_certificate(
        tmp_path):
    stock = (vnfconfig.TEMPLATES_DIR / vnfconfig.LB_TEMPLATE).read_text()
    (tmp_path / "plain-lb.conf.j2").write_text(
        stock.replace('{% include "nginx-acme-challenge.conf.j2" %}\n', ""))
    flavor = vnfconfig.FlavorConfig(template="plain-lb.conf.j2", folders=(str(tmp_path),))
    with pytest.raises(vnfconfig.ConfigError, match="nginx-acme-challenge.conf.j2"):
        _lb(tmp_path, flavor=flavor, acme_challenges=f"{tmp_path}/acme-challenge")


def test_the_local_driver_writes_exactly_the_answers_it_is_given(tmp_path):
    first, second = (f"{TOKEN}{i}" for i in (1, 2))
    answers = [{"token": t, "key_authorization": f"{t}.{THUMBPRINT}"} for t in (first, second)]
    challenge_files.write(tmp_path, answers)
    folder = tmp_path / challenge_files.DIRECTORY
    assert sorted(p.name for p in folder.iterdir()) == [first, second]
    assert (folder / first).read_text() == f"{first}.{THUMBPRINT}"  # no newline
    assert stat.S_IMODE((folder / first).stat().st_mode) == 0o644
    challenge_files.write(tmp_path, answers[1:])
    assert [p.name for p in folder.iterdir()] == [second]
    with pytest.raises(errors.BadRequest):
        challenge_files.write(tmp_path, [{"token": "../x" * 8, "key_authorization": "y"}])
    assert [p.name for p in folder.iterdir()] == [second]  # a refusal changes nothing
    challenge_files.write(tmp_path, [])
    assert list(folder.iterdir()) == []
