"""The SO's operation runner against an RO that goes down and comes back (unit tests on
SQLite, an RO in memory): operations stay PROCESSING with their capacity reserved while
RO is unreachable, 4xx answers are permanent, capacity is released only once RO says
nothing runs, and a resumed operation converges from whatever RO reports."""
import datetime as dt
import threading
import time

import pytest
from sqlalchemy import select

from cdnaas.common import answers, errors
from cdnaas.common.sig import ServiceInstanceGraph, digest
from cdnaas.db import migrate
from cdnaas.db.engine import Database
from cdnaas.so import capacity, operations, states
from cdnaas.so.instances import new_operation
from cdnaas.so.models import Host, Instance, Operation, Region, Reservation
from tests.support.sigs import sample_sig

START = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
END = START + dt.timedelta(days=1)


class FakeRo:
    """An RO in memory whose work completes at once; unreachable while ``down`` is set.

    While ``working`` is set, GETs answer DEPLOYING (an RO still at work); ``refuse`` is
    an error every PUT raises.
    """

    def __init__(self):
        self.down = threading.Event()
        self.deployments = {}
        self.calls = []
        self.working = threading.Event()
        self.refuse = None

    def __call__(self):  # the runner's client factory
        return self

    def _reach(self, call):
        self.calls.append(call)
        if self.down.is_set():
            raise errors.UpstreamError("ro is unreachable: connection refused")

    def deploy(self, deployment_id, sig):
        self._reach("deploy")
        if self.refuse:
            raise self.refuse
        self.deployments[deployment_id] = {
            "id": deployment_id, "driver": "fake", "status": "ACTIVE", "steps": [],
            "error": None, "last_error": None,
            "vnfs": [{**{k: v[k] for k in ("name", "role", "region", "host", "vcpus")},
                      "address": "198.18.0.10"} for v in sig["vnfs"]],
            "sig_digest": digest(sig),
            "entry_point": {"hostname": sig["hostname"], "dns_servers": ["198.18.0.53"]},
            "region_endpoints": {}}
        return answers.from_json(answers.Deployment, self.deployments[deployment_id])

    def get_deployment(self, deployment_id, wait=0.0):
        self._reach("get")
        if deployment_id not in self.deployments:
            raise errors.NotFound(f"no deployment {deployment_id}")
        if self.working.is_set():
            time.sleep(min(wait, 0.02))  # a long poll
            return answers.from_json(answers.Deployment,
                                     {**self.deployments[deployment_id], "status": "DEPLOYING"})
        return answers.from_json(answers.Deployment, self.deployments[deployment_id])

    def undeploy(self, deployment_id):
        self._reach("undeploy")
        if deployment_id not in self.deployments:
            raise errors.NotFound(f"no deployment {deployment_id}")
        self.deployments[deployment_id].update(status="DELETED", vnfs=[])
        return answers.from_json(answers.Deployment, self.deployments[deployment_id])


@pytest.fixture
def database(tmp_path):
    url = f"sqlite:///{tmp_path / 'so.db'}"
    migrate.upgrade("so", url)
    database = Database(url)
    with database.transaction() as session:
        for region in ("north", "south"):
            session.add(Region(name=region, client_prefixes=[]))
            session.flush()
            for index in (1, 2, 3):
                session.add(Host(name=f"{region}-host-{index}", region_name=region, vcpus=16,
                                 ram_mb=65536))
    yield database
    database.dispose()


@pytest.fixture
def ro():
    return FakeRo()


@pytest.fixture
def runner(database, ro, monkeypatch):
    monkeypatch.setenv("CDNAAS_DEPLOY_TIMEOUT", "20")
    runner = operations.OperationRunner(database, ro_client=ro)
    yield runner
    runner.shutdown()


def add_instance(database, kind, sig, state, previous=None):
    """An instance and its ``kind`` operation as the SO's request handlers write them."""
    with database.transaction() as session:
        session.add(Instance(id=sig["vcdn_id"], tenant="acme", name=sig["vcdn_id"],
                             flavor="static", template_version=1, origin="http://o:80",
                             regions=[], lease_start=START, lease_end=END, state=state, sig=sig))
        session.flush()
        capacity.reserve(session, sig["vcdn_id"], ServiceInstanceGraph.from_dict(sig), START, END,
                         also=ServiceInstanceGraph.from_dict(previous) if previous else None)
        operation = new_operation(sig["vcdn_id"], kind, previous_sig=previous)
        session.add(operation)
        return operation.id


