"""PATCH of origin, regions and lease end; vCDN lists with filters and pages; ETag and
If-Match; the CLI's tables for every shipped flavor. Five real services over HTTP on
the noop driver, on SQLite and on a real PostgreSQL."""
import threading

import pytest

from cdnaas.common.clients import RoClient, SoClient
from cdnaas.common.sig import digest
from tests.support.api import populated_stack, vcdn_body
from tests.service.test_cli import QOE_TEMPLATE, invoke

NEW_ORIGIN = "http://origin2.example.com:8081"
MOS = {"min_mos": 4.0}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def stack(request, tmp_path_factory):
    """A running stack (regions, hosts, the static template, tenants acme and globex) with
    a small region ``ap-south`` (one 6 vCPU host) for the lease tests."""
    with populated_stack(request, tmp_path_factory.mktemp(f"comforts-{request.param}"),
                         {"CDNAAS_TEST_NOOP_FAIL_HOSTS": "doomed-1"}) as running:
        running.operator.ok("POST", "/regions", 201,
                            json={"name": "ap-south", "client_prefixes": ["10.4.0.0/16"]})
        running.operator.ok("POST", "/regions/ap-south/hosts", 201,
                            json={"name": "ap-1", "vcpus": 6, "ram_mb": 32768})
        yield running


@pytest.fixture(autouse=True)
def ended(stack):
    """Every vCDN a test leaves is deleted after it, so the hosts' capacity is free again."""
    yield
    for vcdn in stack.operator.ok("GET", "/vcdns", params={"limit": 1000})["vcdns"]:
        if vcdn["state"] in ("ACTIVE", "SCHEDULED", "FAILED"):
            accepted = stack.operator.ok("DELETE", f"/vcdns/{vcdn['id']}", 202)
            stack.operator.wait(accepted["operation"]["id"])


def reserved(stack, region):
    return sum(h["reserved_vcpus"]
               for h in stack.operator.ok("GET", f"/regions/{region}/hosts")["hosts"])


def active(stack, name, regions=(("eu-west", 1000),), tenant=None, **overrides):
    """A new ACTIVE vCDN of ``tenant`` (acme by default)."""
    api = tenant or stack.acme
    accepted = api.ok("POST", "/vcdns", 202, json=vcdn_body(name, regions, **overrides))
    assert api.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
    return api.ok("GET", f"/vcdns/{accepted['vcdn']['id']}")


def patched(stack, vcdn, body, state="COMPLETED", api=None):
    """PATCH ``body``, wait for its operation to end in ``state``; return the vCDN after."""
    api = api or stack.acme
    accepted = api.ok("PATCH", f"/vcdns/{vcdn['id']}", 202, json=body)
    operation = api.wait(accepted["operation"]["id"])
    assert operation["state"] == state, operation
    return api.ok("GET", f"/vcdns/{vcdn['id']}"), operation


def sig_of(stack, vcdn_id):
    return stack.client(SoClient).sig(vcdn_id)


def serving(stack, vcdn_id):
    """RO serves exactly SO's SIG (the digest SO compares)."""
    return stack.client(RoClient).get_deployment(vcdn_id).sig_digest == \
        digest(sig_of(stack, vcdn_id))


# -- PATCH ------------------------------------------------------------------------------------

def test_a_new_origin_reaches_the_deployment_and_keeps_the_vnfs(stack):
    vcdn = active(stack, "neworigin")
    before = sig_of(stack, vcdn["id"])
    after, operation = patched(stack, vcdn, {"origin": NEW_ORIGIN})
    assert after["origin"] == NEW_ORIGIN and operation["type"] == "UPDATE"
    sig = sig_of(stack, vcdn["id"])
    assert sig["origin"] == {"scheme": "http", "host": "origin2.example.com", "port": 8081}
    assert sig["vnfs"] == before["vnfs"]  # not planned again: the same VNFs
    assert serving(stack, vcdn["id"])
    assert after["revision"] == vcdn["revision"] + 1


