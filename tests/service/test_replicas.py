"""Two replicas of every service on one PostgreSQL (issue 15, item 4).

Each service runs twice behind one address (a TCP proxy standing for compose's DNS
round robin, or a balancer): in turn for the lifecycle, first-alive for the kills, so
that replica A does the work until it is killed and replica B must take it over. The
noop driver takes ``STEP_DELAY`` s per VNF so that a kill lands inside an operation;
leases last ``LEASE`` s so that takeovers come quickly.

Its tests that start no process are in tests/unit/test_replicas_units.py (the unit tier)."""
import concurrent.futures
import datetime as dt
import json
import re
import socket
import threading
import time

import pytest
import requests
from sqlalchemy import func, select

from cdnaas.common.clients import RoClient
from cdnaas.common.timeutil import aware
from cdnaas.db import leases
from cdnaas.db.engine import Database
from cdnaas.im.models import Action, Sample
from cdnaas.so import operations, states
from cdnaas.so.models import Instance, Operation, Reservation
from tests.support import postgres
from tests.support.api import populate, vcdn_body
from tests.support.sigs import sample_sig
from tests.support.stack import replicated_stack
from tests.support.webhooks import Receiver, signed_by
from tests.system.test_crash import wait_in_step  # the same wait: RO works on it inside that step
from tests.unit.test_so_retry import FakeRo, add_instance, wait_ended
from tests.unit.test_replicas_units import operation, so_tables

STEP_DELAY = 0.4  # seconds the noop driver takes per VNF created or removed
LEASE = 2.0  # seconds a replica's claim lasts unless renewed
INTERVAL = 0.5  # seconds between IM passes
DEMANDS = (("eu-west", 1000), ("us-east", 1000))


@pytest.fixture(scope="module")
def stack(postgres_admin_url, tmp_path_factory):
    clock_file = tmp_path_factory.mktemp("clock") / "now"
    clock_file.write_text("")
    extra = {"CDNAAS_TEST_NOOP_STEP_DELAY": str(STEP_DELAY), "CDNAAS_LEASE_SECONDS": str(LEASE),
             "CDNAAS_IM_INTERVAL": str(INTERVAL), "CDNAAS_DEPLOY_TIMEOUT": "60",
             "CDNAAS_SO_SCHEDULER_INTERVAL": "0.5", "CDNAAS_CLOCK_FILE": str(clock_file)}
    with postgres.fresh_database(postgres_admin_url) as url, \
            replicated_stack(url, tmp_path_factory.mktemp("replicas"), extra_env=extra) as running:
        populate(running)
        for region, host in (("eu-west", "eu-3"), ("us-east", "us-2"), ("us-east", "us-3")):
            running.operator.ok("POST", f"/regions/{region}/hosts", 201,
                                json={"name": host, "vcpus": 32, "ram_mb": 131072})
        running.db = Database(url)
        running.ro = running.client(RoClient)
        running.clock_file = clock_file
        yield running
        running.db.dispose()


def mode(stack, name):
    """Route each service's connections by ``name`` from now on (kept-alive ones too)."""
    for proxy in stack.proxies.values():
        proxy.mode = name
        proxy.reset()


def logs(stack, service):
    """Each replica's log of ``service``."""
    return [replica.log(service) for replica in stack.replicas]


def wait_operation(stack, operation_id, timeout=60):
    """The operation once terminal, read from SO's table (any SO replica may run it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = operation(stack, operation_id)
        if found.state in states.TERMINAL:
            return found
        time.sleep(0.1)
    raise AssertionError(f"operation {operation_id} still {found.state}: {found.steps}")


def create(stack, name, **overrides):
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body(name, DEMANDS, **overrides))
    return accepted["vcdn"]["id"], accepted["operation"]["id"]


def reserved(stack, vcdn_id):
    with stack.db.sessions() as session:
        return session.scalar(select(func.coalesce(func.sum(Reservation.vcpus), 0)).where(
            Reservation.instance_id == vcdn_id))


def finished(stack, operation_id):
    """How many times any SO replica logged ``operation_id``'s end."""
    ending = re.compile(rf"operation {re.escape(operation_id)} (COMPLETED|FAILED|ROLLED_BACK): ")
    return sum(len(ending.findall(log)) for log in logs(stack, "so"))


def pass_times(stack, since):
    """When each IM pass (of any replica) since ``since`` began: host points are written
    once per pass."""
    with stack.db.sessions() as session:
        return sorted(session.scalars(select(Sample.at).where(
            Sample.scope == "host", Sample.at >= since).distinct()))


