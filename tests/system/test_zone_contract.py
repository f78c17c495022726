"""The same contract against every installed zone publisher, so none drifts.

Each publisher ``<name>`` is tested through a fixture ``zone_server_<name>`` returning a
:class:`tests.support.zones.ZoneServer` (the publisher with its settings in force, and
where its zone is served); a publisher without one, or whose fixture skips (its
service cannot run here), is skipped. Where a zone is served, what the publisher says
it published is asked of the authoritative server itself, and while a delegation
changes a query loop checks that the name never stops being delegated.

Its tests that start no process are in tests/unit/test_zone_contract_units.py (the unit
tier)."""
import threading
import time

import pytest

from cdnaas.common import plugins
from cdnaas.ro import zones
from cdnaas.ro.zones.base import NameServer, ZoneRefused
from tests.support.zones import ZoneServer, expected, local_zone_server, referral

#: Keystone and Designate only, each test with projects, regions or zones of its own
pytestmark = pytest.mark.minicloud_services

LABEL = "web.contract"
#: a region change as RO publishes it: dns-0 moved (new glue), dns-1 gone, dns-2 new
BEFORE = [NameServer("dns-0", ("198.18.2.3", "198.18.3.3")), NameServer("dns-1", ("198.18.2.4",))]
AFTER = [NameServer("dns-0", ("198.18.3.3",)), NameServer("dns-2", ("198.18.4.5", "2001:db8::5"))]


@pytest.fixture
def zone_server_noop(monkeypatch):
    monkeypatch.setenv("CDNAAS_DNS_DOMAIN", "cdn.example.net")
    return ZoneServer(zones.load("noop"), None)


@pytest.fixture(scope="module")
def zone_server_local(tmp_path_factory):
    with local_zone_server(tmp_path_factory.mktemp("zone")) as port:
        yield ZoneServer(zones.load("local"), ("127.0.0.1", port))


def _publisher_zone(request):
    """The publisher of ``request.param`` with its zone ready (skipped without its fixture);
    what a test published under the contract's labels is withdrawn after."""
    try:
        server = request.getfixturevalue(f"zone_server_{request.param}")
    except pytest.FixtureLookupError:
        pytest.skip(f"no fixture zone_server_{request.param} for publisher {request.param}")
    server.publisher.ensure_zone()
    yield server
    server.publisher.withdraw(LABEL)
    server.publisher.withdraw("other.contract")


@pytest.fixture(params=plugins.names(zones.GROUP))
def zone(request):
    """Each installed publisher, its zone ready; what the test published is withdrawn after."""
    yield from _publisher_zone(request)


@pytest.fixture(params=[name for name in plugins.names(zones.GROUP) if name in ("noop", "local")])
def refusing_zone(request):
    """The publishers that need no cloud: hostile input is refused by the interface's shared
    checks (``zones.base``) before a publisher acts, so the cloud's (Designate: seconds per
    call) is not asked again for each of twenty refusals."""
    yield from _publisher_zone(request)


def _served(zone, name, wanted):
    """Wait up to the zone's settle time for the server to answer ``wanted`` for ``name``
    (``{ns: addresses}``, or {} for no delegation); the last answer."""
    deadline = time.monotonic() + zone.settle
    while True:
        rcode, servers = referral(zone.address, name)
        if servers == wanted or time.monotonic() >= deadline:
            return rcode, servers
        time.sleep(0.2)


def test_publish_is_served_and_idempotent(zone):
    publisher = zone.publisher
    publisher.ensure_zone()  # twice is fine
    delegation = publisher.publish(LABEL, BEFORE)
    assert delegation.name == f"{LABEL}.{publisher.zone}"
    assert delegation.name_servers == (f"dns-0.{delegation.name}", f"dns-1.{delegation.name}")
    assert publisher.published(LABEL) == delegation
    assert publisher.publish(LABEL, list(reversed(BEFORE))) == delegation
    assert publisher.published(LABEL) == delegation
    if zone.address:
        assert _served(zone, delegation.name, expected(delegation)) \
            == ("NOERROR", expected(delegation))


def test_change_leaves_no_gap(zone):
    """Every answer while the delegation changes delegates the name with addresses; the
    first is the old delegation, and every query sent once the new one is served gets the
    new one (a query's answer counts from when it was sent: a loaded machine may hold the
    asking thread between its answer and its record)."""
    publisher = zone.publisher
    before = publisher.publish(LABEL, BEFORE)
    answers, stop = [], threading.Event()  # (sent at, answer)
    if zone.address:
        _served(zone, before.name, expected(before))

        def ask():  # until stopped: Designate may take tens of seconds to publish
            ends = time.monotonic() + 120
            while not stop.is_set() and len(answers) < 20_000 and time.monotonic() < ends:
                sent = time.monotonic()
                answers.append((sent, referral(zone.address, before.name)[1]))
                time.sleep(0.005)

        asker = threading.Thread(target=ask)
        asker.start()
    try:
        after = publisher.publish(LABEL, AFTER)
        if zone.address:
            assert _served(zone, after.name, expected(after))[1] == expected(after)
            served_at = time.monotonic()
            deadline = served_at + 10
            while time.monotonic() < deadline and sum(t > served_at for t, _a in answers) < 3:
                time.sleep(0.05)  # answers to queries sent after the change too
    finally:
        stop.set()
        if zone.address:
            asker.join()
    assert after.name == before.name
    assert publisher.published(LABEL) == after
    # every answer delegated the name, and every NS name it gave had its addresses
    assert all(a and all(a.values()) for _t, a in answers), \
        [a for _t, a in answers if not a or not all(a.values())][:3]
    if zone.address:
        later = [a for t, a in answers if t > served_at]
        assert answers[0][1] == expected(before)
        assert later and all(a == expected(after) for a in later), later[:3]


def test_withdraw_removes_the_name_and_its_glue(zone):
    publisher = zone.publisher
    kept = publisher.publish("other.contract", BEFORE)
    gone = publisher.publish(LABEL, AFTER)
    publisher.withdraw(LABEL)
    publisher.withdraw(LABEL)  # gone already: success
    assert publisher.published(LABEL) is None
    assert publisher.published("other.contract") == kept
    if zone.address:
        assert _served(zone, gone.name, {})[1] == {}
        for name in gone.name_servers:
            assert _served(zone, name, {})[1] == {}
        assert referral(zone.address, kept.name)[1] == expected(kept)


@pytest.mark.parametrize("label", [
    "", ".", "web.", ".web", "*.acme", "_acme", "we b", "web;acme", "web\nacme", 'we"b',
    "web..acme", "-web", "web-", "x" * 64, ".".join(["a" * 60] * 4), "wéb", "web/acme",
    "web.acme. IN NS evil.example.", None, 42])
def test_hostile_labels_are_refused(refusing_zone, label):
    zone = refusing_zone
    with pytest.raises(ZoneRefused):
        zone.publisher.publish(label, BEFORE)
    with pytest.raises(ZoneRefused):
        zone.publisher.withdraw(label)


@pytest.mark.parametrize("servers", [
    [], [NameServer("dns-0", ("198.18.2.3",)), NameServer("dns-0", ("198.18.2.4",))]])
def test_bad_name_server_sets_are_refused(refusing_zone, servers):
    zone = refusing_zone
    with pytest.raises(ZoneRefused):
        zone.publisher.publish(LABEL, servers)
    assert zone.publisher.published(LABEL) is None