def test_regions_are_added_and_removed_and_the_dns_leaves_a_removed_default(stack):
    before_eu, before_us = reserved(stack, "eu-west"), reserved(stack, "us-east")
    vcdn = active(stack, "moving")
    assert {v["region"] for v in sig_of(stack, vcdn["id"])["vnfs"] if v["role"] == "dns"} == \
        {"eu-west"}
    grown, _ = patched(stack, vcdn, {"regions": [{"name": "us-east", "demand": 500,
                                                  "quality": MOS}]})
    regions = {r["name"]: r for r in grown["regions"]}
    assert set(regions) == {"eu-west", "us-east"}
    assert regions["us-east"]["caches"] == 2 and regions["us-east"]["load_balancer"]
    assert reserved(stack, "us-east") == before_us + 3 and serving(stack, vcdn["id"])

    moved, _ = patched(stack, grown, {"remove_regions": ["eu-west"]})
    assert [r["name"] for r in moved["regions"]] == ["us-east"]
    sig = sig_of(stack, vcdn["id"])
    assert sig["default_region"] == "us-east"
    assert [v["region"] for v in sig["vnfs"] if v["role"] == "dns"] == ["us-east"]
    assert reserved(stack, "eu-west") == before_eu and reserved(stack, "us-east") == before_us + 4
    assert serving(stack, vcdn["id"])
    refused = stack.acme.call("PATCH", f"/vcdns/{vcdn['id']}",
                              json={"remove_regions": ["us-east"]})
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "remove_regions"
    assert "DELETE" in refused.json()["error"]["message"]


def test_the_lease_end_moves_within_the_capacity_of_the_new_window(stack):
    vcdn = active(stack, "lease", (("ap-south", 10),), lease={"end": "2090-01-01T00:00:00Z"})
    later = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body(  # 4 of 6 vCPUs, afterwards
        "after", (("ap-south", 10),),
        lease={"start": "2090-01-01T00:30:00Z", "end": "2090-01-02T00:00:00Z"}))
    assert later["vcdn"]["state"] == "SCHEDULED"

    longer = stack.acme.call("PATCH", f"/vcdns/{vcdn['id']}",
                             json={"lease": {"end": "2090-01-01T01:00:00Z"}})
    assert longer.status_code == 409, longer.text
    assert longer.json()["error"]["field"] == "lease.end"
    assert "ap-south lacks 2 vCPUs" in longer.json()["error"]["message"]
    assert stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")["lease"]["end"] == "2090-01-01T00:00:00Z"

    fits, operation = patched(stack, vcdn, {"lease": {"end": "2090-01-01T00:20:00Z"}})
    assert fits["lease"]["end"] == "2090-01-01T00:20:00Z" and fits["state"] == "ACTIVE"
    assert [s["state"] for s in operation["steps"]] == ["COMPLETED", "SKIPPED", "SKIPPED"]
    shorter, _ = patched(stack, vcdn, {"lease": {"end": "2080-06-01T12:00:00+02:00"}})
    assert shorter["lease"]["end"] == "2080-06-01T10:00:00Z"
    for end in ("2001-01-01T00:00:00Z", "tomorrow"):
        past = stack.acme.call("PATCH", f"/vcdns/{vcdn['id']}", json={"lease": {"end": end}})
        assert past.status_code == 400 and past.json()["error"]["field"] == "lease.end", past.text


def test_one_patch_changes_origin_regions_demand_and_lease_together(stack):
    vcdn = active(stack, "together")
    after, _ = patched(stack, vcdn, {
        "origin": NEW_ORIGIN, "lease": {"end": "2098-01-01T00:00:00Z"},
        "regions": [{"name": "eu-west", "demand": 700},
                    {"name": "us-east", "demand": 300, "quality": MOS}]})
    assert after["origin"] == NEW_ORIGIN and after["lease"]["end"] == "2098-01-01T00:00:00Z"
    assert {r["name"]: r["demand"] for r in after["regions"]} == {"eu-west": 700, "us-east": 300}
    assert sig_of(stack, vcdn["id"])["origin"]["host"] == "origin2.example.com"
    assert serving(stack, vcdn["id"])


def test_a_failed_change_keeps_the_previous_vcdn_and_its_reservations(stack):
    vcdn = active(stack, "keeper")
    held = {r: reserved(stack, r) for r in ("eu-west", "doomed")}
    after, operation = patched(stack, vcdn, {
        "origin": NEW_ORIGIN, "lease": {"end": "2097-01-01T00:00:00Z"},
        "regions": [{"name": "doomed", "demand": 10, "quality": MOS}]}, state="ROLLED_BACK")
    assert "previous vCDN kept" in operation["error"]
    assert after["state"] == "ACTIVE" and after["origin"] == vcdn["origin"]
    assert after["lease"] == vcdn["lease"] and after["regions"] == vcdn["regions"]
    assert {r: reserved(stack, r) for r in held} == held
    assert serving(stack, vcdn["id"])
    assert after["revision"] == vcdn["revision"] + 2  # the change, then its undoing


