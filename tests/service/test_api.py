"""The customer API end to end: five real service processes over real HTTP,
on the embedded default (SQLite files) and on a real PostgreSQL, noop driver."""
import time

import pytest
import requests

from tests.support.api import Api, populated_stack, vcdn_body

@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def stack(request, tmp_path_factory):
    """A running stack with regions, hosts, the static template and two tenants."""
    with populated_stack(request, tmp_path_factory.mktemp(f"stack-{request.param}"),
                         {"CDNAAS_TEST_NOOP_FAIL_HOSTS": "doomed-1"}) as running:
        yield running


def reserved_vcpus(stack, region):
    return sum(h["reserved_vcpus"] for h in stack.operator.ok("GET", f"/regions/{region}/hosts")["hosts"])


def test_catalogue_shows_flavors_and_hides_operator_fields_from_tenants(stack):
    flavors = stack.acme.ok("GET", "/flavors")["flavors"]
    assert [f["name"] for f in flavors] == ["static"]
    regions = stack.acme.ok("GET", "/regions")["regions"]
    assert {r["name"] for r in regions} == {"eu-west", "us-east", "doomed"}
    assert all(set(r) == {"name", "description", "default"} for r in regions)
    full = stack.operator.ok("GET", "/regions/eu-west")
    assert full["client_prefixes"] == ["10.1.0.0/16"] and full["default"] and full["vcpus"] == 16


def test_vcdn_lifecycle_reaches_active_with_entry_point_and_ends(stack):
    accepted = stack.acme.call("POST", "/vcdns", json=vcdn_body("life", (("eu-west", 1000), ("us-east", 500))))
    assert accepted.status_code == 202, accepted.text
    operation_id = accepted.json()["operation"]["id"]
    assert accepted.headers["Location"] == f"/api/v1/operations/{operation_id}"
    operation = stack.acme.wait(operation_id)
    assert operation["state"] == "COMPLETED", operation
    assert operation["type"] == "INSTANTIATE"
    assert all(step["state"] == "COMPLETED" for step in operation["steps"])

    vcdn = stack.acme.ok("GET", f"/vcdns/{accepted.json()['vcdn']['id']}")
    assert vcdn["state"] == "ACTIVE"
    assert vcdn["entry_point"]["hostname"] == "life.acme.cdn.example.net"
    assert vcdn["entry_point"]["dns_servers"]
    by_region = {r["name"]: r for r in vcdn["regions"]}
    assert by_region["eu-west"]["caches"] == 2 and by_region["us-east"]["caches"] == 2
    assert by_region["eu-west"]["load_balancer"] and by_region["us-east"]["load_balancer"]
    # 2 caches + LB + DNS in the default region, 2 caches + LB in the other
    assert reserved_vcpus(stack, "eu-west") >= 4 and reserved_vcpus(stack, "us-east") >= 3

    changed = stack.acme.ok("PATCH", f"/vcdns/{vcdn['id']}", 202,
                            json={"regions": [{"name": "us-east", "demand": 900}]})
    assert stack.acme.wait(changed["operation"]["id"])["state"] == "COMPLETED"
    regions = {r["name"]: r for r in stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")["regions"]}
    assert regions["us-east"]["demand"] == 900 and regions["eu-west"]["demand"] == 1000

    before = reserved_vcpus(stack, "us-east")
    ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn['id']}", 202)
    assert stack.acme.wait(ended["operation"]["id"])["state"] == "COMPLETED"
    assert stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")["state"] == "DELETED"
    assert reserved_vcpus(stack, "us-east") == before - 3
    history = stack.acme.ok("GET", f"/vcdns/{vcdn['id']}/operations")["operations"]
    assert [o["type"] for o in history] == ["INSTANTIATE", "UPDATE", "TERMINATE"]


