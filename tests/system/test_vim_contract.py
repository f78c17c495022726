"""The same lifecycle against every installed VIM driver, so none drifts from the others.

Each driver is loaded by its entry-point name. A driver whose prerequisites
are missing says so through ``check_prerequisites()`` (raising PrerequisitesMissing), and only then
is it skipped. Failure injection is per driver: a fixture named
``fail_host_<driver>`` returns ``fail(host)``, after which creating a VNF on
``host`` fails; a driver without one skips the failure test.
"""
import json
import time
import types
import uuid

import pytest

from cdnaas.common import plugins
from cdnaas.origin.server import serve_in_thread
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro import traffic
from cdnaas.ro.vim import steps
from cdnaas.ro.vim.base import (Deployment, DeploymentFailed, LoadTest,
                                PrerequisitesMissing, VimError)
from tests.support.faults import local_host_fails
from tests.support.sigs import sample_sig


@pytest.fixture(params=plugins.names(plugins.VIM_DRIVERS))
def driver_name(request):
    return request.param


@pytest.fixture
def driver(driver_name):
    """The driver, skipped only when it reports missing prerequisites itself."""
    driver = plugins.load(plugins.VIM_DRIVERS, driver_name)
    try:
        driver.check_prerequisites()
    except PrerequisitesMissing as exc:  # the driver's own words on what is missing
        pytest.skip(f"VIM driver {driver_name} cannot run here: {exc}")
    return driver


@pytest.fixture
def fail_host(request, driver_name):
    """``fail(host)`` for the driver under test (fixture ``fail_host_<driver>``)."""
    try:
        return request.getfixturevalue(f"fail_host_{driver_name}")
    except pytest.FixtureLookupError:
        pytest.skip(f"no failure injection (fixture fail_host_{driver_name}) for {driver_name}")


@pytest.fixture
def fail_host_noop(monkeypatch):
    return lambda host: monkeypatch.setenv("CDNAAS_TEST_NOOP_FAIL_HOSTS", host)


@pytest.fixture
def fail_host_local(monkeypatch):
    """Its VNFs on ``host`` fail to start: the host maps to a CPU this machine lacks."""
    return lambda host: monkeypatch.setenv("CDNAAS_LOCAL_HOST_CPUS", local_host_fails(host))


