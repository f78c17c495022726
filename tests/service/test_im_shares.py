"""The IM pass shared by replicas: two replicas on one PostgreSQL split the vCDNs between
them, every vCDN observed each period; a replica that dies has its share taken over once
its lease expired. And RO's readings of many deployments in one call."""
import concurrent.futures
import datetime as dt
import time

import pytest
from sqlalchemy import select

from cdnaas.common import answers
from cdnaas.common.timeutil import aware, utcnow
from cdnaas.db import migrate
from cdnaas.db.engine import Database
from cdnaas.im import shares
from cdnaas.im.models import Sample
from cdnaas.im.models import Share as ShareRow
from cdnaas.im.reconcile import reconcile_once
from cdnaas.ro.vim.noop import NoopDriver
from tests.support import postgres
from tests.support.auth import signed
from tests.support.plant import SimHost
from tests.support.ro import ro_apps
from tests.support.sigs import sample_sig
from tests.service.test_im_reconcile import World

VCDNS = 16
LEASE = 1.0  # seconds a replica's claim on a share lasts unless renewed
HOSTS = [SimHost("eu-1", "eu", 32), SimHost("eu-2", "eu", 32)]


@pytest.fixture
def database(postgres_admin_url):
    """An IM database on PostgreSQL (on SQLite one process holds every share)."""
    with postgres.fresh_database(postgres_admin_url) as url:
        migrate.upgrade("im", url)
        found = Database(url)
        yield found
        found.dispose()


@pytest.fixture
def world(database, monkeypatch):
    """The simulated vCDN and :data:`VCDNS` - 1 twins of it under other ids."""
    monkeypatch.setenv("CDNAAS_LEASE_SECONDS", str(LEASE))
    monkeypatch.setenv("CDNAAS_IM_INTERVAL", "0.1")
    found = World(database, [("eu", 2000)], HOSTS)
    view = found.plant.view
    monkeypatch.setattr(found.plant.so, "instances", lambda state=None, brief=False: answers.many(
        answers.Instance, [{**view(), "id": "vcdn-sim" if n == 0 else f"vcdn-{n}"}
                           for n in range(VCDNS)])
        if state in (None, "ACTIVE") else [])
    return found


@pytest.fixture
def replica(monkeypatch, database):
    """``replica(name)``: the :class:`~cdnaas.im.shares.Shares` of a replica, stopped after."""
    made = []

    def make(name):
        monkeypatch.setenv("CDNAAS_REPLICA_NAME", name)
        made.append(shares.Shares(database))
        return made[-1]
    yield make
    for found in made:
        found.stop()


def period(world, *replicas):
    """One period: each replica's pass over its share; ``[vCDN ids observed]`` of each."""
    world.now += dt.timedelta(seconds=10)
    world.plant.advance(world.now, {"eu": 1500})
    began = [r.begin(leads=index == 0) for index, r in enumerate(replicas)]
    for found, share in zip(replicas, began):
        reconcile_once(world.database, now=world.now, so=world.plant.so, ro=world.plant.ro,
                       sidr=world.plant.sidr, share=share)
        found.end(share, world.now)
    with world.database.sessions() as session:
        seen = session.scalars(select(Sample.vcdn_id).where(
            Sample.scope == "vcdn", Sample.at == world.now)).all()
    return [sorted(v for v in seen if share.covers(v)) for share in began], seen


def test_two_replicas_split_the_vcdns_and_observe_each_every_period(world, replica):
    first, second = replica("im-a"), replica("im-b")
    every = sorted(["vcdn-sim"] + [f"vcdn-{n}" for n in range(1, VCDNS)])
    parts, seen = period(world, first, second)  # A took every share before B came
    assert sorted(seen) == every and parts == [every, []]
    for _ in range(3):  # A gave half back at the end of its pass; B took it
        parts, seen = period(world, first, second)
        assert sorted(seen) == every, "a vCDN went unobserved, or was observed twice"
        assert all(parts) and not set(parts[0]) & set(parts[1])
    assert {len(s) for s in (first.shares_held(), second.shares_held())} == {shares.SHARES // 2}


def test_a_dead_replicas_share_is_taken_over_within_a_lease(world, replica):
    first, second = replica("im-a"), replica("im-b")
    every = sorted(["vcdn-sim"] + [f"vcdn-{n}" for n in range(1, VCDNS)])
    for _ in range(2):
        parts, _seen = period(world, first, second)
    first.stop()  # A dies: its leases and its row are renewed no more
    died = time.monotonic()
    with world.database.sessions() as session:
        expires = min(aware(r.claim_expires) for r in session.scalars(select(ShareRow).where(
            ShareRow.claimed_by == first.owner)))
    parts, seen = period(world, second)  # within the lease: A's half is still A's
    assert parts[0] and len(parts[0]) < VCDNS and len(seen) == len(parts[0])
    while (parts := period(world, second)[0])[0] != every:
        assert time.monotonic() - died < LEASE + 2, parts
        time.sleep(0.05)
    assert utcnow() >= expires, "taken before A's lease expired"
    assert len(second.shares_held()) == shares.SHARES


def test_ro_reads_many_deployments_in_one_call(database_url):
    with ro_apps(database_url) as make:
        client = signed(make(NoopDriver()).test_client())
        for vcdn_id in ("vcdn-1", "vcdn-2"):
            client.put(f"/ro/v1/deployments/{vcdn_id}", json={"sig": sample_sig(vcdn_id)})
        deadline = time.monotonic() + 30
        while any(client.get(f"/ro/v1/deployments/{v}").get_json()["status"] != "ACTIVE"
                  for v in ("vcdn-1", "vcdn-2")):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        answer = client.post("/ro/v1/readings", json={"deployments": [
            {"id": "vcdn-2"}, {"id": "unknown"}, {"id": "vcdn-1", "cursor": None}]})
        assert answer.status_code == 200, answer.get_json()
        found = answer.get_json()["readings"]
        assert [r["id"] for r in found] == ["vcdn-2", "unknown", "vcdn-1"]
        assert found[1]["error"]["status"] == 404
        one = client.get("/ro/v1/deployments/vcdn-1/readings").get_json()
        assert found[2]["health"] == one["health"]
        assert [v["name"] for v in found[2]["metrics"]["vnfs"]] == \
            [v["name"] for v in one["metrics"]["vnfs"]]
        for body in ({"deployments": []}, {"deployments": [{"id": "vcdn-1", "x": 1}]}, {}):
            assert client.post("/ro/v1/readings", json=body).status_code == 400


def test_replicas_beginning_together_keep_their_shares(database, replica):
    """Periods are shared: replicas begin their passes at the same instant. One waits for
    the other's rows rather than skipping them (and finding none of its own)."""
    first, second = replica("im-a"), replica("im-b")
    for found in (first, second):
        found.end(found.begin(leads=False), None)
    first.end(first.begin(leads=False), None)  # A gives back what B takes next
    for _ in range(5):
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            began = list(pool.map(lambda r: r.begin(leads=False), (first, second)))
        assert [len(s.held) for s in began] == [shares.SHARES // 2] * 2
        assert not began[0].held & began[1].held
        for found, share in zip((first, second), began):
            found.end(share, None)