def test_a_tenant_never_sees_or_touches_another_tenants_vcdn(stack):
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body("private"))
    vcdn_id, operation_id = accepted["vcdn"]["id"], accepted["operation"]["id"]
    stack.acme.wait(operation_id)
    for method, path in (("GET", f"/vcdns/{vcdn_id}"), ("DELETE", f"/vcdns/{vcdn_id}"),
                         ("GET", f"/operations/{operation_id}"),
                         ("GET", f"/vcdns/{vcdn_id}/operations")):
        assert stack.globex.call(method, path).status_code == 404, (method, path)
    changed = stack.globex.call("PATCH", f"/vcdns/{vcdn_id}",
                                json={"regions": [{"name": "eu-west", "demand": 1}]})
    assert changed.status_code == 404
    assert vcdn_id not in [v["id"] for v in stack.globex.ok("GET", "/vcdns")["vcdns"]]
    assert vcdn_id in [v["id"] for v in stack.acme.ok("GET", "/vcdns")["vcdns"]]
    assert stack.acme.ok("GET", f"/vcdns/{vcdn_id}")["state"] == "ACTIVE"  # untouched
    assert stack.globex.call("GET", "/tenants/acme/tokens").status_code == 404


def test_authentication_and_operator_role(stack):
    anonymous = Api(stack.urls["api"])
    assert anonymous.call("GET", "/vcdns").status_code == 401
    assert Api(stack.urls["api"], "cdn_forged_token").call("GET", "/vcdns").status_code == 401
    for method, path, body in (("POST", "/regions", {"name": "x", "client_prefixes": []}),
                               ("GET", "/tenants", None), ("GET", "/regions/eu-west/hosts", None),
                               ("POST", "/tenants", {"name": "evil"})):
        response = stack.acme.call(method, path, json=body)
        assert response.status_code == 403, (path, response.text)
        assert "operator" in response.json()["error"]["message"]
    token = stack.acme.ok("POST", "/tenants/acme/tokens", 201, json={"description": "ci"})
    assert token["token"].startswith("cdn_")
    listed = stack.acme.ok("GET", "/tenants/acme/tokens")["tokens"]
    assert all("token" not in t for t in listed)  # secrets are never shown again
    stack.acme.ok("DELETE", f"/tenants/acme/tokens/{token['id']}", 204)
    assert Api(stack.urls["api"], token["token"]).call("GET", "/vcdns").status_code == 401


@pytest.mark.parametrize("body, status, field", [
    ({"name": "bad", "flavor": "static"}, 400, "origin"),
    (vcdn_body("bad", colour="red"), 400, "colour"),
    (vcdn_body("bad", regions=[{"name": "eu-west", "demand": "many", "quality": {"min_mos": 4}}]),
     400, "regions[0].demand"),
    (vcdn_body("bad", (("eu-west", 0),)), 400, "regions[0].demand"),
    (vcdn_body("bad", flavor="gold"), 422, "flavor"),
    (vcdn_body("bad", (("mars", 10),)), 422, "regions[0].name"),
    (vcdn_body("bad", (("eu-west", 10), ("eu-west", 5))), 400, "regions[1].name"),
    (vcdn_body("bad", lease={"start": "2099-02-01T00:00:00Z", "end": "2099-01-01T00:00:00Z"}),
     400, "lease.end"),
    (vcdn_body("bad", origin="ftp://origin.example.com"), 400, "origin"),
    (vcdn_body("bad", origin="http://"), 400, "origin"),
    (vcdn_body("bad", origin="http://origin.example.com;proxy_pass http://evil"), 400, "origin"),
    (vcdn_body("bad", origin="http://origin.example.com/}\nserver {"), 400, "origin"),
    (vcdn_body("bad", regions=[{"name": "eu-west", "demand": 5, "quality": {}}]), 400,
     "regions[0].quality"),
    (vcdn_body("bad", (("eu-west", 10),), lease={"end": "2001-01-01T00:00:00Z"}), 400, "lease.end"),
    (vcdn_body("Not_A_Label", (("us-east", 10),)), 400, "name"),
])
def test_bad_vcdn_requests_name_the_field_and_write_nothing(stack, body, status, field):
    before = len(stack.acme.ok("GET", "/vcdns")["vcdns"]), reserved_vcpus(stack, "eu-west")
    response = stack.acme.call("POST", "/vcdns", json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["field"] == field, error
    assert error["message"]
    after = len(stack.acme.ok("GET", "/vcdns")["vcdns"]), reserved_vcpus(stack, "eu-west")
    assert after == before


def test_malformed_json_is_refused(stack):
    response = stack.acme.call("POST", "/vcdns", data="{not json",
                               headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert "JSON" in response.json()["error"]["message"]


def test_duplicates_conflict(stack):
    stack.acme.wait(stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body("twice"))["operation"]["id"])
    again = stack.acme.call("POST", "/vcdns", json=vcdn_body("twice"))
    assert again.status_code == 409 and again.json()["error"]["field"] == "name"
    # another tenant may use the same name
    assert stack.globex.call("POST", "/vcdns", json=vcdn_body("twice")).status_code == 202
    assert stack.operator.call("POST", "/tenants", json={"name": "acme"}).status_code == 409
    assert stack.operator.call("POST", "/regions", json={"name": "eu-west", "client_prefixes": []}
                               ).status_code == 409
    bad_prefix = stack.operator.call("POST", "/regions", json={"name": "x", "client_prefixes": ["10.0.0.0/99"]})
    assert bad_prefix.status_code == 400 and bad_prefix.json()["error"]["field"] == "client_prefixes[0]"


def test_insufficient_capacity_names_region_and_reserves_nothing(stack):
    before = reserved_vcpus(stack, "us-east")
    stack.operator.ok("PATCH", "/regions/us-east/hosts/us-1", json={"enabled": False})
    try:
        response = stack.acme.call("POST", "/vcdns", json=vcdn_body("full", (("us-east", 10),)))
    finally:
        stack.operator.ok("PATCH", "/regions/us-east/hosts/us-1", json={"enabled": True})
    assert response.status_code == 409
    error = response.json()["error"]
    assert "us-east" in error["message"] and error["details"][0]["missing_vcpus"] == 4  # 2 caches, LB, DNS
    assert reserved_vcpus(stack, "us-east") == before


def test_failed_deployment_rolls_back_and_releases_capacity(stack):
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body("doomed", (("doomed", 10),)))
    operation = stack.acme.wait(accepted["operation"]["id"])
    assert operation["state"] == "ROLLED_BACK"
    assert "doomed-1" in operation["error"]
    vcdn = stack.acme.ok("GET", f"/vcdns/{accepted['vcdn']['id']}")
    assert vcdn["state"] == "FAILED" and vcdn["state_reason"]
    assert reserved_vcpus(stack, "doomed") == 0
    ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn['id']}", 202)  # a failed vCDN can be removed
    assert stack.acme.wait(ended["operation"]["id"])["state"] == "COMPLETED"


