"""Purge and prefetch: requests checked strictly, the mechanism on a real nginx cache on
loopback (keys as the cache rules build them, prefixes from the keys log), and the
operations through the customer API on the local driver: a purged path is a MISS on
every cache, a prefix purge spares other paths, a prefetch makes the first fetch a HIT."""
import pytest

from cdnaas.common import caching, errors
from cdnaas.common.clients import RoClient
from cdnaas.ro.vim import purge
from cdnaas.ro.vim.local import clients, network
from tests.support.api import vcdn_body
from tests.test_cache_rules import loopback_cache, stack  # noqa: F401 (a module's own stack)
from tests.test_cli import invoke, invoke_json
from tests.test_vnf_rendering import status_from

HOSTILE_PATHS = ["a", "/a b", "/a\nb", "/a\r\nHost: x", "/a\x00", "/a;b", "/a{b", "/$uri",
                 '/a"', "/a'", "/../etc/passwd", "/a/./b", "/a//b", "/é", "/%zz", "/a#b",
                 "/" + "a" * 1100, 7, None, ["/a"],
                 # escapes are decoded before the last checks (issue 26)
                 "/x%0a", "/x%0D%0AHost:%20y", "/x%00", "/x%7f", "/x%c2%85", "/%2e%2e/x",
                 "/a/%2E/b", "/a%2f..%2fb", "/a%2F%2Fb", "/x%ff", "/x?a=%0a", "/x?a=%00"]


# --- validation -------------------------------------------------------------------------

@pytest.mark.parametrize("path", HOSTILE_PATHS)
def test_hostile_paths_are_refused_naming_the_field(path):
    for check, body, field in ((caching.invalidation, {"paths": ["/ok", path]}, "paths[1]"),
                               (caching.invalidation, {"prefixes": [path]}, "prefixes[0]"),
                               (caching.prefetch, {"paths": [path]}, "paths[0]")):
        with pytest.raises(errors.BadRequest) as caught:
            check(body)
        assert caught.value.field == field


@pytest.mark.parametrize("body,field", [
    ({}, "paths"), ({"paths": [], "prefixes": []}, "paths"), ({"paths": "/a"}, "paths"),
    ({"paths": ["/a"] * 1001}, "paths"), ({"prefixes": ["/a"] * 101}, "prefixes"),
    ({"prefixes": ["/a?x=1"]}, "prefixes[0]"), ({"paths": ["/a"], "all": True}, "body.all"),
])
def test_bad_invalidations_are_refused(body, field):
    with pytest.raises(errors.BadRequest) as caught:
        caching.invalidation(body)
    assert caught.value.field == field


def test_good_requests_pass_once_each():
    assert caching.invalidation({"paths": ["/a?v=1&x=%22", "/a?v=1&x=%22", "/b%20c"]}) == \
        {"paths": ["/a?v=1&x=%22", "/b%20c"], "prefixes": []}
    assert caching.prefetch({"paths": ["/video/hd/seg-1.m4s"]}) == \
        {"paths": ["/video/hd/seg-1.m4s"]}
    # escapes of printable UTF-8 text pass and are kept as given; dots inside a name too
    escaped = ["/caf%C3%A9", "/a%2Eb/..c/x..", "/q?x=%3F%26&y=%2e%2e"]
    assert caching.prefetch({"paths": escaped}) == {"paths": escaped}


@pytest.mark.parametrize("path,words", [
    ("/x%0a", "control character U+000A"), ("/x%00", "control character U+0000"),
    ("/%2e%2e/x", ". or .. segment"), ("/a%2F%2Fb", "empty segment"), ("/x%ff", "UTF-8"),
])
def test_a_refusal_says_what_the_escapes_decode_to(path, words):
    with pytest.raises(errors.BadRequest) as caught:
        caching.invalidation({"paths": [path]})
    assert words in str(caught.value) and caught.value.field == "paths[0]"


# --- the mechanism on one real cache ------------------------------------------------------

