"""The qoe-video flavor: SIG, sizing from the models, quotes and refusals."""
import copy
from pathlib import Path

import pytest
import yaml

from cdnaas.common import errors
from cdnaas.common.flavor import HostCapacity, InsufficientCapacity, PlanRequest, RegionRequest
from cdnaas.common.sig import Origin, ServiceInstanceGraph
from cdnaas.sidr import service
from cdnaas_plugins.qoe_video.plugin import QoeVideoFlavor

TEMPLATE = yaml.safe_load((Path(__file__).resolve().parents[2]
                           / "plugins/qoe_video/template.yaml").read_text(encoding="utf-8"))
DYNAMIC = (269 - 115) / 16  # W per busy vCPU of a default host


def host(name, free=16, total=16):
    return HostCapacity(name=name, free_vcpus=free, free_ram_mb=free * 4096, vcpus=total,
                        ram_mb=total * 4096, idle_watts=115, peak_watts=269)


def request_for(regions, template=TEMPLATE):
    """``regions``: (name, demand, quality, hosts); the first is the default region."""
    return PlanRequest(
        vcdn_id="v-1", hostname="demo.acme.cdn.example.net",
        origin=Origin("http", "origin.example.com", 80), default_region=regions[0][0],
        template=template,
        regions=[RegionRequest(name=name, demand=demand, quality=quality, zone=None,
                               vim_region=None, client_prefixes=[f"10.{i}.0.0/16"], hosts=hosts)
                 for i, (name, demand, quality, hosts) in enumerate(regions)])


def container_template():
    template = copy.deepcopy(TEMPLATE)
    template.update(flavor="qoe-video-container", technology="container",
                    model="models/container.yaml")
    return template


def test_the_template_is_a_valid_service_template():
    service.validate(TEMPLATE)
    service.validate(container_template())


def test_sig_has_caches_an_lb_per_region_and_dns_in_the_default_region():
    sig = QoeVideoFlavor().plan(request_for([
        ("eu", 30000, {"min_mos": 4.0}, [host("e1"), host("e2")]),
        ("us", 4000, {"min_mos": 4.0}, [host("u1")])]))
    assert ServiceInstanceGraph.from_dict(sig.to_dict()) == sig  # obeys the SIG schema
    assert [v.name for v in sig.vnfs_in("eu", "cache")] == ["eu-cache-0", "eu-cache-1"]
    assert [v.vcpus for v in sig.vnfs_in("eu", "cache")] == [3, 3]  # 5 vCPUs needed, 2 equal caches
    assert [v.name for v in sig.vnfs_in("us", "cache")] == ["us-cache-0"]
    assert [v.name for v in sig.vnfs_in(role="load_balancer")] == ["eu-lb-0", "us-lb-0"]
    assert [(v.name, v.region) for v in sig.vnfs_in(role="dns")] == [("dns-0", "eu")]
    assert {v.host for v in sig.vnfs_in("us")} == {"u1"}
    assert sig.flavor == "qoe-video" and sig.regions[0].quality == {"min_mos": 4.0}


def test_8000_viewers_at_mos_4_take_two_vcpus_on_vm_and_one_on_container():
    regions = [("eu", 8000, {"min_mos": 4.0}, [host("e1")])]
    vm = QoeVideoFlavor().plan(request_for(regions))
    container = QoeVideoFlavor().plan(request_for(regions, container_template()))
    assert sum(v.vcpus for v in vm.vnfs_in("eu", "cache")) == 2
    assert sum(v.vcpus for v in container.vnfs_in("eu", "cache")) == 1


def test_spread_puts_caches_on_different_hosts():
    template = copy.deepcopy(TEMPLATE)
    template["placement"] = {"objective": "spread", "max_host_share": 0.5}
    sig = QoeVideoFlavor().plan(request_for(
        [("eu", 4000, {"min_mos": 4.0}, [host("e1"), host("e2"), host("e3")])], template))
    caches = sig.vnfs_in("eu", "cache")
    assert len(caches) == 2  # one vCPU would do; the share asks for two caches
    assert len({c.host for c in caches}) == 2