def test_future_lease_reserves_only_its_window_and_cancels_cleanly(stack):
    body = vcdn_body("later", (("us-east", 10),),
                     lease={"start": "2098-01-01T00:00:00Z", "end": "2098-01-02T00:00:00Z"})
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
    assert accepted["vcdn"]["state"] == "SCHEDULED"
    before = reserved_vcpus(stack, "us-east")  # counts only what is held now
    ended = stack.acme.ok("DELETE", f"/vcdns/{accepted['vcdn']['id']}", 202)
    assert ended["operation"]["state"] == "COMPLETED"
    assert stack.acme.ok("GET", f"/vcdns/{accepted['vcdn']['id']}")["state"] == "DELETED"
    assert reserved_vcpus(stack, "us-east") == before


def test_instance_manager_ends_expired_leases_and_records_it(stack):
    end = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3))
    accepted = stack.acme.ok("POST", "/vcdns", 202,
                             json=vcdn_body("brief", (("us-east", 10),), lease={"end": end}))
    vcdn_id = accepted["vcdn"]["id"]
    assert stack.acme.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
    deadline = time.monotonic() + 20
    while stack.acme.ok("GET", f"/vcdns/{vcdn_id}")["state"] != "DELETED":
        assert time.monotonic() < deadline, "the IM did not end the lease"
        time.sleep(0.2)
    actions = requests.get(f"{stack.urls['im']}/im/v1/actions", params={"instance_id": vcdn_id},
                           headers=stack.service_headers(), timeout=10).json()["actions"]
    ends = [a for a in actions if a["kind"] == "terminate"]
    assert len(ends) == 1 and ends[0]["outcome"] == "started"
    assert ends[0]["details"]["lease_end"].startswith(end[:16])
    operations = stack.acme.ok("GET", f"/vcdns/{vcdn_id}/operations")["operations"]
    assert operations[-1]["reason"] == "lease expired"


