"""Webhooks end to end: five real service processes (noop driver), receivers as real HTTP
servers on loopback that check each delivery's signature with the secret, retries with
backoff in the delivery log, a dead or hanging receiver that never holds an operation
back, a delivery that survives SO's crash, and reminders at a controlled clock."""
import datetime as dt
import json
import time

import pytest
from click.testing import CliRunner

from cdnaas.cli import main
from cdnaas.common.ports import free_loopback_ports
from cdnaas.common.timeutil import isoformat, parse
from tests.support.api import populate, vcdn_body
from tests.support.certs import TestCA
from tests.support.stack import running_stack
from tests.support.webhooks import Receiver, signed_by

BACKOFF = 0.5  # CDNAAS_WEBHOOK_BACKOFF_SECONDS here: attempts 0.5, 1, 2... s apart
DAY = 86400


@pytest.fixture(scope="module")
def clock_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("clock") / "now"
    path.write_text("")
    return path


@pytest.fixture(scope="module")
def stack(tmp_path_factory, clock_file):
    tmp = tmp_path_factory.mktemp("webhook-stack")
    extra = {"CDNAAS_WEBHOOK_INTERVAL": "0.1", "CDNAAS_WEBHOOK_BACKOFF_SECONDS": str(BACKOFF),
             "CDNAAS_WEBHOOK_ATTEMPTS": "4", "CDNAAS_WEBHOOK_TIMEOUT": "20",
             "CDNAAS_CLOCK_FILE": str(clock_file)}
    with running_stack(None, tmp, extra_env=extra) as running:
        yield populate(running)


def hook(stack, url, events=("operation.ended",), api=None):
    return (api or stack.acme).ok("POST", "/webhooks", 201,
                                  json={"url": url, "events": list(events)})


def deliveries_until(api, webhook_id, done, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        found = api.ok("GET", f"/webhooks/{webhook_id}/deliveries")["deliveries"]
        if done(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_operation_ended_is_pushed_signed_after_a_vcdn_is_created(stack):
    receiver = Receiver()
    try:
        created = hook(stack, receiver.url)
        secret = created["secret"]
        assert secret.startswith("whsec_") and len(secret) > 40
        shown = stack.acme.ok("GET", f"/webhooks/{created['id']}")
        assert shown["secret"] == f"whsec_...{secret[-4:]}"  # never whole again
        assert secret not in json.dumps(stack.acme.ok("GET", "/webhooks"))
        accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body("hooked"))
        vcdn_id = accepted["vcdn"]["id"]
        operation = stack.acme.wait(accepted["operation"]["id"])
        assert operation["state"] == "COMPLETED"
        headers, body, _ = receiver.next()
        assert signed_by(secret, headers, body)
        assert not signed_by(secret, headers, body + b" ")
        event = json.loads(body)
        assert set(event) == {"id", "type", "created_at", "vcdn_id", "data"}
        assert event["type"] == "operation.ended" and event["vcdn_id"] == vcdn_id
        assert event["data"]["operation_id"] == operation["id"]
        assert event["data"]["type"] == "INSTANTIATE" and event["data"]["state"] == "COMPLETED"
        assert headers["CDNaaS-Event-Id"] == event["id"]
        assert headers["CDNaaS-Event-Type"] == "operation.ended"
        assert headers["CDNaaS-Delivery-Attempt"] == "1"
        [delivery] = deliveries_until(stack.acme, created["id"],
                                      lambda d: d and d[0]["state"] == "DELIVERED")
        assert delivery["state"] == "DELIVERED" and delivery["event"] == event
        [attempt] = delivery["log"]
        assert attempt["status_code"] == 200 and attempt["error"] is None
        assert attempt["duration_ms"] > 0 and attempt["next_attempt_at"] is None
        # another tenant sees none of it
        assert stack.globex.call("GET", f"/webhooks/{created['id']}").status_code == 404
        assert stack.globex.call("GET", f"/webhooks/{created['id']}/deliveries").status_code \
            == 404
        assert stack.globex.call("DELETE", f"/webhooks/{created['id']}").status_code == 404
        assert created["id"] not in [w["id"] for w in stack.globex.ok("GET", "/webhooks")["webhooks"]]
        stack.acme.ok("DELETE", f"/webhooks/{created['id']}", 204)
        assert stack.acme.call("GET", f"/webhooks/{created['id']}").status_code == 404
        ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn_id}", 202)
        stack.acme.wait(ended["operation"]["id"])
        time.sleep(1.0)  # ten dispatcher passes: nothing goes to a deleted webhook
        assert receiver.got.empty()
    finally:
        receiver.close()