@pytest.mark.parametrize("body, field", [
    ({"origin": "http://a.example\n.com"}, "origin"),
    ({"origin": "http://x.example;rm -rf /"}, "origin"),
    ({"origin": "http://{x}.example"}, "origin"),
    ({"origin": "http://$host"}, "origin"),
    ({"origin": 'http://"x".example'}, "origin"),
    ({"origin": "http://x\u0000.example"}, "origin"),
    ({"origin": "http://b\u00fccher.example"}, "origin"),
    ({"origin": "http://" + "a" * 100_000}, "origin"),
    ({"origin": "http://169.254.169.254"}, "origin"),
    ({"origin": 5}, "origin"),
    ({"remove_regions": ["EU;west"]}, "remove_regions[0]"),
    ({"remove_regions": []}, "remove_regions"),
    ({"remove_regions": ["us-east"]}, "remove_regions[0]"),
    ({"remove_regions": ["eu-west", "eu-west"]}, "remove_regions[1]"),
    ({"regions": [{"name": "eu-west", "demand": 5}], "remove_regions": ["eu-west"]},
     "remove_regions[0]"),
    ({"regions": [{"name": "us-east", "demand": 10}]}, "regions[0].quality"),
    ({"regions": [{"name": "us-east", "quality": {"min_mos": 4}}]}, "regions[0].demand"),
    ({"regions": [{"name": "mars", "demand": 1, "quality": {"min_mos": 4}}]}, "regions[0].name"),
    ({"regions": [{"name": "eu-west", "demand": 10 ** 30}]}, "regions[0].demand"),
    ({"lease": {"end": "2030-01-01T00:00:00Z\n"}}, "lease.end"),
    ({"lease": {"end": "2090-01-01T00:00:00Z", "start": "2089-01-01T00:00:00Z"}}, "lease.start"),
    ({"lease": {}}, "lease.end"),
    ({"colour": "blue"}, "colour"),
    ({}, "body"),
])
def test_hostile_changes_are_refused_naming_the_field_and_change_nothing(stack, body, field):
    vcdn = active(stack, "hostile")
    refused = stack.acme.call("PATCH", f"/vcdns/{vcdn['id']}", json=body)
    assert refused.status_code in (400, 422), refused.text
    assert refused.json()["error"]["field"] == field, refused.text
    assert stack.acme.ok("GET", f"/vcdns/{vcdn['id']}") == vcdn


def test_a_scheduled_vcdn_changes_at_once(stack):
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body(
        "later", lease={"start": "2095-01-01T00:00:00Z", "end": "2095-01-02T00:00:00Z"}))
    after, operation = patched(stack, accepted["vcdn"], {"origin": NEW_ORIGIN})
    assert after["state"] == "SCHEDULED" and after["origin"] == NEW_ORIGIN
    assert operation["steps"][1]["state"] == "SKIPPED"


def test_a_scheduled_vcdn_shows_its_hostname_for_cnames_set_in_advance(stack):
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body(
        "early", lease={"start": "2095-02-01T00:00:00Z", "end": "2095-02-02T00:00:00Z"}))
    assert accepted["vcdn"]["state"] == "SCHEDULED"
    planned = {"hostname": "early.acme.cdn.example.net", "dns_servers": [], "name_servers": [
        {"name": "dns-0.early.acme.cdn.example.net", "addresses": []}]}
    assert accepted["vcdn"]["entry_point"] == planned
    assert stack.acme.ok("GET", f"/vcdns/{accepted['vcdn']['id']}")["entry_point"] == planned
    [listed] = stack.acme.ok("GET", "/vcdns", params={"name": "early"})["vcdns"]
    assert listed["entry_point"] == planned
    shown = invoke(["vcdn", "show", accepted["vcdn"]["id"]], {**stack.env, "COLUMNS": "300"},
                   stack.acme.token)
    assert "early.acme.cdn.example.net" in shown.stdout
    assert "once it is deployed" in shown.stdout, shown.stdout
    assert "dns-0.early.acme.cdn.example.net" in shown.stdout, shown.stdout
    # deployed: the same hostname, now with its DNS servers, published as the same NS name
    deployed = active(stack, "now")["entry_point"]
    assert deployed["hostname"] == "now.acme.cdn.example.net" and deployed["dns_servers"]
    assert deployed["name_servers"] == [{"name": "dns-0.now.acme.cdn.example.net",
                                         "addresses": sorted(deployed["dns_servers"])}]