# -- lifecycle ----------------------------------------------------------------------------------

def test_two_replicas_pass_a_lifecycle_and_run_everything_once(stack):
    mode(stack, "round-robin")
    since = dt.datetime.now(dt.timezone.utc)
    receiver = Receiver()  # both SOs' dispatchers share the outbox: each event sent once
    hook = stack.acme.ok("POST", "/webhooks", 201, json={"url": receiver.url,
                                                         "events": ["operation.ended"]})
    created = [create(stack, f"life-{i}") for i in range(4)]
    operations = [op for _vcdn, op in created]
    for _vcdn, op in created:
        assert wait_operation(stack, op).state == "COMPLETED", operation(stack, op).error
    watched = dt.datetime.now(dt.timezone.utc)
    while len(pass_times(stack, watched)) < 3:  # the IM sees every vCDN ACTIVE
        time.sleep(0.1)
    changes = [stack.acme.ok("PATCH", f"/vcdns/{vcdn}", 202, json={
        "regions": [{"name": "eu-west", "demand": 3000}]})["operation"]["id"]
        for vcdn, _op in created]
    operations += changes
    for op in changes:
        assert wait_operation(stack, op).state == "COMPLETED", operation(stack, op).error
    deletes = [stack.acme.ok("DELETE", f"/vcdns/{vcdn}", 202)["operation"]["id"]
               for vcdn, _op in created]
    operations += deletes
    for op in deletes:
        assert wait_operation(stack, op).state == "COMPLETED"
    for vcdn, _op in created:
        assert stack.ro.get_deployment(vcdn).status == "DELETED"
        assert reserved(stack, vcdn) == 0
    # each operation ran once: one replica logged its end, nobody took one over
    assert all(finished(stack, op) == 1 for op in operations), \
        {op: finished(stack, op) for op in operations}
    assert not any("taking over" in log for log in logs(stack, "so") + logs(stack, "ro"))
    # the replicas share each period's pass: host decisions once a period (by the leader;
    # a pass that overran its period starts the next at once), not once per replica, and
    # one health decision per vCDN (a vCDN observed twice over would record it twice)
    times = pass_times(stack, since)
    assert len(times) >= 4
    span = (times[-1] - times[0]).total_seconds()
    assert len(times) <= span / INTERVAL + 2, (len(times), span)
    with stack.db.sessions() as session:
        for vcdn, _op in created:
            health = session.scalars(select(Action.outcome).where(
                Action.instance_id == vcdn, Action.kind == "health")).all()
            assert health == ["healthy"], (vcdn, health)
    try:
        sent = [receiver.next() for _ in operations]
        time.sleep(1.0)  # a few dispatcher passes more: nothing is sent twice
        assert receiver.got.empty()
        events = [json.loads(body) for _headers, body, _at in sent]
        assert sorted(e["data"]["operation_id"] for e in events) == sorted(operations)
        assert all(signed_by(hook["secret"], headers, body) for headers, body, _at in sent)
    finally:
        receiver.close()
        stack.acme.ok("DELETE", f"/webhooks/{hook['id']}", 204)


def test_only_one_ro_replica_takes_a_deployment(stack):
    """The same PUT to both RO replicas at once: one starts the work, the others are 409."""
    sig = sample_sig("race-1")
    urls = [replica.urls["ro"] for replica in stack.replicas] * 4

    def put(url):
        return requests.put(f"{url}/ro/v1/deployments/race-1", json={"sig": sig}, timeout=30,
                            headers=stack.service_headers()).status_code
    with concurrent.futures.ThreadPoolExecutor(len(urls)) as pool:
        answers = sorted(pool.map(put, urls))
    assert answers == [202] + [409] * (len(urls) - 1)
    deadline = time.monotonic() + 30
    while stack.ro.get_deployment("race-1").status != "ACTIVE":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    stack.ro.undeploy("race-1")


# -- kills --------------------------------------------------------------------------------------

