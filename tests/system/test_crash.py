"""Crash semantics on the local driver: ``kill -9`` of RO, SO or IM inside an INSTANTIATE,
an UPDATE (a region scaled out) or a TERMINATE, then a restart of that service.

Every operation ends COMPLETED or ROLLED_BACK; the SO's reservations cover what runs
(the deployment's namespaces) while the service is down and equal, host by host, what
RO says runs and what runs in reality at the end; nothing of a rolled-back or
terminated vCDN is left (namespaces, CPU groups, bridges). The kill moment is chosen
through RO's progress, with each local step slowed by ``CDNAAS_TEST_LOCAL_STEP_DELAY``.
The IM's passes are switched off (an hour apart) so that it changes nothing on its own:
it takes no part in running an operation, and its crash must not disturb one. Also:
``cdnaas up`` starts only the services of a stack that are down.
"""
import os
import subprocess
import time
from pathlib import Path

import pytest
import requests

from cdnaas.cli import stack as stacks
from cdnaas.common.clients import RoClient
from cdnaas.common import errors
from cdnaas.db.engine import Database
from cdnaas.ro.vim.local import clients
from cdnaas.so import states
from cdnaas.so.models import Instance, Operation
from tests.support.api import populate, vcdn_body
from tests.support.ledger import assert_agreed, assert_covered, so_view
from tests.support.stack import running_stack

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")

STEP_DELAY = 1.0  # seconds each local step waits once its VNF answers (and before a removal)
OUTAGE = 1.0  # seconds a killed service stays down, sampled meanwhile
REGION, CLIENT = "eu-west", "10.1.0.30"
QOE_TEMPLATE = Path(__file__).resolve().parents[2] / "plugins/qoe_video/template.yaml"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("crash")
    extra = {"CDNAAS_VIM_DRIVER": "local", "CDNAAS_TEST_LOCAL_STEP_DELAY": str(STEP_DELAY),
             "CDNAAS_IM_INTERVAL": "3600", "CDNAAS_DEPLOY_TIMEOUT": "120"}
    with running_stack(None, tmp, extra_env=extra) as running:
        populate(running)
        sidr = running.operator.call("POST", "/templates", data=QOE_TEMPLATE.read_bytes(),
                                     headers={"Content-Type": "application/yaml"})
        assert sidr.status_code == 201, sidr.text
        running.so_db = Database(stacks.database_url_of(running.env, "so"))
        running.ro = running.client(RoClient)
        yield running
        running.so_db.dispose()


def assert_serves(stack, vcdn_id):
    vcdn = stack.acme.ok("GET", f"/vcdns/{vcdn_id}")
    entry = vcdn["entry_point"]
    with clients.client(vcdn_id, REGION, CLIENT) as viewer:
        answer = viewer.resolve(entry["dns_servers"][0], entry["hostname"])
        status, _headers, _body = viewer.fetch(f"http://{entry['hostname']}/objects/chunk-low",
                                               resolve=(entry["hostname"], answer[0]))
    assert status == 200
    return vcdn


# -- driving ----------------------------------------------------------------------------------

def operation_state(stack, operation_id):
    with stack.so_db.sessions() as session:
        operation = session.get(Operation, operation_id)
        return operation.state, operation.error


