"""The origin shield, a fourth VNF role a flavor may add: the tests that start no process (the
unit tier); the others, and what the module covers, are in
tests/system/test_origin_shield.py."""
import copy
import os

import pytest
import yaml

from cdnaas.common import errors
from cdnaas.common.flavor import HostCapacity, PlanRequest, RegionRequest
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.sidr import service
from cdnaas.vnf import cache, fields
from cdnaas_plugins.static.plugin import StaticFlavor
from tests.support.sigs import sample_sig

STATIC = yaml.safe_load(open(os.path.join(os.path.dirname(__file__), "..", "..", "plugins", "static",
                                          "template.yaml"), encoding="utf-8"))
SHIELD = {"image": "cdnaas-vnf", "instances": {"min": 1, "max": 1}, "vcpus": {"min": 1, "max": 1},
          "ram_mb": {"min": 512, "max": 512}, "config_templates": []}


def shielded_template():
    template = copy.deepcopy(STATIC)
    template["vnfs"]["shield"] = dict(SHIELD)
    return template


# --- template and plan ----------------------------------------------------------------------

def test_a_template_may_have_one_shield_and_no_more():
    service.validate(shielded_template())
    for instances in ({"min": 2, "max": 2}, {"min": 0, "max": 1}, {"min": 1, "max": 3}):
        template = shielded_template()
        template["vnfs"]["shield"]["instances"] = instances
        with pytest.raises(errors.BadRequest) as caught:
            service.validate(template)
        assert caught.value.field == "vnfs.shield.instances", caught.value
        assert "one origin shield" in str(caught.value)
    template = shielded_template()
    template["vnfs"]["shield"]["image"] = "a b"  # the schema's rules hold for the new role
    with pytest.raises(errors.BadRequest) as caught:
        service.validate(template)
    assert caught.value.field == "vnfs.shield.image"


def test_the_plan_puts_the_shield_in_the_default_region_on_a_host_with_room():
    regions = [RegionRequest(name=name, demand=100, quality={"min_mos": 3.5}, zone=None,
                             vim_region=None, client_prefixes=["10.0.0.0/8"],
                             hosts=[HostCapacity(f"{name}-{i}", 4, 4096, 4, 4096, 100.0, 200.0)
                                    for i in (1, 2)])
               for name in ("north", "south")]
    request = PlanRequest(vcdn_id="v1", hostname="v1.cdn.example.net",
                          origin=ServiceInstanceGraph.from_dict(sample_sig()).origin,
                          default_region="south", regions=regions,
                          template=shielded_template())
    sig = StaticFlavor().plan(request)
    [shield] = sig.vnfs_in(role="shield")
    assert (shield.name, shield.region, shield.vcpus) == ("shield-0", "south", 1)
    used = {}
    for vnf in sig.vnfs_in("south"):  # the shield's vCPU counts on its host like the others
        used[vnf.host] = used.get(vnf.host, 0) + vnf.vcpus
    assert shield.host in used and max(used.values()) <= 4 and sum(used.values()) == 5
    assert ServiceInstanceGraph.from_dict(sig.to_dict()).vnfs_in(role="shield") == [shield]


def test_a_shield_config_listens_on_each_leg_and_says_it_is_the_shield(tmp_path):
    values = dict(name="shield-0", workers=1, listen_address="198.18.0.4", listen_port=80,
                  origin=ServiceInstanceGraph.from_dict(sample_sig()).origin,
                  origin_address="198.18.0.1", prefix_dir=str(tmp_path),
                  management_sources=["198.18.0.1"])
    text = cache.cache_config(**values, shield=True, also_listen=["198.18.1.4"])
    assert "listen 198.18.0.4:80 " in text and "listen 198.18.1.4:80 " in text
    assert "X-Shield-Cache-Status" in text and "X-Cache-Status" not in text
    edge = cache.cache_config(**values)
    assert "X-Shield-Cache-Status" not in edge and "X-Cache-Status" in edge
    for bad in (["198.18.1.4;"], "198.18.1.4", ["0.0.0.0:80"], [None]):
        with pytest.raises(fields.ConfigError, match="also_listen"):
            cache.cache_config(**values, shield=True, also_listen=bad)