def test_a_killed_so_replica_has_its_operation_taken_over(stack):
    mode(stack, "failover")  # replica A does the work while it lives
    vcdn_id, operation_id = create(stack, "so-kill")
    wait_in_step(stack, vcdn_id, "DEPLOYING", "boot caches")
    first, second = stack.replicas
    port = first.env["CDNAAS_SO_BIND"].rsplit(":", 1)[1]
    assert operation(stack, operation_id).claimed_by.startswith(f"{socket.gethostname()}:{port}#")
    first.kill("so")
    try:
        expires = operation(stack, operation_id).claim_expires  # A can renew it no more
        claimed_by = operation(stack, operation_id).claimed_by
        while (now := operation(stack, operation_id)).claimed_by == claimed_by:
            time.sleep(0.02)
        taken = dt.datetime.now(dt.timezone.utc)
        ended = wait_operation(stack, operation_id)
    finally:
        first.restart("so")
    assert ended.state == "COMPLETED", ended.error
    assert f"taking over operation {operation_id}" in second.log("so")
    assert now.claimed_by is None or not now.claimed_by.startswith(claimed_by.split("#")[0])
    assert taken >= aware(expires) - dt.timedelta(seconds=0.1), \
        "taken before A's lease expired"
    assert finished(stack, operation_id) == 1
    assert wait_operation(stack, stack.acme.ok(
        "DELETE", f"/vcdns/{vcdn_id}", 202)["operation"]["id"]).state == "COMPLETED"


@pytest.mark.parametrize("kind", ["instantiate", "terminate"])
def test_a_killed_ro_replica_has_its_work_finished_by_the_other(stack, kind):
    mode(stack, "failover")
    first, second = stack.replicas
    vcdn_id, operation_id = create(stack, f"ro-kill-{kind}")
    if kind == "terminate":
        assert wait_operation(stack, operation_id).state == "COMPLETED"
        operation_id = stack.acme.ok("DELETE", f"/vcdns/{vcdn_id}", 202)["operation"]["id"]
        wait_in_step(stack, vcdn_id, "DELETING", "remove VNFs")
    else:
        wait_in_step(stack, vcdn_id, "DEPLOYING", "boot caches")
    first.kill("ro")
    try:
        ended = wait_operation(stack, operation_id)
        assert f"deployment {vcdn_id}: taking over from" in second.log("ro")
        deployment = stack.ro.get_deployment(vcdn_id)
    finally:
        first.restart("ro")
    if kind == "terminate":  # B finished removing it
        assert ended.state == "COMPLETED", ended.error
        assert deployment.status == "DELETED"
    else:  # B removed what A half built, as a restarted RO does; SO rolled back
        assert ended.state == "ROLLED_BACK" and "interrupted" in ended.error, ended.error
        assert deployment.vnfs == ()
    assert reserved(stack, vcdn_id) == 0


