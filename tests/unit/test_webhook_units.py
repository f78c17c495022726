"""Webhook pieces without a stack: signatures, URL checks, backoff, the nearest
certificate threshold and the IM's quality falls."""
import datetime as dt

import pytest

from cdnaas.common import answers, errors
from cdnaas.im import quality_events
from cdnaas.im.series import Level
from cdnaas.so import reminders, webhook_delivery, webhooks

BODY = b'{"id":"e1","type":"operation.ended"}'


def test_a_signature_verifies_only_for_its_body_secret_and_time():
    header = webhook_delivery.sign("whsec_a", BODY, 1_800_000_000)
    assert header.startswith("t=1800000000,v1=") and len(header.split("v1=")[1]) == 64
    assert webhook_delivery.verify("whsec_a", BODY, header, now=1_800_000_100)
    assert not webhook_delivery.verify("whsec_b", BODY, header, now=1_800_000_100)
    assert not webhook_delivery.verify("whsec_a", BODY + b" ", header, now=1_800_000_100)
    assert not webhook_delivery.verify("whsec_a", BODY, header, now=1_800_001_000)  # replayed
    forged = header.replace("t=1800000000", "t=1800000900")
    assert not webhook_delivery.verify("whsec_a", BODY, forged, now=1_800_000_900)
    for garbage in ("", "v1=00", "t=x,v1=00", None):
        assert not webhook_delivery.verify("whsec_a", BODY, garbage, now=1_800_000_000)


@pytest.mark.parametrize("url", ["https://hooks.example.com/cdnaas", "http://hooks.example.com:8080/x?a=1",
                                 "https://[2001:db8::1]/h"])
def test_urls_that_may_receive(url, monkeypatch):
    monkeypatch.setenv("CDNAAS_ORIGIN_ALLOW", "hooks.example.com,2001:db8::/32")
    assert webhooks.check_url(url) == url


@pytest.mark.parametrize("url, problem", [
    ("gopher://hooks.example.com/", "scheme"), ("https://a:b@hooks.example.com/", "credentials"),
    ("https:///x", "no host"), ("https://hooks.example.com:0x/", "port"),
    ("https://hooks.example.com/#x", "fragment"), ("https://hooks.example.com/\r\nX: y", "control"),
    ("http://127.0.0.1:8701/so/v1/regions", "127.0.0.1"), ("http://[::1]/", "::1"),
])
def test_urls_refused_name_the_field_and_why(url, problem, monkeypatch):
    monkeypatch.delenv("CDNAAS_ORIGIN_DENY", raising=False)
    monkeypatch.delenv("CDNAAS_ORIGIN_ALLOW", raising=False)
    with pytest.raises(errors.BadRequest) as refused:
        webhooks.check_url(url)
    assert refused.value.field == "url" and problem in refused.value.message


def test_backoff_doubles_from_the_setting(monkeypatch):
    monkeypatch.delenv("CDNAAS_WEBHOOK_BACKOFF_SECONDS", raising=False)
    assert [webhook_delivery.backoff(n) for n in range(1, 6)] == [120, 240, 480, 960, 1920]
    monkeypatch.setenv("CDNAAS_WEBHOOK_BACKOFF_SECONDS", "0.5")
    assert webhook_delivery.backoff(3) == 2.0


def test_thresholds_are_read_at_call_time(monkeypatch):
    monkeypatch.delenv("CDNAAS_CERT_EXPIRY_DAYS", raising=False)
    assert reminders.thresholds() == [1, 7, 14, 30]
    monkeypatch.setenv("CDNAAS_CERT_EXPIRY_DAYS", "60,3")
    assert reminders.thresholds() == [3, 60]


AT = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)
VCDN = answers.from_json(answers.Instance, {
    "id": "v", "regions": [{"name": "eu", "quality": {"min_mos": 4.0}},
                           {"name": "us", "quality": {"response_time": {}}}]})


def levels(*moses):
    return [Level(AT + dt.timedelta(seconds=10 * i), 100.0, mos, 2) for i, mos in enumerate(moses)]


@pytest.mark.parametrize("history, fell", [
    ({"eu": levels(4.3, 3.9)}, True),          # it fell
    ({"eu": levels(3.9)}, True),               # the first pass is below
    ({"eu": levels(None, 3.9)}, True),         # no estimate before
    ({"eu": levels(3.8, 3.9)}, False),         # it was below already
    ({"eu": levels(3.9, 4.0)}, False),         # at target
    ({"eu": levels(4.2, None)}, False),        # no estimate now
    ({"us": levels(4.2, 1.0)}, False),         # no MOS target
    ({}, False),
])
def test_a_quality_fall_is_reported_once(history, fell):
    found = quality_events.fallen(VCDN, history)
    assert bool(found) is fell
    if fell:
        [(region, data)] = found
        assert region == "eu" and data["mos"] == 3.9 and data["target_mos"] == 4.0