def wait_operation(stack, operation_id, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state, error = operation_state(stack, operation_id)
        if state in states.TERMINAL:
            return state, error
        time.sleep(0.1)
    raise AssertionError(f"operation {operation_id} still {state}")


def wait_in_step(stack, vcdn_id, status, step):
    """Wait until RO works on ``vcdn_id`` (``status``) inside ``step``."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            deployment = stack.ro.get_deployment(vcdn_id)
        except errors.NotFound:
            deployment = None
        if deployment is not None and deployment.status == status and any(
                s["name"] == step and s["state"] == "PROCESSING" for s in deployment.steps):
            return
        time.sleep(0.02)
    raise AssertionError(f"RO never reached {status} / {step}: {deployment}")


def crash_and_restart(stack, service, vcdn_id, operation_id, during=None):
    """kill -9 ``service``, sample the invariants (and ``during()``) while it is down,
    start it again."""
    stack.kill(service)
    deadline = time.monotonic() + OUTAGE
    while time.monotonic() < deadline:
        if service == "ro":
            assert operation_state(stack, operation_id)[0] in states.OPEN
        assert_covered(stack, vcdn_id)
        if during:
            during()
        time.sleep(0.2)
    stack.restart(service)


def create(stack, origin, name):
    body = vcdn_body(name, ((REGION, 1000),), flavor="qoe-video",
                     origin=f"http://127.0.0.1:{origin.server_address[1]}")
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
    return accepted["vcdn"]["id"], accepted["operation"]["id"]


def created(stack, origin, name):
    vcdn_id, operation_id = create(stack, origin, name)
    assert wait_operation(stack, operation_id)[0] == "COMPLETED"
    return vcdn_id


def scale_out(stack, vcdn_id):
    with stack.so_db.sessions() as session:
        sig = session.get(Instance, vcdn_id).sig
    caches = sum(1 for v in sig["vnfs"] if v["role"] == "cache" and v["region"] == REGION)
    answer = requests.post(f"{stack.urls['so']}/so/v1/instances/{vcdn_id}/scale",
                           json={"region": REGION, "caches": caches + 1, "reason": "test"},
                           headers=stack.service_headers(), timeout=30)
    assert answer.status_code == 202, answer.text
    return answer.json()["operation"]["id"]


def delete(stack, vcdn_id):
    return stack.acme.ok("DELETE", f"/vcdns/{vcdn_id}", 202)["operation"]["id"]


# -- the crashes -------------------------------------------------------------------------

@pytest.mark.parametrize("step", ["boot caches", "configure load balancers"])
@pytest.mark.parametrize("service", ["ro", "so", "im"])
def test_a_crash_inside_an_instantiate(stack, origin, service, step):
    vcdn_id, operation_id = create(stack, origin, f"inst-{service}-{step.split()[0]}")
    wait_in_step(stack, vcdn_id, "DEPLOYING", step)
    time.sleep(STEP_DELAY / 2)  # the step's VNFs answer, the step has not ended
    crash_and_restart(stack, service, vcdn_id, operation_id)
    state, error = wait_operation(stack, operation_id)
    deployment = assert_agreed(stack, vcdn_id)
    if service == "ro":  # the restarted RO removed the half-built vCDN; SO released it
        assert state == "ROLLED_BACK" and "interrupted by a restart" in error, error
        assert deployment.vnfs == () and so_view(stack, vcdn_id)[0] == {}
        return
    assert state == "COMPLETED", error
    assert_serves(stack, vcdn_id)
    assert wait_operation(stack, delete(stack, vcdn_id))[0] == "COMPLETED"
    assert assert_agreed(stack, vcdn_id).vnfs == ()


@pytest.mark.parametrize("service", ["ro", "so", "im"])
def test_a_crash_inside_an_update(stack, origin, service):
    vcdn_id = created(stack, origin, f"upd-{service}")
    before = {v.name for v in stack.ro.get_deployment(vcdn_id).vnfs}
    operation_id = scale_out(stack, vcdn_id)
    wait_in_step(stack, vcdn_id, "UPDATING", "boot caches")
    time.sleep(STEP_DELAY / 2)  # the new cache answers, the balancer does not know it yet
    crash_and_restart(stack, service, vcdn_id, operation_id,
                      during=(lambda: assert_serves(stack, vcdn_id)) if service != "so" else None)
    state, error = wait_operation(stack, operation_id)
    deployment = assert_agreed(stack, vcdn_id)
    after = {v.name for v in deployment.vnfs}
    if service == "ro":  # the restarted RO restored the previous vCDN, which kept serving
        assert state == "ROLLED_BACK" and "undone" in error, error
        assert after == before
    else:
        assert state == "COMPLETED", error
        assert len(after) == len(before) + 1
    assert assert_serves(stack, vcdn_id)["state"] == "ACTIVE"
    assert wait_operation(stack, delete(stack, vcdn_id))[0] == "COMPLETED"
    assert assert_agreed(stack, vcdn_id).vnfs == ()


@pytest.mark.parametrize("service", ["ro", "so", "im"])
def test_a_crash_inside_a_terminate(stack, origin, service):
    vcdn_id = created(stack, origin, f"term-{service}")
    operation_id = delete(stack, vcdn_id)
    wait_in_step(stack, vcdn_id, "DELETING", "remove VNFs")
    crash_and_restart(stack, service, vcdn_id, operation_id)
    state, error = wait_operation(stack, operation_id)
    assert state == "COMPLETED", error
    assert assert_agreed(stack, vcdn_id).vnfs == ()
    assert so_view(stack, vcdn_id)[0] == {}


# -- cdnaas up after a crash ------------------------------------------------------------------

def test_up_starts_only_the_services_that_are_down(tmp_path):
    overlay = {**stacks.free_port_env(tmp_path / "state"), "CDNAAS_DATABASE_URL": None,
               "CDNAAS_VIM_DRIVER": "noop", "CDNAAS_TOKEN": None, "CDNAAS_SERVICE_KEY_FILE": None,
               "CDNAAS_CONFIG": str(tmp_path / "config.yaml"), "HOME": str(tmp_path / "home")}
    env = stacks.child_environment(overlay)
    state_dir = env["CDNAAS_STATE_DIR"]

    def cdnaas(*args):
        return subprocess.run(stacks.cli_command(*args), env=env, capture_output=True,
                              text=True, timeout=90, check=False)
    try:
        assert cdnaas("up", "--detach").returncode == 0
        first = stacks.running_pids(state_dir)
        for service in ("ro", "im"):
            os.kill(first[service], 9)
        deadline = time.monotonic() + 10
        while set(stacks.running_pids(state_dir)) != {"api", "so", "sidr"}:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        again = cdnaas("up", "--detach")
        assert again.returncode == 0, again.stderr
        assert "starting only ro, im" in again.stderr
        now = stacks.running_pids(state_dir)
        assert set(now) == set(first)
        assert {s: now[s] for s in ("api", "so", "sidr")} == \
            {s: first[s] for s in ("api", "so", "sidr")}, "the survivors were left alone"
        assert cdnaas("status").returncode == 0
        refused = cdnaas("up", "--detach")
        assert refused.returncode == 1 and "already running" in refused.stderr
    finally:
        stacks.stop_recorded(state_dir, timeout=5)