def test_a_receiver_failing_twice_gets_the_event_on_the_third_attempt(stack):
    receiver = Receiver(answers=(500, 500, 200))
    try:
        created = hook(stack, receiver.url)
        accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body("retried"))
        stack.acme.wait(accepted["operation"]["id"])
        tries = [receiver.next() for _ in range(3)]
        assert len({json.loads(body)["id"] for _, body, _ in tries}) == 1  # one event
        assert [h["CDNaaS-Delivery-Attempt"] for h, _, _ in tries] == ["1", "2", "3"]
        assert all(signed_by(created["secret"], h, body) for h, body, _ in tries)
        gaps = [b[2] - a[2] for a, b in zip(tries, tries[1:])]
        assert gaps[0] >= BACKOFF * 0.9 and gaps[1] >= 2 * BACKOFF * 0.9, gaps
        [delivery] = deliveries_until(stack.acme, created["id"],
                                      lambda d: d and d[0]["state"] == "DELIVERED")
        assert delivery["attempts"] == 3
        log = delivery["log"]
        assert [a["status_code"] for a in log] == [500, 500, 200]
        assert [a["error"] for a in log] == ["HTTP 500", "HTTP 500", None]
        waits = [(parse(a["next_attempt_at"]) - parse(a["at"])).total_seconds()
                 for a in log[:2]]
        assert waits == pytest.approx([BACKOFF, 2 * BACKOFF], abs=0.05)
        assert log[2]["next_attempt_at"] is None
        stack.acme.ok("DELETE", f"/webhooks/{created['id']}", 204)
    finally:
        receiver.close()


def test_a_dead_or_hanging_receiver_never_holds_an_operation_back(stack):
    [dead_port] = free_loopback_ports(1)  # nothing listens there
    hanging = Receiver(answers=("hang",))
    try:
        dead = hook(stack, f"http://127.0.0.1:{dead_port}/gone")
        held = hook(stack, hanging.url)
        accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body("unheard"))
        operation = stack.acme.wait(accepted["operation"]["id"])
        hanging.next()  # the attempt is in flight, held by the receiver...
        assert operation["state"] == "COMPLETED"  # ...and the operation did not wait for it
        ended = stack.acme.ok("DELETE", f"/vcdns/{accepted['vcdn']['id']}", 202)
        assert stack.acme.wait(ended["operation"]["id"])["state"] == "COMPLETED"
        _, second, _ = hanging.next()  # the second event is not held behind the first
        assert json.loads(second)["data"]["type"] == "TERMINATE"
        failed = deliveries_until(stack.acme, dead["id"],
                                  lambda d: len(d) == 2 and all(x["state"] == "FAILED" for x in d))
        for delivery in failed:  # every attempt refused, recorded, then given up
            assert delivery["state"] == "FAILED" and delivery["attempts"] == 4
            assert all(a["status_code"] is None and "Connection" in a["error"]
                       for a in delivery["log"])
        hanging.release()
        held_log = deliveries_until(stack.acme, held["id"],
                                    lambda d: len(d) == 2 and all(x["state"] == "DELIVERED"
                                                                  for x in d))
        assert [d["state"] for d in held_log] == ["DELIVERED", "DELIVERED"]
        for created in (dead, held):
            stack.acme.ok("DELETE", f"/webhooks/{created['id']}", 204)
    finally:
        hanging.close()


def test_an_event_waiting_for_its_receiver_is_sent_after_so_restarts(stack):
    [port] = free_loopback_ports(1)
    created = hook(stack, f"http://127.0.0.1:{port}/later")
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body("durable"))
    stack.acme.wait(accepted["operation"]["id"])
    [pending] = deliveries_until(stack.acme, created["id"], lambda d: d and d[0]["attempts"])
    assert pending["state"] == "PENDING"
    stack.kill("so")
    receiver = Receiver(port=port)
    try:
        stack.restart("so")
        headers, body, _ = receiver.next()
        assert json.loads(body)["id"] == pending["event_id"]  # the same event, after the crash
        assert signed_by(created["secret"], headers, body)
        [delivered] = deliveries_until(stack.acme, created["id"],
                                       lambda d: d[0]["state"] == "DELIVERED")
        assert delivered["attempts"] >= 2 and delivered["log"][-1]["status_code"] == 200
        stack.acme.ok("DELETE", f"/webhooks/{created['id']}", 204)
    finally:
        receiver.close()


