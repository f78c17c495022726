"""The origin shield, a fourth VNF role a flavor may add: its template rules, its place in
the plan, its config, and on the local driver a real shield between two regions' caches
and the origin (one origin fetch for the whole vCDN, purged first, gone with the vCDN)."""
import copy
import os
import uuid

import pytest
import yaml

from cdnaas.common import errors
from cdnaas.common.flavor import HostCapacity, PlanRequest, RegionRequest
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro import vnfconfig
from cdnaas.ro.vim.base import DeploymentFailed
from cdnaas.ro.vim.local import clients, network
from cdnaas.ro.vim.local.driver import LocalDriver
from cdnaas.sidr import service
from cdnaas_plugins.static.plugin import StaticFlavor
from tests.support.sigs import sample_sig
from tests.test_local_driver import make_sig
from tests.test_local_driver import state_dir  # noqa: F401 (the fixture: a module's own state)

STATIC = yaml.safe_load(open(os.path.join(os.path.dirname(__file__), "..", "plugins", "static",
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
    text = vnfconfig.cache_config(**values, shield=True, also_listen=["198.18.1.4"])
    assert "listen 198.18.0.4:80 " in text and "listen 198.18.1.4:80 " in text
    assert "X-Shield-Cache-Status" in text and "X-Cache-Status" not in text
    edge = vnfconfig.cache_config(**values)
    assert "X-Shield-Cache-Status" not in edge and "X-Cache-Status" in edge
    for bad in (["198.18.1.4;"], "198.18.1.4", ["0.0.0.0:80"], [None]):
        with pytest.raises(vnfconfig.ConfigError, match="also_listen"):
            vnfconfig.cache_config(**values, shield=True, also_listen=bad)


def test_the_openstack_driver_refuses_a_shield_before_touching_the_cloud(monkeypatch):
    from cdnaas.ro.vim.openstack.driver import OpenStackDriver
    monkeypatch.setenv("OS_CLOUD", "nowhere-needed")
    monkeypatch.setattr(OpenStackDriver, "check_prerequisites", lambda self: None)
    with pytest.raises(DeploymentFailed, match="origin shield"):
        OpenStackDriver().deploy(with_shield(sample_sig("v")))


def with_shield(document, region=None):
    document = copy.deepcopy(document)
    region = region or document["default_region"]
    document["vnfs"].append({"name": "shield-0", "role": "shield", "region": region,
                             "host": f"{region}-host-2", "vcpus": 1, "ram_mb": 256,
                             "image": "cdnaas-vnf"})
    return ServiceInstanceGraph.from_dict(document)


# --- a real shield on the local driver --------------------------------------------------------

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")


@needs_root
@pytest.mark.usefixtures("state_dir")
def test_two_regions_caches_fetch_through_one_shield(origin):
    driver = LocalDriver()
    plain = make_sig(origin, {"north": 2, "south": 1}, f"shield-{uuid.uuid4().hex[:8]}")
    sig = with_shield(plain.to_dict())
    deployment = driver.deploy(sig)
    try:
        [shield] = [v for v in deployment.vnfs if v.role == "shield"]
        assert shield.region == "north" and shield.address.endswith(".4")
        path = f"/video/hd/seg-{uuid.uuid4().int % 300}.m4s"
        origin.reset()
        answers = []
        for region, probe in (("north", "10.1.0.31"), ("south", "10.2.0.31"),
                              ("north", "10.1.0.32")):
            lb = deployment.region_endpoints[region]
            with clients.client(sig.vcdn_id, region, probe) as viewer:
                status, headers, _body = viewer.fetch(f"http://{sig.hostname}{path}",
                                                      resolve=(sig.hostname, lb))
            answers.append((region, status, headers.get("x-cache-status"),
                            headers.get("x-shield-cache-status"),
                            headers.get("x-shield-served-by")))
        # the first cache fetched through the shield, the other region's from the shield's
        # copy: the origin served the vCDN once
        assert answers[0] == ("north", 200, "MISS", "MISS", "shield-0")
        assert answers[1] == ("south", 200, "MISS", "HIT", "shield-0")
        # north's balancer hashes by the key: the same cache answers again, from its copy
        assert answers[2][:3] == ("north", 200, "HIT"), answers[2]
        assert origin.stats().get(path) == 1

        # a purge empties the shield too (first): the next fetch goes to the origin again
        results = driver.invalidate(deployment, [path], [])
        assert [r.name for r in results][0] == "shield-0" and all(r.ok for r in results)
        with clients.client(sig.vcdn_id, "south", "10.2.0.33") as viewer:
            _status, headers, _body = viewer.fetch(
                f"http://{sig.hostname}{path}",
                resolve=(sig.hostname, deployment.region_endpoints["south"]))
        assert (headers["x-cache-status"], headers["x-shield-cache-status"]) == ("MISS", "MISS")
        assert origin.stats().get(path) == 2

        health = {h.name: h.healthy for h in driver.health(deployment)}
        assert health["shield-0"] is True
        with pytest.raises(DeploymentFailed, match="origin shield"):
            driver.update(deployment, with_shield(
                make_sig(origin, {"north": 2}, sig.vcdn_id).to_dict()), previous=sig)
    finally:
        driver.terminate(deployment)
    assert not [n for n in network.list_namespaces() if sig.vcdn_id in n]