def test_purges_follow_the_cache_key_and_prefixes_the_keys_log(tmp_path):
    with loopback_cache(tmp_path, {"query_string": ["v"]}) as cache:
        address, port = "127.0.0.1", cache.management
        for path in ("/plain/a?v=1&utm=x", "/plain/sp%20ace", "/plain/q?v=%22", "/objects/small"):
            assert [cache.get(path), cache.get(path)] == ["MISS", "HIT"]
        # another request of the same object: the same key (v=1), whatever else it carries
        assert purge.invalidate(address, ["/plain/a?utm=y&v=1", "/plain/none"], [], port) == (2, 1)
        assert cache.get("/plain/a?v=1") == "MISS"
        # a prefix: every logged fetch under it, escapes and query strings as requested (4
        # fetches from the origin, two of them of the one object /plain/a?v=1: 3 objects)
        assert purge.invalidate(address, [], ["/plain/"], port) == (4, 3)
        assert [cache.get("/plain/sp%20ace"), cache.get("/plain/q?v=%22"),
                cache.get("/objects/small")] == ["MISS", "MISS", "HIT"]
        assert purge.prefetch(address, ["/objects/chunk-low", "/nothing"], port) == \
            (2, 1, ["/nothing: 404"])
        assert cache.get("/objects/chunk-low") == "HIT"


def test_purging_and_prefetching_are_for_the_management_side_only(tmp_path):
    with loopback_cache(tmp_path) as cache:
        cache.get("/objects/small")
        management = f"http://127.0.0.1:{cache.management}"
        for path in ("/cdnaas/purge/objects/small", "/cdnaas/prefetch/objects/small",
                     "/cdnaas/keys.log"):
            assert status_from("127.0.0.2", management + path) == "403"  # anyone else
        public = purge.invalidate("127.0.0.1", ["/objects/small"], [], cache.port)
        assert public == (1, 0)  # the public listener has no purge location: a 404, not a purge
        assert cache.get("/objects/small") == "HIT"


# --- through the API, on the local driver -------------------------------------------------

@pytest.fixture(scope="module")
def vcdn(stack, origin):
    body = vcdn_body("purged", (("eu-west", 1000), ("us-east", 1000)),
                     origin=f"http://127.0.0.1:{origin.server_address[1]}")
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
    assert stack.acme.wait(accepted["operation"]["id"], 120)["state"] == "COMPLETED"
    deployment = stack.client(RoClient).get_deployment(accepted["vcdn"]["id"])
    caches = [v for v in deployment["vnfs"] if v["role"] == "cache"]
    assert len(caches) == 4
    yield {"id": accepted["vcdn"]["id"], "caches": caches}
    stack.acme.call("DELETE", f"/vcdns/{accepted['vcdn']['id']}")


def fetch_everywhere(vcdn, path):
    """X-Cache-Status of ``path`` fetched straight from each cache by a client of its region."""
    seen = {}
    for region in ("eu-west", "us-east"):
        _bridge, subnet = network.find_bridge(vcdn["id"], region)
        address = subnet[200]  # on the caches' own subnet: no route needed
        with clients.client(vcdn["id"], region, address) as viewer:
            for cache in (c for c in vcdn["caches"] if c["region"] == region):
                status, headers, _ = viewer.fetch(f"http://{cache['address']}{path}")
                assert status == 200, (cache, path, status)
                seen[cache["name"]] = headers["x-cache-status"]
    return seen


def run(stack, vcdn, kind, body):
    response = stack.acme.call("POST", f"/vcdns/{vcdn['id']}/{kind}", json=body)
    assert response.status_code == 202, response.text
    assert response.headers["Location"] == f"/api/v1/operations/{response.json()['operation']['id']}"
    operation = stack.acme.wait(response.json()["operation"]["id"], 60)
    assert operation["state"] == "COMPLETED", operation
    assert operation["request"]["paths"] == body.get("paths", [])
    [step] = operation["steps"]
    assert sorted(c["name"] for c in step["detail"]) == sorted(c["name"] for c in vcdn["caches"])
    assert {c["state"] for c in step["detail"]} == {"COMPLETED"}
    return step


def test_a_purged_path_is_a_miss_on_every_cache(stack, vcdn):
    path = "/objects/chunk-hd"
    assert set(fetch_everywhere(vcdn, path).values()) == {"MISS"}
    assert set(fetch_everywhere(vcdn, path).values()) == {"HIT"}  # open files cached too
    step = run(stack, vcdn, "invalidations", {"paths": [path]})
    assert [c["done"] for c in step["detail"]] == [1, 1, 1, 1]
    assert set(fetch_everywhere(vcdn, path).values()) == {"MISS"}


def test_a_prefix_purge_spares_other_paths(stack, vcdn):
    video = ["/video/hd/seg-7.m4s", "/video/low/seg-8.m4s", "/video/low/seg-8.m4s?t=1"]
    other = "/objects/chunk-low"
    for path in video + [other]:
        fetch_everywhere(vcdn, path)  # just fetched: the purge must still see them
    step = run(stack, vcdn, "invalidations", {"prefixes": ["/video/"]})
    assert {c["done"] for c in step["detail"]} == {3}
    for path in video:
        assert set(fetch_everywhere(vcdn, path).values()) == {"MISS"}, path
    assert set(fetch_everywhere(vcdn, other).values()) == {"HIT"}