# -- lists ------------------------------------------------------------------------------------

def test_lists_filter_page_in_a_stable_order_and_hide_deleted_vcdns(stack):
    made = [active(stack, f"list-{letter}", tenant=stack.globex)["id"] for letter in "abc"]
    ended = stack.globex.ok("DELETE", f"/vcdns/{made[2]}", 202)
    assert stack.globex.wait(ended["operation"]["id"])["state"] == "COMPLETED"

    listed = stack.globex.ok("GET", "/vcdns")
    assert [v["id"] for v in listed["vcdns"]] == made[:2] and listed["next"] is None
    everything = stack.globex.ok("GET", "/vcdns", params={"include_deleted": "true"})
    assert [v["id"] for v in everything["vcdns"]] == made
    assert [v["id"] for v in stack.globex.ok("GET", "/vcdns", params={"state": "DELETED"})
            ["vcdns"]] == [made[2]]
    assert [v["id"] for v in stack.globex.ok("GET", "/vcdns", params={"name": "list-b"})
            ["vcdns"]] == [made[1]]
    assert stack.globex.ok("GET", "/vcdns", params={"state": "FAILED"})["vcdns"] == []

    pages, marker = [], None
    while True:
        page = stack.globex.ok("GET", "/vcdns", params={"limit": 1, "include_deleted": "true",
                                                        **({"marker": marker} if marker else {})})
        pages.append([v["id"] for v in page["vcdns"]])
        marker = page["next"]
        if marker is None:
            break
    assert pages == [[made[0]], [made[1]], [made[2]]]
    assert made[0] in [v["id"] for v in stack.operator.ok("GET", "/vcdns", params={
        "name": "list-a"})["vcdns"]]  # operators see every tenant's


@pytest.mark.parametrize("params, field", [
    ({"state": "BOGUS"}, "state"), ({"state": "active;"}, "state"), ({"limit": 0}, "limit"),
    ({"limit": 1001}, "limit"), ({"limit": "ten"}, "limit"), ({"name": "Bad_Name"}, "name"),
    ({"name": "x" * 200}, "name"), ({"marker": "no/such"}, "marker"),
    ({"marker": "0000-missing"}, "marker"), ({"include_deleted": "maybe"}, "include_deleted"),
    ({"sort": "name"}, "sort"), ({"limit": ["1", "5"]}, "limit"),
    ({"state": ["ACTIVE", "DELETED"]}, "state"),
])
def test_bad_list_parameters_are_refused_naming_them(stack, params, field):
    refused = stack.acme.call("GET", "/vcdns", params=params)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["field"] == field


def test_unknown_and_repeated_query_parameters_are_refused_on_every_route(stack):
    vcdn = active(stack, "queried")
    for path, params, field, words in (
            ("/vcdns", {"sort": "name"}, "sort", "takes state, name, limit, marker"),
            (f"/vcdns/{vcdn['id']}/operations", {"limit": 1, "order": "desc"}, "order",
             "takes limit, marker"),
            (f"/vcdns/{vcdn['id']}/operations", {"limit": [1, 2]}, "limit", "more than once"),
            (f"/vcdns/{vcdn['id']}", {"fields": "name"}, "fields", "takes no query"),
            ("/regions", {"verbose": "1"}, "verbose", "takes no query")):
        refused = stack.acme.call("GET", path, params=params)
        assert refused.status_code == 400, (path, refused.text)
        assert refused.json()["error"]["field"] == field
        assert words in refused.json()["error"]["message"]
    assert stack.acme.ok("GET", f"/vcdns/{vcdn['id']}/operations", params={"limit": 1})