@pytest.mark.parametrize("body, field", [
    ({"url": "ftp://hooks.example.com/x", "events": ["operation.ended"]}, "url"),
    ({"url": "https://user:pw@hooks.example.com/x", "events": ["operation.ended"]}, "url"),
    ({"url": "https:///nohost", "events": ["operation.ended"]}, "url"),
    ({"url": "https://hooks.example.com:99999/x", "events": ["operation.ended"]}, "url"),
    ({"url": "https://hooks.example.com/x#frag", "events": ["operation.ended"]}, "url"),
    ({"url": "https://hooks.example.com/a b", "events": ["operation.ended"]}, "url"),
    ({"url": "http://169.254.169.254/latest", "events": ["operation.ended"]}, "url"),
    ({"url": "https://hooks.example.com/x", "events": ["vcdn.exploded"]}, "events[0]"),
    ({"url": "https://hooks.example.com/x", "events": []}, "events"),
    ({"url": "https://hooks.example.com/x"}, "events"),
    ({"url": "https://hooks.example.com/x", "events": ["operation.ended"], "colour": 1},
     "colour"),
    ({"url": "x" * 3000, "events": ["operation.ended"]}, "url"),
])
def test_hostile_webhooks_are_refused_naming_the_field(stack, body, field):
    before = stack.acme.ok("GET", "/webhooks")["webhooks"]
    response = stack.acme.call("POST", "/webhooks", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["field"] == field, response.text
    assert stack.acme.ok("GET", "/webhooks")["webhooks"] == before  # nothing written


def test_certificate_expiring_and_lease_ending_follow_the_clock(stack, clock_file):
    receiver = Receiver()
    start = dt.datetime.now(dt.timezone.utc)
    names = ["shop.hooks-example.com"]
    issued = TestCA().issue(names, not_after=start + dt.timedelta(days=40))
    try:
        created = hook(stack, receiver.url, events=("certificate.expiring", "lease.ending",
                                                    "operation.ended"))
        lease_end = start + dt.timedelta(days=35)
        accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body(
            "reminded", hostnames=names, lease={"end": isoformat(lease_end)},
            certificate={"certificate": issued.chain_pem, "private_key": issued.key_pem}))
        vcdn_id = accepted["vcdn"]["id"]
        [ended] = receiver.events(vcdn_id)
        assert ended["type"] == "operation.ended"

        clock_file.write_text(str(30 * DAY))  # 10 days left: the 14-day reminder only
        [first] = receiver.events(vcdn_id)
        assert first["type"] == "certificate.expiring"
        assert first["data"]["threshold_days"] == 14
        assert first["data"]["days_left"] == pytest.approx(10, abs=0.01)
        assert first["data"]["fingerprint_sha256"] == issued.fingerprint
        assert first["data"]["hostnames"] == names
        time.sleep(1.0)  # ten passes later: not reminded again
        assert receiver.got.empty()

        clock_file.write_text(str(34.5 * DAY))  # 5.5 days left, the lease ends in 12 h
        found = receiver.events(vcdn_id, until=lambda e: len(e) == 2)
        by_type = {e["type"]: e for e in found}
        assert by_type["certificate.expiring"]["data"]["threshold_days"] == 7
        assert by_type["lease.ending"]["data"]["stage"] == "ending"
        assert by_type["lease.ending"]["data"]["lease_end"] == isoformat(lease_end)
        assert by_type["lease.ending"]["data"]["hours_left"] == pytest.approx(12, abs=0.01)

        clock_file.write_text(str(35 * DAY + 60))  # past the lease: the IM ends the vCDN
        found = receiver.events(vcdn_id, timeout=60, until=lambda e: len(e) == 2)
        by_type = {e["type"]: e for e in found}
        assert by_type["lease.ending"]["data"]["stage"] == "ended"
        assert by_type["operation.ended"]["data"]["type"] == "TERMINATE"
        assert by_type["operation.ended"]["data"]["reason"] == "lease expired"
        assert stack.acme.ok("GET", f"/vcdns/{vcdn_id}")["state"] == "DELETED"
        stack.acme.ok("DELETE", f"/webhooks/{created['id']}", 204)
    finally:
        clock_file.write_text("")
        receiver.close()


