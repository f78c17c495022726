"""An origin shield on OpenStack, against the mini cloud (``tests/openstack/``): the tests that
start no process (the unit tier); the others, and what the module covers, are in
tests/system/test_openstack_shield.py."""

import pytest

from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro.vim.base import Deployment, DeploymentFailed, EntryPoint, VnfInstance
from cdnaas.ro.vim.openstack.driver import OpenStackDriver
from tests.unit.test_openstack_driver_units import make_sig

SHIELD = "shield-0"


def shielded(caches, vcdn_id=None):
    """A SIG of ``caches`` ({region: count}) with an origin shield in its default region."""
    document = make_sig(caches, vcdn_id).to_dict()
    region = document["default_region"]
    document["vnfs"].append({"name": SHIELD, "role": "shield", "region": region,
                             "host": f"{region}-host-2", "vcpus": 1, "ram_mb": 512,
                             "image": "cdnaas-vnf"})
    return ServiceInstanceGraph.from_dict(document)


def test_a_shield_across_openstack_regions_is_refused_before_anything():
    document = shielded({"north": 1, "south": 1}).to_dict()
    document["regions"][1]["vim_region"] = "RegionTwo"
    with pytest.raises(DeploymentFailed, match="OpenStack region.*nothing was created"):
        OpenStackDriver().deploy(ServiceInstanceGraph.from_dict(document))


def test_what_an_update_cannot_do_beside_a_shield_is_refused_before_the_cloud_is_asked():
    """The shield's region goes (the shield would move: refused, saying what to do), the
    regions change without the SIG served, or a new region is in another OpenStack region:
    refused before the driver asks the cloud anything (the deployment is a stand-in)."""
    both = shielded({"north": 1, "south": 1})
    deployment = Deployment(
        both.vcdn_id, "openstack",
        [VnfInstance(v.name, v.role, v.region, v.host, "10.200.0.9", "unused", v.vcpus)
         for v in both.vnfs], EntryPoint(both.hostname, []), {},
        {"regions": {"north": {}, "south": {}}, "servers": {}})
    south = shielded({"south": 1}, both.vcdn_id)
    with pytest.raises(DeploymentFailed, match=f"move an origin shield.*{SHIELD} .north to "
                                               "south.: region north, where it runs, is "
                                               "removed: keep north.*nothing was changed"):
        OpenStackDriver().update(deployment, south, previous=both)
    with pytest.raises(DeploymentFailed, match="needs the SIG it serves.*nothing was changed"):
        OpenStackDriver().update(deployment, shielded({"north": 1}, both.vcdn_id))
    document = shielded({"north": 1, "south": 1, "west": 1}, both.vcdn_id).to_dict()
    document["regions"][2]["vim_region"] = "RegionTwo"
    with pytest.raises(DeploymentFailed, match="OpenStack region.*nothing was changed"):
        OpenStackDriver().update(deployment, ServiceInstanceGraph.from_dict(document),
                                 previous=both)