def test_a_marker_of_another_tenant_is_refused_and_operations_page_too(stack):
    vcdn = active(stack, "paged")
    refused = stack.globex.call("GET", "/vcdns", params={"marker": vcdn["id"]})
    assert refused.status_code == 400 and refused.json()["error"]["field"] == "marker"
    patched(stack, vcdn, {"regions": [{"name": "eu-west", "demand": 50}]})
    first = stack.acme.ok("GET", f"/vcdns/{vcdn['id']}/operations", params={"limit": 1})
    assert [o["type"] for o in first["operations"]] == ["INSTANTIATE"] and first["next"]
    rest = stack.acme.ok("GET", f"/vcdns/{vcdn['id']}/operations",
                         params={"marker": first["next"]})
    assert [o["type"] for o in rest["operations"]] == ["UPDATE"] and rest["next"] is None


# -- purge and prefetch ----------------------------------------------------------------------

def test_escapes_of_control_characters_and_dot_segments_are_refused_and_write_nothing(stack):
    vcdn = active(stack, "escaped")
    before = stack.acme.ok("GET", f"/vcdns/{vcdn['id']}/operations")["operations"]
    for kind, body, field in (("invalidations", {"paths": ["/x%0a"]}, "paths[0]"),
                              ("invalidations", {"paths": ["/ok", "/x%00"]}, "paths[1]"),
                              ("invalidations", {"prefixes": ["/%2e%2e/x"]}, "prefixes[0]"),
                              ("prefetches", {"paths": ["/x%0D%0AHost:%20y"]}, "paths[0]"),
                              ("prefetches", {"paths": ["/a/%2E%2E/b"]}, "paths[0]")):
        refused = stack.acme.call("POST", f"/vcdns/{vcdn['id']}/{kind}", json=body)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["field"] == field
    assert stack.acme.ok("GET", f"/vcdns/{vcdn['id']}/operations")["operations"] == before
    accepted = stack.acme.ok("POST", f"/vcdns/{vcdn['id']}/invalidations", 202,
                             json={"paths": ["/caf%C3%A9%20au%20lait"]})
    assert stack.acme.wait(accepted["operation"]["id"])["state"] == "COMPLETED"


# -- ETag and If-Match ------------------------------------------------------------------------

def test_etags_guard_changes_and_deletes(stack):
    vcdn = active(stack, "guarded")
    shown = stack.acme.call("GET", f"/vcdns/{vcdn['id']}")
    etag = shown.headers["ETag"]
    assert etag == f'"{vcdn["revision"]}"'
    change = {"lease": {"end": "2096-01-01T00:00:00Z"}}
    for stale in ('"999"', 'W/"999"', '"0", "998"'):
        refused = stack.acme.call("PATCH", f"/vcdns/{vcdn['id']}", json=change,
                                  headers={"If-Match": stale})
        assert refused.status_code == 412, refused.text
        assert refused.json()["error"]["field"] == "If-Match"
        assert "GET it again" in refused.json()["error"]["message"]
    # the current ETag made weak: RFC 9110's strong comparison refuses it, saying why
    for weak in (f"W/{etag}", f'"999", W/{etag}'):
        refused = stack.acme.call("PATCH", f"/vcdns/{vcdn['id']}", json=change,
                                  headers={"If-Match": weak})
        assert refused.status_code == 412, refused.text
        message = refused.json()["error"]["message"]
        assert "changed" not in message and "strongly" in message and f"W/{etag}" in message
        assert f"as the API gave it, {etag}" in message
    malformed = stack.acme.call("PATCH", f"/vcdns/{vcdn['id']}", json=change,
                                headers={"If-Match": '"3'})
    assert malformed.status_code == 400 and malformed.json()["error"]["field"] == "If-Match"
    accepted = stack.acme.call("PATCH", f"/vcdns/{vcdn['id']}", json=change,
                               headers={"If-Match": f'"1", {etag}'})
    assert accepted.status_code == 202, accepted.text
    new_etag = accepted.headers["ETag"]
    assert new_etag == f'"{vcdn["revision"] + 1}"' != etag
    assert stack.acme.call("GET", f"/vcdns/{vcdn['id']}").headers["ETag"] == new_etag
    assert stack.acme.call("PATCH", f"/vcdns/{vcdn['id']}", json=change,
                           headers={"If-Match": "*"}).status_code == 202
    assert stack.acme.call("DELETE", f"/vcdns/{vcdn['id']}",
                           headers={"If-Match": new_etag}).status_code == 412
    current = stack.acme.call("GET", f"/vcdns/{vcdn['id']}").headers["ETag"]
    ended = stack.acme.call("DELETE", f"/vcdns/{vcdn['id']}", headers={"If-Match": current})
    assert ended.status_code == 202, ended.text


