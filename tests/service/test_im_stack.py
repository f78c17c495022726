"""The Instance Manager in a real five-process stack on the noop driver: viewers injected
through the driver's load file are seen in the customer API's metrics, a surge is met by
a scale out and a lull by a scale in (SO operations, decisions with their inputs), the
views are tenant-scoped, operators see host power and marks, Prometheus has the gauges,
a region falling below its target is pushed to the tenant's webhook."""
import pytest
import requests

from cdnaas_plugins.qoe_video.policy import DEFAULTS
from tests.support.api import vcdn_body
from tests.support.im import FLAVOR, eventually, modelled_stack, set_viewers
from tests.support.webhooks import Receiver, signed_by


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with modelled_stack(tmp_path_factory.mktemp("im-stack")) as running:
        yield running


def region_points(stack, vcdn_id, region):
    found = stack.acme.ok("GET", f"/vcdns/{vcdn_id}/metrics", params={"scope": "region"})
    return next((s["points"] for s in found["series"] if s["key"] == region), [])


def decisions(stack, vcdn_id, kind):
    return stack.acme.ok("GET", f"/vcdns/{vcdn_id}/decisions", params={"kind": kind})["decisions"]


def test_the_im_scales_a_region_out_and_back_in_through_so_and_says_why(stack):
    body = vcdn_body("elastic-video", (("eu-west", 10000), ("us-east", 5000)), flavor=FLAVOR)
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
    vcdn_id = accepted["vcdn"]["id"]
    assert stack.acme.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
    caches = stack.acme.ok("GET", f"/vcdns/{vcdn_id}")["regions"][0]["caches"]

    set_viewers(stack, vcdn_id, eu_west=8000, us_east=2000)
    calm = eventually(lambda: [p for p in region_points(stack, vcdn_id, "eu-west")
                               if p["viewers"] == 8000], "metrics of 8000 viewers")
    assert calm[-1]["mos"] == pytest.approx(4.8) and calm[-1]["watts"] > 0

    set_viewers(stack, vcdn_id, eu_west=16000, us_east=2000)  # 8000 per vCPU: MOS 3.5
    [out] = eventually(lambda: decisions(stack, vcdn_id, "scale_out"), "a scale out")
    assert out["outcome"] == "started" and out["region"] == "eu-west"
    assert out["details"]["counters"]["below"] >= 2
    assert out["details"]["thresholds"] == {
        "target": 4.0, "scale_out_below": 4.0 + DEFAULTS.out_margin,
        "scale_in_at_least": 4.0 + DEFAULTS.in_margin}
    assert out["details"]["samples"][-1]["viewers"] == 16000
    operation = stack.acme.wait(out["details"]["operation"])
    assert operation["state"] == "COMPLETED" and operation["type"] == "UPDATE"
    grown = stack.acme.ok("GET", f"/vcdns/{vcdn_id}")["regions"][0]["caches"]
    assert grown == out["details"]["target_caches"] > caches

    set_viewers(stack, vcdn_id, eu_west=3000, us_east=2000)
    [back] = eventually(lambda: decisions(stack, vcdn_id, "scale_in")[:1], "a scale in", 60)
    assert back["outcome"] == "started" and back["details"]["target_caches"] == grown - 1
    counters = back["details"]["counters"]
    assert counters["above_with_one_fewer"] >= counters["needed"]
    assert counters["samples_since_change"] >= counters["cooldown"]
    assert stack.acme.wait(back["details"]["operation"])["state"] == "COMPLETED"

    stepped = stack.acme.ok("GET", f"/vcdns/{vcdn_id}/metrics",
                            params={"scope": "vcdn", "step": 3600})
    assert stepped["step"] == 3600
    [whole] = stepped["series"][0]["points"]  # the last hour: one step (the window began in it)
    assert whole["passes"] >= 3 and whole["viewers"] > 0
    refused = stack.acme.call("GET", f"/vcdns/{vcdn_id}/metrics", params={"step": 0})
    assert refused.status_code == 400 and "step" in refused.text
    assert stack.globex.call("GET", f"/vcdns/{vcdn_id}/metrics").status_code == 404
    assert stack.globex.call("GET", f"/vcdns/{vcdn_id}/decisions").status_code == 404
    prometheus = requests.get(f"{stack.urls['im']}/metrics",
                              headers=stack.service_headers("metrics"), timeout=10).text
    assert f'cdnaas_im_vcdn_mos{{vcdn="{vcdn_id}"}}' in prometheus
    assert f'cdnaas_im_vcdn_watts{{vcdn="{vcdn_id}"}}' in prometheus