def test_so_refuses_an_event_for_a_vcdn_it_does_not_know(stack):
    from cdnaas.common.clients import SoClient  # pylint: disable=import-outside-toplevel
    from cdnaas.common.errors import NotFound  # pylint: disable=import-outside-toplevel

    with pytest.raises(NotFound):
        stack.client(SoClient).emit_event("quality.below_target",
                                          "00000000-0000-0000-0000-000000000000", {})



def test_the_cli_creates_lists_shows_the_log_of_and_deletes_a_webhook(stack):
    receiver = Receiver()
    token = stack.acme.token
    # wide enough that the tables never fold a delivery's state over two lines
    env = {**{k: v for k, v in stack.env.items() if v is not None}, "CDNAAS_TOKEN": token,
           "COLUMNS": "200"}

    def cli(*args):
        result = CliRunner().invoke(main.cli, list(args), env=env, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.stdout

    try:
        created = json.loads(cli("--json", "webhook", "create", receiver.url,
                                 "--event", "operation.ended", "--description", "ci"))
        assert created["secret"].startswith("whsec_")
        shown = cli("webhook", "create", receiver.url, "--event", "lease.ending")
        assert "Signing secret (shown only now): whsec_" in shown
        listed = json.loads(cli("--json", "webhook", "list"))
        assert {w["id"] for w in listed} >= {created["id"]}
        assert all(w["secret"].startswith("whsec_...") for w in listed)
        accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body("clied"))
        stack.acme.wait(accepted["operation"]["id"])
        deliveries_until(stack.acme, created["id"],
                         lambda d: d and d[0]["state"] == "DELIVERED")
        log = json.loads(cli("--json", "webhook", "deliveries", created["id"]))
        assert log[0]["state"] == "DELIVERED" and log[0]["log"][0]["status_code"] == 200
        assert "DELIVERED" in cli("webhook", "deliveries", created["id"])
        for found in listed:
            cli("webhook", "delete", found["id"])
        assert json.loads(cli("--json", "webhook", "list")) == []
    finally:
        receiver.close()


def test_ended_deliveries_are_forgotten_after_their_retention(database_url, monkeypatch,
                                                              tmp_path):
    from cdnaas.db import migrate  # pylint: disable=import-outside-toplevel
    from cdnaas.db.engine import Database  # pylint: disable=import-outside-toplevel
    from cdnaas.so import webhooks  # pylint: disable=import-outside-toplevel
    from cdnaas.so.models import (  # pylint: disable=import-outside-toplevel
        Webhook, WebhookAttempt, WebhookDelivery)

    monkeypatch.setenv("CDNAAS_WEBHOOK_KEY_FILE", str(tmp_path / "webhooks.key"))
    monkeypatch.setenv("CDNAAS_ORIGIN_ALLOW", "hooks.example.com")
    migrate.upgrade("so", database_url)
    database = Database(database_url)
    now = dt.datetime.now(dt.timezone.utc)
    try:
        with database.transaction() as session:
            created = webhooks.create(session, "acme", {"url": "https://hooks.example.com/x",
                                                        "events": ["operation.ended"]})
        with database.transaction() as session:
            for name, state, days in (("old-done", "DELIVERED", 31), ("old-failed", "FAILED", 40),
                                      ("old-pending", "PENDING", 40), ("new-done", "DELIVERED", 2)):
                session.add(WebhookDelivery(id=name, webhook_id=created["id"], event_id=name,
                                            type="operation.ended", body={}, state=state,
                                            attempts=1, created_at=now - dt.timedelta(days=days)))
                session.flush()
                session.add(WebhookAttempt(delivery_id=name, number=1, at=now, duration_ms=1.0))
        assert webhooks.purge(database, now) == 2
        with database.sessions() as session:
            kept = {d.id for d in session.query(WebhookDelivery)}
            assert kept == {"old-pending", "new-done"}  # a pending one is never dropped
            assert {a.delivery_id for a in session.query(WebhookAttempt)} == kept
        with database.transaction() as session:
            webhooks.delete(session, created["id"], "acme")
        with database.sessions() as session:
            assert session.query(Webhook).count() == session.query(WebhookAttempt).count() \
                == session.query(WebhookDelivery).count() == 0
    finally:
        database.dispose()