def test_a_prefetch_makes_the_first_fetch_a_hit_everywhere(stack, vcdn):
    path = "/video/hd/seg-9.m4s"
    step = run(stack, vcdn, "prefetches", {"paths": [path]})
    assert [c["done"] for c in step["detail"]] == [1, 1, 1, 1]
    assert set(fetch_everywhere(vcdn, path).values()) == {"HIT"}


@pytest.mark.parametrize("kind,body", [
    ("invalidations", {"paths": ["/a\r\nX: y"]}), ("invalidations", {"paths": ["/a b"]}),
    ("invalidations", {"prefixes": ["/../"]}), ("invalidations", {}),
    ("invalidations", {"paths": ["/a"] * 1001}), ("invalidations", {"paths": [7]}),
    ("invalidations", {"paths": ["/" + "x" * 2000]}), ("prefetches", {"paths": []}),
    ("prefetches", {"paths": ["/é"]}), ("prefetches", {"paths": ["/a"], "more": 1}),
])
def test_hostile_bodies_are_400s(stack, vcdn, kind, body):
    response = stack.acme.call("POST", f"/vcdns/{vcdn['id']}/{kind}", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["field"]


def test_another_tenants_vcdn_is_not_found(stack, vcdn):
    for kind, body in (("invalidations", {"paths": ["/a"]}), ("prefetches", {"paths": ["/a"]})):
        response = stack.globex.call("POST", f"/vcdns/{vcdn['id']}/{kind}", json=body)
        assert response.status_code == 404, response.text


def test_a_vcdn_that_is_not_active_answers_409(stack, origin):
    body = vcdn_body("later", origin=f"http://127.0.0.1:{origin.server_address[1]}",
                     lease={"start": "2098-01-01T00:00:00Z", "end": "2099-01-01T00:00:00Z"})
    scheduled = stack.acme.ok("POST", "/vcdns", 202, json=body)["vcdn"]
    response = stack.acme.call("POST", f"/vcdns/{scheduled['id']}/invalidations",
                               json={"paths": ["/a"]})
    assert response.status_code == 409 and "ACTIVE" in response.json()["error"]["message"]
    stack.acme.ok("DELETE", f"/vcdns/{scheduled['id']}", 202)


def test_the_cli_purges_prefetches_and_sets_cache_rules(stack, vcdn, tmp_path):
    env = {"CDNAAS_CONFIG": str(tmp_path / "config.yaml"), "CDNAAS_API_URL": stack.urls["api"]}
    token = stack.acme.token
    purged = invoke_json(["vcdn", "purge", vcdn["id"], "--path", "/objects/small",
                          "--prefix", "/video/", "--wait"], env, token)
    assert purged["type"] == "INVALIDATE" and purged["state"] == "COMPLETED"
    assert len(purged["steps"][0]["detail"]) == 4
    fetched = invoke_json(["vcdn", "prefetch", vcdn["id"], "--path", "/objects/small",
                           "--wait"], env, token)
    assert fetched["type"] == "PREFETCH" and fetched["state"] == "COMPLETED"
    assert set(fetch_everywhere(vcdn, "/objects/small").values()) == {"HIT"}
    table = invoke(["vcdn", "purge", vcdn["id"], "--path", "/objects/small", "--wait"], env,
                   token)
    assert table.exit_code == 0 and "eu-west-cache-0" in table.output, table.output
    assert invoke(["vcdn", "purge", vcdn["id"]], env, token).exit_code == 2

    rules = tmp_path / "rules.yaml"
    rules.write_text("query_string: ignore\nttl:\n  - {match: prefix, path: /video/, ttl: 1h}\n")
    invoke_json(["vcdn", "update", vcdn["id"], "--cache-rules", str(rules), "--wait"], env, token)
    shown = invoke_json(["vcdn", "show", vcdn["id"]], env, token)
    assert shown["cache_rules"]["query_string"] == "ignore"
    assert shown["cache_rules"]["ttl"] == [{"match": "prefix", "path": "/video/", "ttl": "1h"}]
    rules.write_text("query_string: [x\n")
    assert invoke(["vcdn", "update", vcdn["id"], "--cache-rules", str(rules)], env,
                  token).exit_code == 2