def test_a_killed_im_leader_hands_the_passes_over(stack):
    mode(stack, "failover")
    first, second = stack.replicas
    assert "now leads im-reconcile" in first.log("im")
    assert "now leads im-reconcile" not in second.log("im")
    now = dt.datetime.now(dt.timezone.utc)
    lease_end = (now + dt.timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    vcdn_id, operation_id = create(stack, "im-kill", lease={"end": lease_end})
    assert wait_operation(stack, operation_id).state == "COMPLETED"
    first.kill("im")
    stack.clock_file.write_text((now + dt.timedelta(hours=2)).isoformat())
    try:
        deadline = time.monotonic() + 30
        while True:
            with stack.db.sessions() as session:
                if session.get(Instance, vcdn_id).state == "DELETED":
                    break
            assert time.monotonic() < deadline, second.log("im")[-3000:]
            time.sleep(0.2)
    finally:
        stack.clock_file.write_text("")
    assert "now leads im-reconcile" in second.log("im")
    with stack.db.sessions() as session:
        ended = session.scalars(select(Action).where(Action.instance_id == vcdn_id,
                                                     Action.kind == "terminate")).all()
    assert len(ended) == 1, [(a.outcome, a.reason) for a in ended]
    first.restart("im")


@pytest.mark.parametrize("service", ["api", "sidr"])
def test_a_killed_front_replica_leaves_its_peer_serving_the_operation(stack, service):
    """API and SIDR keep no work of their own: with replica A killed inside an operation,
    the customer still follows it to its end, and a template is registered, through B."""
    mode(stack, "failover")
    first = stack.replicas[0]
    vcdn_id, operation_id = create(stack, f"{service}-kill")
    wait_in_step(stack, vcdn_id, "DEPLOYING", "boot caches")
    first.kill(service)
    for client in (stack.acme, stack.operator):  # connections kept open to A died with it
        client.session.close()
    try:
        deadline = time.monotonic() + 60
        while (state := stack.acme.ok("GET", f"/operations/{operation_id}")["state"]) \
                not in states.TERMINAL:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert state == "COMPLETED"
        assert stack.acme.ok("GET", f"/vcdns/{vcdn_id}")["state"] == "ACTIVE"
        templates = stack.operator.ok("GET", "/templates")["templates"]
        latest = max((t for t in templates if t["flavor"] == "static"),
                     key=lambda t: t["version"])
        document = {**latest["document"], "version": latest["version"] + 1}
        stack.operator.ok("POST", "/templates", 201, json=document)  # through B alone
    finally:
        first.restart(service)
    assert wait_operation(stack, stack.acme.ok(
        "DELETE", f"/vcdns/{vcdn_id}", 202)["operation"]["id"]).state == "COMPLETED"


# -- two SO runners in one process, on PostgreSQL -----------------------------------------------

@pytest.fixture
def so_database(postgres_admin_url):
    with postgres.fresh_database(postgres_admin_url) as url:
        database = so_tables(url)
        yield database
        database.dispose()


def test_two_runners_start_a_due_lease_and_run_its_operation_once(so_database, monkeypatch):
    """Two SO replicas' schedulers look at a due lease at once: one starts it, and of two
    runners asked to run its operation, one runs it."""
    monkeypatch.setenv("CDNAAS_LEASE_SECONDS", str(LEASE))
    ro = FakeRo()
    runners = [operations.OperationRunner(so_database, ro_client=ro, owner=f"replica-{n}#0")
               for n in range(2)]
    try:
        operation_ids = [add_instance(so_database, states.INSTANTIATE, sample_sig(f"due-{n}"),
                                      states.SCHEDULED) for n in range(6)]
        barrier = threading.Barrier(2)

        def look(runner):
            barrier.wait()
            return runner.start_due(now=dt.datetime(2031, 1, 1, tzinfo=dt.timezone.utc))
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            started = list(pool.map(look, runners))
        assert sorted(started[0] + started[1]) == sorted(f"due-{n}" for n in range(6))
        assert not set(started[0]) & set(started[1])
        for operation_id in operation_ids:
            assert wait_ended(so_database, operation_id)[0] == "COMPLETED"
        assert ro.calls.count("deploy") == 6, "each lease deployed once"
        for runner in runners:  # asked again: an ended operation is not run twice
            for operation_id in operation_ids:
                runner.run(operation_id)
        assert ro.calls.count("deploy") == 6
    finally:
        for runner in runners:
            runner.shutdown()


def test_a_claim_is_taken_over_only_once_its_lease_expired(so_database, monkeypatch):
    monkeypatch.setenv("CDNAAS_LEASE_SECONDS", str(LEASE))
    ro = FakeRo()
    operation_id = add_instance(so_database, states.INSTANTIATE, sample_sig("claimed"),
                                states.DEPLOYING)
    with so_database.transaction() as session:  # a live peer claimed it a moment ago
        claimed = session.get(Operation, operation_id)
        claimed.state, claimed.claimed_by = "PROCESSING", "peer:1#0"
        claimed.claim_expires = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=LEASE)
    runner = operations.OperationRunner(so_database, ro_client=ro, owner="replica:2#0")
    try:
        assert runner.recover() == [] and runner.take_over() == []
        runner.run(operation_id)
        assert "deploy" not in ro.calls, "a live peer's operation is left to it"
        time.sleep(LEASE + 0.2)
        assert runner.take_over() == [operation_id]
        assert wait_ended(so_database, operation_id)[0] == "COMPLETED"
        assert operation(so_database, operation_id).claimed_by is None
    finally:
        runner.shutdown()


def test_a_claim_renewed_before_its_transaction_commits_is_not_lost(so_database, monkeypatch):
    """A runner takes an operation's claim in an open transaction and holds it at once; its
    lease thread may renew meanwhile, seeing the row still unclaimed. That row is not lost
    (it was: the runner then left its own operation PROCESSING for good, 1 in 1,000 in
    benchmarks/control_plane.py); one a peer claimed is."""
    monkeypatch.setenv("CDNAAS_LEASE_SECONDS", str(LEASE))
    operation_id = add_instance(so_database, states.INSTANTIATE, sample_sig("young"),
                                states.DEPLOYING)
    claims = leases.Claims(so_database, Operation, "so", owner="replica:1#0")
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            with so_database.transaction() as session:
                claims.take(session.get(Operation, operation_id, with_for_update=True))
                assert pool.submit(claims.renew).result(timeout=10) == set()
            assert not claims.lost(operation_id)
            assert operation(so_database, operation_id).claimed_by == "replica:1#0"
            with so_database.transaction() as session:  # a peer took it over
                session.get(Operation, operation_id).claimed_by = "peer:2#0"
            assert pool.submit(claims.renew).result(timeout=10) == {operation_id}
            assert claims.lost(operation_id)
    finally:
        claims.stop()