ELASTIC = {"flavor": "elastic-test", "version": 1, "plugin": "static", "technology": "container",
           "description": "static plugin, 1 to 4 caches per region: scaled by the IM",
           "vnfs": {role: {"image": "cdnaas-vnf", "instances": bounds, "vcpus": {"min": 1, "max": 1},
                           "ram_mb": {"min": 256, "max": 256}, "config_templates": []}
                    for role, bounds in (("cache", {"min": 1, "max": 4}),
                                         ("load_balancer", {"min": 1, "max": 1}),
                                         ("dns", {"min": 1, "max": 1}))}}


def test_the_so_scales_a_region_and_heals_a_cache_as_operations(stack):
    sidr = stack.operator.call("POST", "/templates", json=ELASTIC)
    assert sidr.status_code in (201, 409)
    accepted = stack.acme.ok("POST", "/vcdns", 202,
                             json=vcdn_body("elastic", (("us-east", 10),), flavor="elastic-test"))
    vcdn_id = accepted["vcdn"]["id"]
    assert stack.acme.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
    so = f"{stack.urls['so']}/so/v1/instances/{vcdn_id}"

    def caches():
        sig = requests.get(f"{so}/sig", headers=stack.service_headers(), timeout=10).json()
        return sorted(v["name"] for v in sig["vnfs"] if v["role"] == "cache")

    before = reserved_vcpus(stack, "us-east")
    grown = requests.post(f"{so}/scale", json={"region": "us-east", "caches": 3,
                                               "reason": "MOS below target"},
                          headers=stack.service_headers(), timeout=10)
    assert grown.status_code == 202, grown.text
    operation = stack.acme.wait(grown.json()["operation"]["id"])
    assert operation["state"] == "COMPLETED" and operation["reason"] == "MOS below target"
    assert caches() == ["us-east-cache-0", "us-east-cache-1", "us-east-cache-2"]
    assert reserved_vcpus(stack, "us-east") == before + 2

    too_many = requests.post(f"{so}/scale", json={"region": "us-east", "caches": 5},
                             headers=stack.service_headers(), timeout=10)
    assert too_many.status_code == 422 and too_many.json()["error"]["field"] == "caches"

    healed = requests.post(f"{so}/heal", json={"vnf": "us-east-cache-1", "reason": "no HTTP answer"},
                           headers=stack.service_headers(), timeout=10)
    assert stack.acme.wait(healed.json()["operation"]["id"])["state"] == "COMPLETED"
    assert caches() == ["us-east-cache-0", "us-east-cache-2", "us-east-cache-3"]

    shrunk = requests.post(f"{so}/scale", json={"region": "us-east", "caches": 1},
                           headers=stack.service_headers(), timeout=10)
    assert stack.acme.wait(shrunk.json()["operation"]["id"])["state"] == "COMPLETED"
    assert len(caches()) == 1 and reserved_vcpus(stack, "us-east") == before
    vcdn = stack.acme.ok("GET", f"/vcdns/{vcdn_id}")
    assert vcdn["state"] == "ACTIVE" and vcdn["regions"][0]["caches"] == 1



def test_a_change_goes_on_while_sidr_restarts(stack):
    """SIDR down (a restart): a vCDN changes with the template version it runs, read
    before; a vCDN whose template SO never read gets a clear 502, and nothing changes."""
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body("sidr-down", (("eu-west", 10),)))
    vcdn_id = accepted["vcdn"]["id"]
    assert stack.acme.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
    first = stack.acme.ok("PATCH", f"/vcdns/{vcdn_id}", 202,  # SO reads the version it runs
                          json={"regions": [{"name": "eu-west", "demand": 20}]})
    assert stack.acme.wait(first["operation"]["id"])["state"] == "COMPLETED"
    stack.kill("sidr")
    try:
        changed = stack.acme.ok("PATCH", f"/vcdns/{vcdn_id}", 202,
                                json={"regions": [{"name": "eu-west", "demand": 30}]})
        assert stack.acme.wait(changed["operation"]["id"])["state"] == "COMPLETED"
        refused = stack.acme.call("POST", "/vcdns",
                                  json=vcdn_body("sidr-down-new", (("eu-west", 10),)))
        assert refused.status_code == 502 and "sidr" in refused.json()["error"]["message"]
    finally:
        stack.restart("sidr")
    regions = stack.acme.ok("GET", f"/vcdns/{vcdn_id}")["regions"]
    assert regions[0]["demand"] == 30
    ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn_id}", 202)
    assert stack.acme.wait(ended["operation"]["id"])["state"] == "COMPLETED"