def test_of_two_changes_with_the_same_etag_one_wins_and_one_is_refused(stack):
    vcdn = active(stack, "race")
    for round_ in range(3):
        etag = stack.acme.call("GET", f"/vcdns/{vcdn['id']}").headers["ETag"]
        barrier, statuses = threading.Barrier(2), []

        def change(hour):
            barrier.wait()
            statuses.append(stack.acme.call(
                "PATCH", f"/vcdns/{vcdn['id']}", headers={"If-Match": etag},
                json={"lease": {"end": f"2094-01-01T{hour:02d}:00:00Z"}}).status_code)
        threads = [threading.Thread(target=change, args=(2 * round_ + i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(statuses) == [202, 412], statuses


def test_a_change_by_the_instance_manager_changes_the_etag(stack):
    vcdn = active(stack, "healed")
    etag = stack.acme.call("GET", f"/vcdns/{vcdn['id']}").headers["ETag"]
    accepted = stack.client(SoClient).heal(vcdn["id"], "eu-west-cache-0", reason="test")
    assert stack.acme.wait(accepted.operation.id)["state"] == "COMPLETED"
    assert stack.acme.call("GET", f"/vcdns/{vcdn['id']}").headers["ETag"] != etag
    refused = stack.acme.call("PATCH", f"/vcdns/{vcdn['id']}", headers={"If-Match": etag},
                              json={"origin": NEW_ORIGIN})
    assert refused.status_code == 412


# -- the CLI's tables -------------------------------------------------------------------------

def test_the_cli_tables_of_every_flavor(stack):
    """quote, create, show, list and update as people see them (not --json), for each
    shipped flavor (qoe-video's figures are floats)."""
    registered = stack.operator.call("POST", "/templates", data=QOE_TEMPLATE.read_bytes(),
                                     headers={"Content-Type": "application/yaml"})
    assert registered.status_code in (201, 409), registered.text
    token = stack.acme.token

    def table(*args):
        shown = invoke(list(args), {**stack.env, "COLUMNS": "300"}, token)
        assert shown.exit_code == 0, shown.output
        return shown.stdout

    for flavor in ("static", "qoe-video"):
        name = f"cli-{flavor}"
        request = ["--flavor", flavor, "--origin", "http://o.example",
                   "--region", "eu-west:1000:4.0", "--lease-hours", "24"]
        quoted = table("vcdn", "quote", *request)  # a quote needs no name
        assert "Quote (nothing reserved)" in quoted and "eu-west" in quoted
        created = table("vcdn", "create", "--name", name, *request, "--wait")
        assert "ACTIVE" in created and name in created
        vcdn_id = next(v["id"] for v in stack.acme.ok("GET", "/vcdns", params={"name": name})
                       ["vcdns"])
        shown = table("vcdn", "show", vcdn_id)
        assert "http://o.example:80" in shown and "ETag" in shown and "eu-west" in shown
        # the same vCPUs, said the same way, in the quote and the vCDN it became
        [region] = stack.acme.ok("GET", f"/vcdns/{vcdn_id}")["regions"]
        assert 0 < region["cache_vcpus"] < region["vcpus"]  # a balancer and a DNS server too
        said = (f"{region['cache_vcpus']} in caches, {region['vcpus']} in all (caches, "
                "balancers, DNS)")
        for text in (quoted, shown):
            assert said in text and "Cache vCPUs" in text and "All vCPUs" in text, text
        listed = table("vcdn", "list", "--name", name)
        assert vcdn_id in listed and flavor in listed
        updated = table("vcdn", "update", vcdn_id, "--origin", NEW_ORIGIN, "--add-region",
                        "us-east:500", "--lease-end", "2093-01-01T00:00:00Z", "--wait")
        assert NEW_ORIGIN in updated and "us-east" in updated and "2093-01-01" in updated
        assert "MOS >= 3.6" in updated  # the added region's default quality
        table("vcdn", "delete", vcdn_id, "--wait")
        assert vcdn_id not in table("vcdn", "list", "--name", name)
        assert vcdn_id in table("vcdn", "list", "--name", name, "--all", "--state", "deleted")