@pytest.fixture
def origin_local(monkeypatch, tmp_path):
    """A sample origin on this machine, and a state dir of the test's own: the driver
    stamps its VNFs with an owner derived from it, so ``cleanup(set())`` here never
    touches another stack's VNFs."""
    monkeypatch.setenv("CDNAAS_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("CDNAAS_ORIGIN_ALLOW", "127.0.0.1")  # the origin policy refuses loopback
    server, _thread = serve_in_thread("0.0.0.0", 0)
    yield {"scheme": "http", "host": "127.0.0.1", "port": server.server_address[1]}
    server.shutdown()
    server.server_close()


@pytest.fixture
def make_traffic(request, driver_name):
    """The viewers of the log test (fixture ``traffic_<driver>``): ``serve(deployment)``
    runs what logs where the VIM runs no guest, ``make(deployment)`` sends a few viewer
    requests to each logging VNF, then none; a driver without one skips the log test."""
    try:
        return request.getfixturevalue(f"traffic_{driver_name}")
    except pytest.FixtureLookupError:
        pytest.skip(f"no traffic generator (fixture traffic_{driver_name}) for {driver_name}")


@pytest.fixture
def traffic_noop(monkeypatch, tmp_path, driver):
    """Viewers in the load file for a moment (the counters advance as they are read)."""
    load = tmp_path / "load.json"
    monkeypatch.setenv("CDNAAS_TEST_NOOP_LOAD_FILE", str(load))

    def make(deployment):
        regions = {v.region: 1000 for v in deployment.vnfs}
        load.write_text(json.dumps({deployment.deployment_id: regions}))
        driver.metrics(deployment)
        time.sleep(0.2)
        driver.metrics(deployment)
        load.write_text("{}")
    return types.SimpleNamespace(serve=_runs_its_own, make=make)


@pytest.fixture
def traffic_local():
    """Three fetches from a client of each region through its balancer (curl)."""
    from cdnaas.ro.vim.local import clients  # pylint: disable=import-outside-toplevel

    def make(deployment):
        for index, (region, balancer) in enumerate(sorted(deployment.region_endpoints.items())):
            with clients.client(deployment.deployment_id, region,
                                f"10.{index + 1}.0.77") as viewer:
                for _ in range(3):
                    assert viewer.fetch(f"http://{balancer}/objects/small")[0] == 200
    return types.SimpleNamespace(serve=_runs_its_own, make=make)


def _runs_its_own(deployment):
    """A driver whose deployments run their logging VNFs themselves."""


@pytest.fixture
def new_sig(request, driver_name):
    """``new_sig(caches, vcdn_id=None, cache_hosts=2)``: a SIG this driver can serve
    (its origin from fixture ``origin_<driver>`` when the driver needs a real one)."""
    try:
        origin = request.getfixturevalue(f"origin_{driver_name}")
    except pytest.FixtureLookupError:
        origin = None

    def make(caches, vcdn_id=None, cache_hosts=2):
        document = sample_sig(vcdn_id or f"contract-{uuid.uuid4().hex[:8]}", caches, cache_hosts)
        if origin:
            document["origin"] = origin
        return ServiceInstanceGraph.from_dict(document)
    return make


@pytest.fixture
def built(driver):
    """List to append deployments to; whatever a failed test left is terminated."""
    deployments = []
    yield deployments
    for deployment in deployments:
        driver.terminate(deployment)


def assert_matches(deployment, sig):
    assert deployment.deployment_id == sig.vcdn_id
    assert sorted((v.name, v.role, v.region) for v in deployment.vnfs) == \
        sorted((v.name, v.role, v.region) for v in sig.vnfs)
    addresses = [v.address for v in deployment.vnfs]
    assert len(set(addresses)) == len(addresses), "every VNF has its own address"
    assert deployment.entry_point.hostname == sig.hostname
    assert deployment.entry_point.dns_servers
    assert set(deployment.region_endpoints) == {r.name for r in sig.regions}


#: every step name a driver may report (:mod:`cdnaas.ro.vim.steps`)
STEP_NAMES = {value for name, value in vars(steps).items() if name.isupper()}


def assert_reported(reports):
    """Reports of a driver's flow: each under a step name of :mod:`cdnaas.ro.vim.steps`
    (which SO shows as it is), never past its total, and each step ends complete."""
    assert reports
    assert {step for step, _done, _total in reports} <= STEP_NAMES, reports
    assert all(0 <= done <= total for _step, done, total in reports)
    last = {step: (done, total) for step, done, total in reports}
    assert all(done == total for done, total in last.values()), "every step ends complete"


def assert_healthy(driver, deployment):
    checks = driver.health(deployment)
    assert sorted(c.name for c in checks) == sorted(v.name for v in deployment.vnfs)
    assert all(c.healthy for c in checks), [c for c in checks if not c.healthy]


def assert_measured(driver, deployment):
    """One reading per VNF, in the deployment's order, no counter below zero."""
    figures = driver.metrics(deployment)
    assert [(m.name, m.role, m.region) for m in figures] == \
        [(v.name, v.role, v.region) for v in deployment.vnfs]
    for m in figures:
        assert m.read_at > 0
        assert all(value is None or value >= 0
                   for value in (m.active_connections, m.requests, m.cpu_seconds)), m


def test_lifecycle(driver, built, new_sig):
    sig = new_sig({"north": 2, "south": 2})
    reports = []
    deployment = driver.deploy(sig, lambda *report: reports.append(report))
    built.append(deployment)
    assert_matches(deployment, sig)
    assert_reported(reports)
    assert_healthy(driver, deployment)

    bigger = new_sig({"north": 3, "south": 1}, sig.vcdn_id)
    reports = []
    updated = driver.update(deployment, bigger, lambda *report: reports.append(report),
                            previous=sig)
    built.append(updated)
    assert_reported(reports)
    assert_matches(updated, bigger)
    before = {v.name: v for v in deployment.vnfs}
    for vnf in updated.vnfs:
        if vnf.name in before:  # VNFs that stay are not replaced
            assert (vnf.resource_id, vnf.address) == (before[vnf.name].resource_id,
                                                      before[vnf.name].address)
    assert_healthy(driver, updated)
    assert_measured(driver, updated)

    reports = []
    driver.terminate(updated, lambda *report: reports.append(report))
    assert_reported(reports)
    driver.terminate(updated)  # removing what is gone is success
    assert sig.vcdn_id not in driver.cleanup(set())


def test_failed_deploy_leaves_nothing(driver, built, fail_host, new_sig):
    sig = new_sig({"north": 2, "south": 2})
    fail_host("south-host-2")  # the last cache: caches before it were created
    with pytest.raises(DeploymentFailed):
        built.append(driver.deploy(sig))
    assert sig.vcdn_id not in driver.cleanup(set())


def test_failed_update_keeps_the_old_deployment(driver, built, fail_host, new_sig):
    sig = new_sig({"north": 2, "south": 2})
    deployment = driver.deploy(sig)
    built.append(deployment)
    fail_host("north-host-3")
    grown = new_sig({"north": 3, "south": 2}, sig.vcdn_id, cache_hosts=3)
    with pytest.raises(DeploymentFailed):
        built.append(driver.update(deployment, grown))
    assert_healthy(driver, deployment)
    driver.terminate(deployment)
    assert sig.vcdn_id not in driver.cleanup(set()), "the failed update left a VNF behind"


def test_record_round_trips_and_terminates(driver, built, new_sig):
    sig = new_sig({"north": 1, "south": 1})
    deployment = driver.deploy(sig)
    built.append(deployment)
    rebuilt = Deployment.from_dict(json.loads(json.dumps(deployment.to_dict())))
    assert rebuilt == deployment
    driver.terminate(rebuilt)
    assert sig.vcdn_id not in driver.cleanup(set())


def test_an_interrupted_update_is_undone_by_restore(driver, built, new_sig):
    """What an RO restarted mid-update does: the recorded deployment is brought back."""
    sig = new_sig({"north": 2, "south": 2})
    deployment = driver.deploy(sig)
    built.append(deployment)
    # the update got as far as it could: a cache added in north, one stopped in south
    updated = driver.update(deployment, new_sig({"north": 3, "south": 1}, sig.vcdn_id))
    built.append(updated)
    reports = []
    restored = driver.restore(deployment, sig, lambda *report: reports.append(report))
    built.append(restored)
    assert_reported(reports)
    assert_matches(restored, sig)
    assert [(v.name, v.address) for v in restored.vnfs] == \
        [(v.name, v.address) for v in deployment.vnfs]
    assert_healthy(driver, restored)  # the stopped cache serves again
    added = sorted({v.name for v in updated.vnfs} - {v.name for v in deployment.vnfs})
    if driver.name != "noop":  # noop's health knows nothing of what runs
        assert [c.name for c in driver.health(updated) if not c.healthy] == added
    restored = driver.restore(restored, sig)  # restoring twice is success
    built.append(restored)
    assert_healthy(driver, restored)
    driver.terminate(restored)
    assert sig.vcdn_id not in driver.cleanup(set())


def test_usage_logs_are_read_from_a_position_and_reread_from_an_old_one(
        make_traffic, driver, built, new_sig):
    """Each logging VNF's log (a balancer's; a cache's behind Octavia): every record once
    from the positions a read returned, the same records again from the same positions
    (an answer the reader lost), everything kept from no position."""
    sig = new_sig({"north": 1, "south": 1})
    deployment = driver.deploy(sig)
    built.append(deployment)
    make_traffic.serve(deployment)
    start = driver.read_logs(deployment, {})
    logging = [(v.name, v.region) for v in deployment.vnfs if v.role == driver.logging_role]
    assert [(c.name, c.region) for c in start] == logging
    positions = {c.name: c.position for c in start}
    make_traffic.make(deployment)
    deadline = time.monotonic() + 10  # nginx writes its log every 2 s

    def served(chunk):  # a deploy's check may be logged first, and flushed alone
        return any(r.status == 200 for r in traffic.parse(chunk.data)[0])
    while True:
        new = driver.read_logs(deployment, positions, release=True)
        if all(served(c) for c in new) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for chunk in new:
        records, skipped = traffic.parse(chunk.data)
        assert records and skipped == 0 and not chunk.lost and not chunk.more, chunk
        assert all(r.bytes_sent > r.body_bytes_sent for r in records)  # headers too
        assert any(r.status == 200 for r in records)  # (a deploy's check may come first)
    again = driver.read_logs(deployment, positions)
    assert [c.data for c in again] == [c.data for c in new]
    after = driver.read_logs(deployment, {c.name: c.position for c in new})
    assert [c.data for c in after] == [b""] * len(logging)
    everything = driver.read_logs(deployment, {})
    assert all(whole.data.endswith(chunk.data) for whole, chunk in zip(everything, new))
    driver.terminate(deployment)


def test_a_load_test_reports_what_it_measured_or_says_what_is_missing(driver, built, new_sig):
    """A calibration's measurement: a driver with a load generator drives a cache and
    reports what came back; one without says so with a VimError, never a half answer."""
    sig = new_sig({"north": 1, "south": 1})
    deployment = driver.deploy(sig)
    built.append(deployment)
    cache = next(v.name for v in deployment.vnfs if v.role == "cache")
    test = LoadTest(kind="http", path="/objects/small", connections=10, seconds=1.0)
    try:
        report = driver.load_test(deployment, cache, test)
    except VimError as exc:
        assert driver.name not in ("noop", "local"), f"{driver.name} has a load generator: {exc}"
        assert "load generator" in str(exc)
        return
    assert report.kind == "http" and report.requests > 0 and report.requests_per_second > 0
    assert report.errors == report.non_2xx == 0, report
    assert report.tool and report.generator_cpu_seconds >= 0
    with pytest.raises(VimError):
        driver.load_test(deployment, "no-such-vnf", test)


def test_invalidate_and_prefetch_answer_for_every_cache(driver, built, new_sig):
    """Purges and prefetches reach every cache at once, each answering for itself, in the
    deployment's order, with progress on the caches step. A cache that cannot be reached
    is a result that is not ok, saying why (the mini cloud's servers run no VNF)."""
    sig = new_sig({"north": 2, "south": 1})
    deployment = driver.deploy(sig)
    built.append(deployment)
    caches = [v.name for v in deployment.vnfs if v.role == "cache"]
    reports = []
    fetched = driver.prefetch(deployment, ["/objects/small"], lambda *r: reports.append(r))
    purged = driver.invalidate(deployment, ["/objects/small", "/objects/none"], ["/video/"])
    assert [r.name for r in fetched] == [r.name for r in purged] == caches
    assert reports[-1] == (steps.CACHES, len(caches), len(caches))
    if driver.name in ("noop", "local"):  # their caches answer
        assert all(r.ok and (r.requests, r.done) == (1, 1) for r in fetched), fetched
        assert all(r.ok and r.requests >= 2 and r.seconds >= 0 for r in purged), purged
    assert all(r.ok or r.detail for r in fetched + purged)
    driver.terminate(deployment)
