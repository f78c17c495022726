"""The ``openstack`` VIM driver against a real mini OpenStack (``tests/openstack/``): the tests
that start no process (the unit tier); the others, and what the module covers, are in
tests/system/test_openstack_driver.py."""
import uuid

import pytest

from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro.vim.base import DeploymentFailed, PrerequisitesMissing, VimError
from cdnaas.ro.vim.openstack import cloud, placement, plan
from cdnaas.ro.vim.openstack.driver import OpenStackDriver
from tests.openstack.fixtures import ORIGIN
from tests.support.sigs import sample_sig


def make_sig(caches, vcdn_id=None, cache_hosts=2):
    document = sample_sig(vcdn_id or f"os-{uuid.uuid4().hex[:8]}", caches, cache_hosts)
    document["origin"] = dict(ORIGIN)
    return ServiceInstanceGraph.from_dict(document)


# --- a new origin, cache rules or names: rolling rebuilds ---------------------------------


def test_placement_decisions_without_a_cloud(monkeypatch):
    monkeypatch.setenv("CDNAAS_OS_HOSTS", "north-1=compute-17, north-2 = compute-18")
    assert placement.host_map() == {"north-1": "compute-17", "north-2": "compute-18"}
    assert placement.compute_host("north-1") == "compute-17"
    assert placement.compute_host("south-1") == "south-1"  # the same name
    assert placement.compute_host(None) is None
    assert placement.ways("az", "c1", {}, True) == [
        (placement.HOST, {"host": "c1", "availability_zone": "az"}),
        (placement.FORCED, {"availability_zone": "az:c1"}),
        (placement.ZONE, {"availability_zone": "az"})]
    assert placement.ways("az", "c1", {}, False)[0][0] == placement.FORCED
    assert placement.ways(None, "c1", {placement.HOST: "403"}, True) == [
        (placement.FORCED, {"availability_zone": ":c1"}),
        (placement.ZONE, {"availability_zone": None})]
    assert placement.ways("az", None, {}, True) == [(placement.ZONE, {"availability_zone": "az"})]
    import requests
    from openstack import exceptions

    def error(status, message):
        response = requests.Response()
        response.status_code = status
        return exceptions.HttpException(message=message, details=message, response=response)
    assert placement.refusal(placement.HOST, error(403, "Policy doesn't allow x")) == "cloud"
    assert placement.refusal(placement.HOST, error(403, "Quota exceeded for instances")) is None
    assert placement.refusal(placement.HOST, error(400, "Compute host x could not be found.")) \
        == "host"
    assert placement.refusal(placement.FORCED, error(406, "Version 2.74 is not supported")) \
        == "cloud"
    assert placement.refusal(placement.ZONE, error(403, "Policy doesn't allow x")) is None
    monkeypatch.setenv("CDNAAS_OS_HOSTS", "north-1")
    with pytest.raises(DeploymentFailed, match="CDNAAS_OS_HOSTS"):
        placement.host_map()
    refusals = placement.Refusals()  # the first creation learns alone, then all go at once
    with refusals.asking("cloud-a"):
        refusals.add("cloud-a", placement.HOST, "403")
        refusals.settle("cloud-a")
        with refusals.asking("cloud-a"):  # settled: no wait beside the first
            assert refusals.get("cloud-a") == {placement.HOST: "403"}


def test_a_poll_the_cloud_failed_to_answer_is_polled_again(monkeypatch):
    """A booting server is not given up (and its deployment undone) because one poll met
    a 503 or a closed connection; a real error of the poll, and the deadline, still end it."""
    import requests
    from keystoneauth1 import exceptions as ks_exceptions
    from openstack import exceptions
    monkeypatch.setenv("CDNAAS_OS_POLL_INTERVAL", "0")
    response = requests.Response()
    response.status_code = 503
    answers = iter([exceptions.HttpException(message="busy", response=response),
                    ks_exceptions.ConnectFailure("reset"), False, True])

    def check():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer
    cloud.wait_until(check, "servers ACTIVE", 5)
    assert next(answers, "all used") == "all used"

    def refused():
        raise exceptions.ForbiddenException(message="Policy doesn't allow x")
    with pytest.raises(exceptions.ForbiddenException):
        cloud.wait_until(refused, "servers ACTIVE", 5)

    def down():
        raise ks_exceptions.ConnectFailure("refused")
    with pytest.raises(VimError, match="within 0 s .*does not answer"):
        cloud.wait_until(down, "servers ACTIVE", 0)


def test_no_cloud_configured_is_a_missing_prerequisite(monkeypatch):
    monkeypatch.delenv("OS_CLOUD", raising=False)
    monkeypatch.delenv("CDNAAS_OS_CLOUD", raising=False)
    with pytest.raises(PrerequisitesMissing, match="OS_CLOUD"):
        OpenStackDriver().check_prerequisites()
    monkeypatch.setenv("OS_CLOUD", "nowhere")
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", "/nonexistent/clouds.yaml")
    with pytest.raises(PrerequisitesMissing, match="nowhere"):
        OpenStackDriver().check_prerequisites()


def test_plan_flavors_addresses_and_tags():
    flavors = [("a", "m1.small", 1, 512, 1), ("b", "m1.medium", 2, 1024, 2),
               ("c", "big", 2, 8192, 2), ("d", "m1.large", 4, 4096, 4)]
    assert plan.pick_flavor(flavors, 2, 512)[1] == "m1.medium"
    assert plan.pick_flavor(flavors, 3, 512)[1] == "m1.large"
    assert plan.pick_flavor(flavors, 2, 2048)[1] == "big"
    assert plan.pick_flavor(flavors, 16, 512) is None
    sig = make_sig({"north": 2, "south": 1})
    cidrs = plan.subnets(sig, {"south": "10.200.0.0/24"})
    assert cidrs == {"north": "10.200.1.0/24", "south": "10.200.0.0/24"}
    addresses = plan.addresses(sig, cidrs, {"north-cache-1": "10.200.1.11"})
    assert addresses["north-lb"] == "10.200.1.2" and addresses["dns-1"] == "10.200.1.3"
    assert addresses["north-cache-1"] == "10.200.1.11"
    assert addresses["north-cache-2"] == "10.200.1.10"
    assert plan.vcdn_tag("x" * 64).startswith("cdnaas-vcdn:sha1-")
    assert len(plan.vcdn_tag("x" * 64)) <= 60
    assert plan.vcdn_from_tags(["cdnaas", plan.vcdn_tag("abc")]) == "abc"