def test_quote_matches_the_plan_and_computes_power_from_the_host_model():
    request = request_for([("eu", 8000, {"min_mos": 4.0}, [host("e1"), host("e2", free=4)])])
    plugin = QoeVideoFlavor()
    quote, sig = plugin.quote(request), plugin.plan(request)
    region = quote["regions"][0]
    assert region["vcpus"] == quote["vcpus"] == sum(v.vcpus for v in sig.vnfs) == 4
    assert region["instances"] == len(sig.vnfs) == 3
    assert (region["caches"], region["cache_vcpus"]) == (1, 2)
    assert region["hosts"] == sorted({v.host for v in sig.vnfs}) == ["e2"]
    assert region["hosts_powered_on"] == []  # e2 is on already and has room
    assert region["predicted_mos"] == 4.8 and region["predicted_response_ms"] is None
    # 8000 viewers, 2 vCPUs: 4000 req/s against 2 x 5384 req/s (Table III, 4000 connections)
    utilisation = 4000 / (2 * (6165 - (6165 - 3822) * 3000 / 9000))
    assert region["utilisation"] == pytest.approx(utilisation, abs=1e-3)
    expected = DYNAMIC * (2 * utilisation + 1 + 1)  # caches at utilisation, LB and DNS busy
    assert region["power_watts"] == pytest.approx(expected, abs=0.05)
    assert quote["power_watts"] == pytest.approx(expected, abs=0.05)


def test_quote_counts_idle_watts_of_hosts_it_powers_on():
    quote = QoeVideoFlavor().quote(request_for([("eu", 1000, {"min_mos": 4.0}, [host("e1")])]))
    assert quote["regions"][0]["hosts_powered_on"] == ["e1"]
    assert quote["power_watts"] > 115


def test_response_time_target_predicts_the_models_bound():
    quote = QoeVideoFlavor().quote(request_for(
        [("eu", 40000, {"response_time": {"percentile": 90, "max_ms": 600}}, [host("e1")])]))
    region = quote["regions"][0]
    assert region["cache_vcpus"] == 2
    assert region["predicted_response_ms"] == 564.5 and region["predicted_mos"] is None


def test_predict_a_planned_vcdn():
    plugin = QoeVideoFlavor()
    sig = plugin.plan(request_for([("eu", 8000, {"min_mos": 4.0}, [host("e1")])]))
    assert plugin.predict(sig, TEMPLATE) == {
        "eu": {"viewers_per_vcpu": 4000.0, "predicted_mos": 4.8, "predicted_response_ms": None}}


def test_a_target_above_the_model_is_refused_naming_the_region():
    with pytest.raises(errors.Unprocessable) as caught:
        QoeVideoFlavor().plan(request_for([("eu", 1000, {"min_mos": 4.9}, [host("e1")])]))
    assert caught.value.status == 422
    assert "region eu" in caught.value.message and "4.8" in caught.value.message


def test_not_enough_hosts_says_how_many_vcpus_are_missing():
    # 30000 viewers at MOS 4: 5 vCPUs -> 2 caches of 3, + LB + DNS = 8 vCPUs; 5 free
    with pytest.raises(InsufficientCapacity) as caught:
        QoeVideoFlavor().plan(request_for([("eu", 30000, {"min_mos": 4.0}, [host("e1", free=5)])]))
    assert (caught.value.region, caught.value.missing_vcpus, caught.value.needed_vcpus) == \
        ("eu", 3, 8)


@pytest.mark.parametrize("change, words", [
    ({"model": "models/absent.yaml"}, "cannot read"),
    ({"model": None}, "names no model"),
    ({"technology": "container"}, "describes vm"),
])
def test_an_unusable_model_makes_the_flavor_unavailable(change, words):
    template = {**TEMPLATE, **change}
    with pytest.raises(errors.Unprocessable, match=words) as caught:
        QoeVideoFlavor().plan(request_for([("eu", 1000, {"min_mos": 4.0}, [host("e1")])], template))
    assert caught.value.field == "flavor"