def reserved(database, instance_id):
    with database.sessions() as session:
        rows = session.scalars(select(Reservation).where(Reservation.instance_id == instance_id))
        return {r.host_name: r.vcpus for r in rows}


def per_host(sig):
    hosts = {}
    for vnf in sig["vnfs"]:
        hosts[vnf["host"]] = hosts.get(vnf["host"], 0) + vnf["vcpus"]
    return hosts


def operation_of(database, operation_id):
    with database.sessions() as session:
        operation = session.get(Operation, operation_id)
        instance = session.get(Instance, operation.instance_id)
        return operation.state, operation.error, instance.state


def wait_ended(database, operation_id, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = operation_of(database, operation_id)
        if state[0] in states.TERMINAL:
            return state
        time.sleep(0.05)
    raise AssertionError(f"operation still {state}")


def outage(ro, database, operation_id, instance_id, expected, seconds=1.2):
    """Keep RO down ``seconds``: the operation stays PROCESSING with ``expected`` reserved."""
    ro.down.set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert operation_of(database, operation_id)[0] in states.OPEN
        assert reserved(database, instance_id) == expected
        time.sleep(0.1)
    ro.down.clear()


def test_instantiate_waits_for_an_unreachable_ro_with_its_capacity_reserved(database, ro, runner):
    sig = sample_sig("v1")
    operation_id = add_instance(database, states.INSTANTIATE, sig, states.DEPLOYING)
    ro.down.set()
    runner.submit(operation_id)
    outage(ro, database, operation_id, "v1", per_host(sig))
    assert wait_ended(database, operation_id) == ("COMPLETED", None, "ACTIVE")
    assert reserved(database, "v1") == per_host(sig)
    retries = ro.calls.count("deploy")
    assert 3 <= retries <= 6, f"backoff from 0.2 s doubling: {retries} tries in 1.2 s"


def test_ro_dying_while_followed_keeps_the_operation_processing(database, ro, runner):
    sig = sample_sig("v2")
    operation_id = add_instance(database, states.INSTANTIATE, sig, states.DEPLOYING)
    ro.working.set()
    runner.submit(operation_id)
    deadline = time.monotonic() + 10
    while ro.calls.count("get") < 1:  # SO follows the deployment (a busy machine: seconds)
        assert time.monotonic() < deadline, ro.calls
        time.sleep(0.05)
    ro.down.set()  # before it ends its work: the outage starts while RO deploys
    ro.working.clear()
    outage(ro, database, operation_id, "v2", per_host(sig))
    assert wait_ended(database, operation_id)[0] == "COMPLETED"


def test_terminate_releases_only_once_ro_says_nothing_runs(database, ro, runner):
    sig = sample_sig("v3")
    ro.deploy("v3", sig)
    operation_id = add_instance(database, states.TERMINATE, sig, states.DELETING)
    ro.down.set()
    runner.submit(operation_id)
    outage(ro, database, operation_id, "v3", per_host(sig))
    assert wait_ended(database, operation_id) == ("COMPLETED", None, "DELETED")
    assert reserved(database, "v3") == {}
    assert ro.deployments["v3"]["status"] == "DELETED"


def test_an_ro_down_past_the_timeout_fails_the_operation_but_keeps_the_capacity(
        database, ro, runner, monkeypatch):
    monkeypatch.setenv("CDNAAS_DEPLOY_TIMEOUT", "0.5")
    sig = sample_sig("v4")
    operation_id = add_instance(database, states.INSTANTIATE, sig, states.DEPLOYING)
    ro.down.set()
    runner.submit(operation_id)
    state, error, instance_state = wait_ended(database, operation_id)
    assert (state, instance_state) == ("FAILED", "FAILED") and "stays reserved" in error
    assert reserved(database, "v4") == per_host(sig), "what runs is unknown: nothing released"


def test_a_4xx_from_ro_is_permanent_and_rolls_back(database, ro, runner):
    sig = sample_sig("v5")
    operation_id = add_instance(database, states.INSTANTIATE, sig, states.DEPLOYING)
    ro.refuse = errors.BadRequest("invalid SIG: sig.vnfs.0.role")
    runner.submit(operation_id)
    state, error, instance_state = wait_ended(database, operation_id)
    assert (state, instance_state) == ("ROLLED_BACK", "FAILED") and "sig.vnfs.0.role" in error
    assert ro.calls.count("deploy") == 1, "a 4xx is not retried"
    assert reserved(database, "v5") == {}


def resumed(database, operation_id, step):
    """Mark ``step`` PROCESSING, as an SO killed in the middle of it left it."""
    with database.transaction() as session:
        operation = session.get(Operation, operation_id)
        operation.state = "PROCESSING"
        operation.steps = [dict(s, state="PROCESSING") if s["name"] == step else s
                           for s in operation.steps]


def test_a_resumed_instantiate_takes_what_ro_already_runs(database, ro, runner):
    sig = sample_sig("v6")
    operation_id = add_instance(database, states.INSTANTIATE, sig, states.DEPLOYING)
    ro.deploy("v6", sig)
    resumed(database, operation_id, states.DEPLOY)
    ro.calls.clear()
    runner.recover()
    assert wait_ended(database, operation_id) == ("COMPLETED", None, "ACTIVE")
    assert "deploy" not in ro.calls


def test_a_resumed_instantiate_that_ro_undid_rolls_back(database, ro, runner):
    sig = sample_sig("v7")
    operation_id = add_instance(database, states.INSTANTIATE, sig, states.DEPLOYING)
    ro.deploy("v7", sig)
    ro.deployments["v7"].update(status="ERROR", vnfs=[], error="the deploy was interrupted")
    resumed(database, operation_id, states.DEPLOY)
    runner.recover()
    state, error, _ = wait_ended(database, operation_id)
    assert state == "ROLLED_BACK" and "interrupted" in error
    assert reserved(database, "v7") == {}


def test_a_resumed_update_that_ro_undid_keeps_the_previous_vcdn(database, ro, runner):
    previous = sample_sig("v8")
    grown = sample_sig("v8", {"north": 3, "south": 2}, cache_hosts=3)
    ro.deploy("v8", previous)
    ro.deployments["v8"]["last_error"] = "the update was interrupted by a restart and undone"
    operation_id = add_instance(database, states.UPDATE, grown, states.UPDATING, previous)
    assert reserved(database, "v8") == per_host(grown)
    resumed(database, operation_id, states.APPLY)
    runner.recover()
    state, error, instance_state = wait_ended(database, operation_id)
    assert (state, instance_state) == ("ROLLED_BACK", "ACTIVE") and "undone" in error
    assert reserved(database, "v8") == per_host(previous)
    with database.sessions() as session:
        assert session.get(Instance, "v8").sig == previous


def test_a_resumed_update_with_the_same_vnf_names_is_sent_again(database, ro, runner):
    """SO killed after marking the step and before sending the SIG: RO still serves the
    previous SIG under the same VNF names (a change of demand): the SIG is sent, not
    taken as done."""
    previous = sample_sig("v12")
    changed = sample_sig("v12")
    changed["regions"][0]["demand"] += 1000
    ro.deploy("v12", previous)
    operation_id = add_instance(database, states.UPDATE, changed, states.UPDATING, previous)
    resumed(database, operation_id, states.APPLY)
    ro.calls.clear()
    runner.recover()
    assert wait_ended(database, operation_id) == ("COMPLETED", None, "ACTIVE")
    assert ro.calls.count("deploy") == 1
    assert ro.deployments["v12"]["sig_digest"] == digest(changed)


def test_an_update_reserves_both_sigs_until_it_ends(database, ro, runner):
    previous = sample_sig("v9", {"north": 3, "south": 2}, cache_hosts=3)
    smaller = sample_sig("v9", {"north": 1, "south": 2})
    ro.deploy("v9", previous)
    operation_id = add_instance(database, states.UPDATE, smaller, states.UPDATING, previous)
    assert reserved(database, "v9") == per_host(previous), "caches being drained still run"
    runner.submit(operation_id)
    assert wait_ended(database, operation_id)[0] == "COMPLETED"
    assert reserved(database, "v9") == per_host(smaller)


def test_a_resumed_terminate_of_a_deleted_deployment_completes(database, ro, runner):
    sig = sample_sig("v10")
    ro.deploy("v10", sig)
    ro.undeploy("v10")
    operation_id = add_instance(database, states.TERMINATE, sig, states.DELETING)
    resumed(database, operation_id, states.UNDEPLOY)
    runner.recover()
    assert wait_ended(database, operation_id) == ("COMPLETED", None, "DELETED")
    assert reserved(database, "v10") == {}