def test_operators_see_each_hosts_power_and_power_down_marks(stack):
    assert stack.acme.call("GET", "/hosts/power").status_code == 403
    found = eventually(lambda: [h for h in stack.operator.ok("GET", "/hosts/power")["hosts"]
                                if h["watts"] is not None], "host power figures")
    by_name = {h["name"]: h for h in found}
    assert set(by_name) >= {"eu-1", "eu-2", "us-1"}
    assert all(h["source"] == "model" and h["watts"] >= h["idle_watts"] for h in found)
    marked = eventually(lambda: [h for h in stack.operator.ok("GET", "/hosts/power")["hosts"]
                                 if h["mark"] and h["mark"]["state"] == "power_down"],
                        "a power-down mark")
    assert all(h["reserved_vcpus"] == 0 for h in marked)
    # the default power driver (log) only records a power-down: the host is still on,
    # enabled and drawing, counted in the watts, and the view says so
    # (a pass applying a power-down disables the host in SO for the moment it asks RO)

    def settled():
        found = stack.operator.ok("GET", "/hosts/power")
        marks = [h for h in found["hosts"] if h["mark"] and h["mark"]["state"] == "power_down"]
        return found if marks and all(h["enabled"] and not h["mark"]["switched_off"]
                                      for h in marks) else None
    view = eventually(settled, "power-downs shown as recorded only, the hosts still on")
    totals, still_on = view["totals"], [h for h in view["hosts"] if h["mark"] and
                                        h["mark"]["state"] == "power_down"]
    assert totals["marked_power_down"] == totals["marked_still_on"] == len(still_on) >= 1
    assert totals["switched_off"] == 0 and totals["saved_idle_watts"] == 0
    assert totals["marked_still_on_watts"] == pytest.approx(
        sum(h["watts"] or h["idle_watts"] for h in still_on), abs=0.2)
    assert totals["watts"] >= totals["marked_still_on_watts"] >= 115.0
    actions = requests.get(f"{stack.urls['im']}/im/v1/actions", params={"kind": "power_down"},
                           headers=stack.service_headers(), timeout=10).json()["actions"]
    details = actions[0]["details"] if actions else {}
    assert actions and actions[0]["host"] and details["headroom_vcpus"] >= \
        0.12 * details["region_demand_vcpus"] - 0.01  # CDNAAS_IM_HEADROOM_SHARE's default


def test_the_operator_sees_every_tenants_quality_load_and_power(stack):
    receiver = Receiver()  # acme's webhook hears of its region falling below target
    hook = stack.acme.ok("POST", "/webhooks", 201, json={"url": receiver.url,
                                                         "events": ["quality.below_target"]})
    ids = {}
    for tenant, name, region in (("acme", "watched", "eu-west"), ("globex", "elsewhere", "us-east")):
        client = getattr(stack, tenant)
        accepted = client.ok("POST", "/vcdns", 202,
                             json=vcdn_body(name, ((region, 10000),), flavor=FLAVOR))
        assert client.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
        ids[tenant] = accepted["vcdn"]["id"]
    set_viewers(stack, ids["acme"], eu_west=16000)  # 8000 per vCPU: MOS 3.5, below 4.0

    def below_target():
        """The overview once a pass saw both, the watched region below its target (a pass
        that listed the ACTIVE vCDNs before the second became ACTIVE saw one)."""
        found = stack.operator.ok("GET", "/quality")
        rows = {v["id"]: v for v in found["vcdns"]}
        measured = rows[ids["globex"]]["measured_at"]
        return found if rows[ids["acme"]]["regions"][0]["below_target"] and measured else None
    found = eventually(below_target, "the watched region below its target, both measured")
    rows = {v["id"]: v for v in found["vcdns"]}
    watched, elsewhere = rows[ids["acme"]], rows[ids["globex"]]
    assert (watched["tenant"], elsewhere["tenant"]) == ("acme", "globex")
    [eu] = watched["regions"]
    assert eu["name"] == "eu-west" and eu["quality"] == {"min_mos": 4.0}
    assert eu["viewers"] == 16000 and eu["mos"] < 4.0 and eu["watts"] > 0
    assert watched["viewers"] == 16000 and watched["measured_at"]
    [us] = elsewhere["regions"]
    assert us["viewers"] == 0 and not us["below_target"]
    assert found["totals"]["regions_below_target"] >= 1
    assert found["totals"]["vcdns"] == len(found["vcdns"]) >= 2
    assert stack.acme.call("GET", "/quality").status_code == 403
    try:
        [event] = receiver.events(ids["acme"])
        headers, body = receiver.last
        assert signed_by(hook["secret"], headers, body)
        assert event["type"] == "quality.below_target"
        assert event["data"]["region"] == "eu-west" and event["data"]["target_mos"] == 4.0
        assert event["data"]["mos"] < 4.0 and event["data"]["viewers"] == 16000
    finally:
        receiver.close()
