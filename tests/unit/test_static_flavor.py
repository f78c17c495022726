"""The static flavor's plan and the shared bin packer it uses."""
from pathlib import Path

import pytest
import yaml

from cdnaas.common.flavor import HostCapacity, InsufficientCapacity, PlanRequest, RegionRequest
from cdnaas.common.sig import Origin, ServiceInstanceGraph
from cdnaas_plugins.static.plugin import StaticFlavor

TEMPLATE = yaml.safe_load((Path(__file__).resolve().parents[2] / "plugins/static/template.yaml").read_text())


def host(name, free, total=16):
    return HostCapacity(name=name, free_vcpus=free, free_ram_mb=free * 4096, vcpus=total,
                        ram_mb=total * 4096, idle_watts=115, peak_watts=269)


def request_for(regions):
    return PlanRequest(
        vcdn_id="v-1", hostname="demo.acme.cdn.example.net",
        origin=Origin("http", "origin.example.com", 80), default_region=regions[0][0],
        template=TEMPLATE,
        regions=[RegionRequest(name=name, demand=1000, quality={"min_mos": 4.0}, zone=None,
                               vim_region=None, client_prefixes=["10.0.0.0/8"], hosts=hosts)
                 for name, hosts in regions])


def test_fixed_caches_per_region_one_lb_each_and_dns_in_the_default_region():
    sig = StaticFlavor().plan(request_for([("eu", [host("e1", 16)]), ("us", [host("u1", 16)])]))
    assert [v.name for v in sig.vnfs_in("eu", "cache")] == ["eu-cache-0", "eu-cache-1"]
    assert len(sig.vnfs_in("us", "cache")) == 2
    assert len(sig.vnfs_in("eu", "load_balancer")) == len(sig.vnfs_in("us", "load_balancer")) == 1
    assert [v.region for v in sig.vnfs_in(role="dns")] == ["eu"]
    assert ServiceInstanceGraph.from_dict(sig.to_dict()) == sig  # obeys the SIG schema


def test_demand_does_not_change_the_size():
    small = StaticFlavor().plan(request_for([("eu", [host("e1", 16)])]))
    bigger = request_for([("eu", [host("e1", 16)])])
    bigger.regions[0].demand = 50000
    assert len(StaticFlavor().plan(bigger).vnfs) == len(small.vnfs)


def test_fewest_hosts_packs_one_host_and_spread_uses_both():
    regions = [("eu", [host("e1", 16), host("e2", 16)])]
    packed = StaticFlavor().plan(request_for(regions))
    assert len({v.host for v in packed.vnfs}) == 1
    spread = request_for(regions)
    spread.template = {**TEMPLATE, "placement": {"objective": "spread", "max_host_share": 0.5}}
    assert {v.host for v in StaticFlavor().plan(spread).vnfs_in("eu", "cache")} == {"e1", "e2"}


def test_not_enough_capacity_says_how_much_is_missing():
    with pytest.raises(InsufficientCapacity) as caught:
        StaticFlavor().plan(request_for([("eu", [host("e1", 2)])]))
    assert caught.value.region == "eu"
    assert caught.value.needed_vcpus == 4 and caught.value.missing_vcpus == 2
