"""Regions added to and removed from a live vCDN by the ``openstack`` VIM driver, against the
mini cloud (``tests/openstack/``): the tests that start no process (the unit tier); the
others, and what the module covers, are in tests/system/test_openstack_regions.py."""

import pytest

from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro.vim.base import Deployment, DeploymentFailed, EntryPoint, VnfInstance
from cdnaas.ro.vim.openstack.driver import OpenStackDriver
from tests.unit.test_openstack_driver_units import make_sig

NORTH = {"north": 1}


def test_a_balancer_or_shield_an_update_cannot_make_is_refused_before_anything():
    """A second balancer in a region that stays, or an origin shield: refused before the
    driver asks the cloud anything (the recorded deployment is a stand-in)."""
    north = make_sig(NORTH)
    deployment = Deployment(
        north.vcdn_id, "openstack",
        [VnfInstance(v.name, v.role, v.region, v.host, "10.200.0.9", "unused", v.vcpus)
         for v in north.vnfs], EntryPoint(north.hostname, []), {},
        {"regions": {"north": {}}, "servers": {}})
    document = north.to_dict()
    document["vnfs"].append({**next(v for v in document["vnfs"] if v["role"] ==
                                    "load_balancer"), "name": "north-lb-2"})
    with pytest.raises(DeploymentFailed, match=r"north-lb-2 \(load_balancer\) cannot be "
                                               "added by an update; nothing was changed"):
        OpenStackDriver().update(deployment, ServiceInstanceGraph.from_dict(document),
                                 previous=north)
    document["vnfs"][-1].update(name="shield-0", role="shield")
    with pytest.raises(DeploymentFailed, match="origin shield"):
        OpenStackDriver().update(deployment, ServiceInstanceGraph.from_dict(document),
                                 previous=north)
