"""The same lifecycle against every installed VIM driver, so none drifts from the others.

Each driver is loaded by its entry-point name. A driver whose prerequisites
are missing says so through ``check_prerequisites()`` (raising PrerequisitesMissing), and only then
is it skipped. Failure injection is per driver: a fixture named
``fail_host_<driver>`` returns ``fail(host)``, after which creating a VNF on
``host`` fails; a driver without one skips the failure test.
"""
import json
import uuid

import pytest

from cdnaas.common import plugins
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro.vim.base import Deployment, DeploymentFailed, PrerequisitesMissing
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
    return lambda host: monkeypatch.setenv("CDNAAS_NOOP_FAIL_HOSTS", host)


@pytest.fixture
def built(driver):
    """List to append deployments to; whatever a failed test left is terminated."""
    deployments = []
    yield deployments
    for deployment in deployments:
        driver.terminate(deployment)


def new_sig(caches=None):
    return ServiceInstanceGraph.from_dict(sample_sig(f"contract-{uuid.uuid4().hex[:8]}", caches))


def assert_matches(deployment, sig):
    assert deployment.deployment_id == sig.vcdn_id
    assert sorted((v.name, v.role, v.region) for v in deployment.vnfs) == \
        sorted((v.name, v.role, v.region) for v in sig.vnfs)
    addresses = [v.address for v in deployment.vnfs]
    assert len(set(addresses)) == len(addresses), "every VNF has its own address"
    assert deployment.entry_point.hostname == sig.hostname
    assert deployment.entry_point.dns_servers
    assert set(deployment.region_endpoints) == {r.name for r in sig.regions}


def assert_healthy(driver, deployment):
    checks = driver.health(deployment)
    assert sorted(c.name for c in checks) == sorted(v.name for v in deployment.vnfs)
    assert all(c.healthy for c in checks), [c for c in checks if not c.healthy]


def test_lifecycle(driver, built):
    sig = new_sig({"north": 2, "south": 2})
    reports = []
    deployment = driver.deploy(sig, lambda *report: reports.append(report))
    built.append(deployment)
    assert_matches(deployment, sig)
    assert reports and all(0 < done <= total for _step, done, total in reports)
    assert_healthy(driver, deployment)

    bigger = ServiceInstanceGraph.from_dict(
        sample_sig(sig.vcdn_id, {"north": 3, "south": 1}))
    updated = driver.update(deployment, bigger)
    built.append(updated)
    assert_matches(updated, bigger)
    before = {v.name: v for v in deployment.vnfs}
    for vnf in updated.vnfs:
        if vnf.name in before:  # VNFs that stay are not replaced
            assert (vnf.resource_id, vnf.address) == (before[vnf.name].resource_id,
                                                      before[vnf.name].address)
    assert_healthy(driver, updated)

    driver.terminate(updated)
    driver.terminate(updated)  # removing what is gone is success
    assert sig.vcdn_id not in driver.cleanup(set())


def test_failed_deploy_leaves_nothing(driver, built, fail_host):
    sig = new_sig({"north": 2, "south": 2})
    fail_host("south-host-2")  # the last cache: caches before it were created
    with pytest.raises(DeploymentFailed):
        built.append(driver.deploy(sig))
    assert sig.vcdn_id not in driver.cleanup(set())


def test_failed_update_keeps_the_old_deployment(driver, built, fail_host):
    sig = new_sig({"north": 2, "south": 2})
    deployment = driver.deploy(sig)
    built.append(deployment)
    fail_host("north-host-3")
    grown = ServiceInstanceGraph.from_dict(
        sample_sig(sig.vcdn_id, {"north": 3, "south": 2}, cache_hosts=3))
    with pytest.raises(DeploymentFailed):
        built.append(driver.update(deployment, grown))
    assert_healthy(driver, deployment)
    driver.terminate(deployment)
    assert sig.vcdn_id not in driver.cleanup(set()), "the failed update left a VNF behind"


def test_record_round_trips_and_terminates(driver, built):
    sig = new_sig({"north": 1, "south": 1})
    deployment = driver.deploy(sig)
    built.append(deployment)
    rebuilt = Deployment.from_dict(json.loads(json.dumps(deployment.to_dict())))
    assert rebuilt == deployment
    driver.terminate(rebuilt)
    assert sig.vcdn_id not in driver.cleanup(set())
