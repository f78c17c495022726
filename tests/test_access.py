"""Access control (delivery option ``access``): checked strictly (400 naming the field),
secrets sealed and masked, signed URLs and cookies verified by njs in real nginx caches
(valid, expired, tampered, other path, other prefix, other client, cookie, two keys), the
token out of the cache key, viewer prefixes allowed or denied through the balancer's
X-Forwarded-For, regions refused, rate limits (429); on the local driver, a vCDN signs
URLs through the API and rotates its keys under load without losing a request."""
import concurrent.futures
import contextlib
import os
import stat
import threading
import time

import pytest
import requests

from cdnaas.common import errors
from cdnaas.common.ports import free_loopback_ports
from cdnaas.common.sig import Origin
from cdnaas.delivery import access
from cdnaas.origin import server as origin_server
from cdnaas.ro.vim.local import clients
from cdnaas.vnf import cache, endpoints, fields, options, templates, tools
from cdnaas.vnf.balancer import lb_config
from tests.support.api import vcdn_body
from tests.test_cache_rules import stack  # noqa: F401  (the module's local-driver stack)
from tests.test_cli import invoke, invoke_json
from tests.test_vnf_rendering import cache_values, lb_values, need, running

SECRET_A = "secret-a-" + "a" * 32
SECRET_B = "secret-b-" + "b" * 32
SECRET_C = "secret-c-" + "c" * 32


@pytest.fixture(autouse=True)
def secret_key(tmp_path, monkeypatch):
    """The Fernet key file sealing the keys' secrets (RO's secret key file)."""
    monkeypatch.setenv("CDNAAS_SECRET_KEY_FILE", str(tmp_path / "secrets.key"))


def signed(paths=("/",), keys=(("a", SECRET_A),)):
    return {"signed_urls": {"paths": list(paths),
                            "keys": [{"id": k, "secret": s} for k, s in keys]}}


# --- validation -------------------------------------------------------------------------

def refused(value, field):
    with pytest.raises(errors.BadRequest) as caught:
        access.check(value, "access")
    assert caught.value.field == field, caught.value.message
    return caught.value.message


@pytest.mark.parametrize("value,field", [
    ("on", "access"),
    ({"surprise": 1}, "access.surprise"),
    ({"signed_urls": {"keys": []}}, "access.signed_urls.keys"),
    ({"signed_urls": {"keys": [{"id": "a", "secret": SECRET_A}] * 3}}, "access.signed_urls.keys"),
    ({"signed_urls": {"keys": [{"id": "a", "secret": "short"}]}},
     "access.signed_urls.keys[0].secret"),
    ({"signed_urls": {"keys": [{"id": "a", "secret": "has a space" * 3}]}},
     "access.signed_urls.keys[0].secret"),
    ({"signed_urls": {"keys": [{"id": "a;b", "secret": SECRET_A}]}},
     "access.signed_urls.keys[0].id"),
    ({"signed_urls": {"keys": [{"id": "a"}]}}, "access.signed_urls.keys[0].secret"),
    ({"signed_urls": {"keys": [{"id": "a", "sealed": "forged"}]}},
     "access.signed_urls.keys[0].sealed"),
    ({"signed_urls": {"keys": [{"id": "a", "secret": SECRET_A},
                               {"id": "a", "secret": SECRET_B}]}},
     "access.signed_urls.keys[1].id"),
    ({"signed_urls": {"paths": ["/a;b"], "keys": [{"id": "a", "secret": SECRET_A}]}},
     "access.signed_urls.paths[0]"),
    ({"signed_urls": {"paths": ["/../etc"], "keys": [{"id": "a", "secret": SECRET_A}]}},
     "access.signed_urls.paths[0]"),
    ({"signed_urls": {"paths": [], "keys": [{"id": "a", "secret": SECRET_A}]}},
     "access.signed_urls.paths"),
    ({"signed_urls": {"enabled": "yes"}}, "access.signed_urls.enabled"),
    ({"regions": {"allow": ["EU West"]}}, "access.regions.allow[0]"),
    ({"regions": {"allow": "eu-west"}}, "access.regions.allow"),
    ({"clients": {"allow": ["10.0.0.0/33"]}}, "access.clients.allow[0]"),
    ({"clients": {"deny": ["10.0.0.1; allow all"]}}, "access.clients.deny[0]"),
    ({"clients": {"deny": ["fe80::1%eth0/64"]}}, "access.clients.deny[0]"),
    ({"clients": {"deny": [f"10.{i // 256}.{i % 256}.0/24" for i in range(257)]}},
     "access.clients.deny"),
    ({"clients": {"allow": []}}, "access.clients.allow"),
    ({"clients": {"allow": ["10.0.0.0/8"], "deny": ["10.1.0.0/16"]}}, "access.clients"),
    ({"rate_limit": {"requests_per_second": 0}}, "access.rate_limit.requests_per_second"),
    ({"rate_limit": {"requests_per_second": "5r/s"}}, "access.rate_limit.requests_per_second"),
    ({"rate_limit": {"requests_per_second": 5, "burst": -1}}, "access.rate_limit.burst"),
])
def test_each_refusal_names_its_field(value, field):
    refused(value, field)


def test_secrets_are_sealed_masked_and_never_rendered():
    stored = access.check({**signed(keys=(("a", SECRET_A), ("b", SECRET_B))),
                           "clients": {"deny": ["10.9.8.7/16", "2001:db8::1/48"]}})
    assert SECRET_A not in str(stored) and SECRET_B not in str(stored)
    assert [k["id"] for k in stored["signed_urls"]["keys"]] == ["a", "b"]
    assert stored["clients"] == {"deny": ["10.9.0.0/16", "2001:db8::/48"]}
    assert access.check(stored) == stored  # idempotent on its own output (RO checks again)
    shown = access.view(stored)["signed_urls"]["keys"]
    assert shown == [{"id": "a", "secret": access.MASK}, {"id": "b", "secret": access.MASK}]
    assert SECRET_A not in str(access.render(stored))
    files = {name: text for name, text, _mode in access.vnf_files({"access": stored})}
    assert SECRET_A in files[access.KEYS_FILE] and SECRET_B in files[access.KEYS_FILE]
    assert access.check({}) is None and access.check({"signed_urls": {"enabled": False}}) is None


def test_a_new_key_changes_the_config_so_caches_reload(tmp_path):
    one = {"access": access.check(signed())}
    two = {"access": access.check(signed(keys=(("a", SECRET_A), ("b", SECRET_B))))}
    texts = [cache.cache_config(**cache_values(tmp_path, service=s)) for s in (one, two)]
    assert texts[0] != texts[1]
    assert SECRET_A not in texts[1]


def test_the_example_flavor_template_enforces_access_too(tmp_path):
    from cdnaas.common import config
    folder = config.REPO_ROOT / "examples/cdnaas-small-objects/cdnaas_small_objects/templates"
    flavor = templates.FlavorConfig(
        template="nginx-small-objects.conf.j2", folders=(str(folder),),
        extra={"keys_zone_mb": 16, "cache_valid": "1m", "asset_max_age": "7d",
               "gzip_types": ["text/css"]})
    service = {"access": access.check({**signed(), "rate_limit": {"requests_per_second": 9}})}
    access.write_vnf_files(tmp_path, access.vnf_files(service))
    text = cache.cache_config(**cache_values(tmp_path, service=service, flavor=flavor))
    assert "js_set $cdnaas_access_verdict" in text and "limit_req zone=cdnaas_rate" in text
    assert "proxy_cache_key $uri$cdnaas_key_args;" in text
    need("nginx")
    tools.check_nginx(text, str(tmp_path))


def test_a_flavor_template_without_access_control_is_refused(tmp_path):
    stock = (templates.TEMPLATES_DIR / templates.CACHE_TEMPLATE).read_text()
    bare = "\n".join(line for line in stock.splitlines() if "access_control" not in line)
    (tmp_path / "nginx-bare.conf.j2").write_text(bare + "\n")
    flavor = templates.FlavorConfig(template="nginx-bare.conf.j2", folders=(str(tmp_path),))
    service = {"access": access.check({"clients": {"deny": ["10.9.0.0/16"]}})}
    with pytest.raises(fields.ConfigError, match="access control"):
        cache.cache_config(**cache_values(tmp_path, service=service, flavor=flavor))
    cache.cache_config(**cache_values(tmp_path, flavor=flavor))  # none asked: fine


def test_a_key_the_renderer_cannot_open_is_a_config_error():
    stored = access.check(signed())
    forged = {**stored, "signed_urls": {**stored["signed_urls"], "keys": [
        {"id": "a", "sealed": "gAAAAA" + "x" * 80}]}}
    with pytest.raises(fields.ConfigError, match="sealed"):
        options.access_files({"access": forged})


def test_the_key_files_are_written_root_only_and_removed_with_the_option(tmp_path):
    access.write_vnf_files(tmp_path, access.vnf_files({"access": access.check(signed())}))
    keys = tmp_path / access.KEYS_FILE
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600
    access.write_vnf_files(tmp_path, [])
    assert not keys.exists() and not (tmp_path / access.SCRIPT_FILE).exists()


def test_signing_refuses_what_it_cannot_sign():
    stored = access.check(signed(paths=["/v/"]))
    with pytest.raises(errors.BadRequest) as caught:
        access.sign(None, {"path": "/v/a"})
    assert caught.value.field == "access"
    for body, field in [({"path": "v"}, "path"), ({"path": "/v/a", "prefix": "/w/"}, "prefix"),
                        ({"path": "/v/a", "client": "2001:db8::/32"}, "client"),
                        ({"path": "/v/a", "client": "10.0.0.300/24"}, "client"),
                        ({"path": "/v/a", "key_id": "z"}, "key_id"),
                        ({"path": "/v/a", "expires_in": 0}, "expires_in")]:
        with pytest.raises(errors.BadRequest) as caught:
            access.sign(stored, body)
        assert caught.value.field == field, body


def test_openstack_caches_get_the_files_root_only():
    from tests.test_comforts_unit import openstack_sig
    from cdnaas.ro.vim.openstack import userdata
    import dataclasses
    import yaml
    sig = openstack_sig()
    sig = dataclasses.replace(sig, service={"access": access.check(signed())})
    [cache] = [v for v in sig.vnfs if v.role == "cache"][:1]
    text = userdata.cache(sig, cache, "10.20.0.5", "192.0.2.10", balancers=["10.20.0.0/24"])
    files = {f["path"]: f for f in yaml.safe_load(text)["write_files"]}
    keys = files[f"{userdata.PREFIX}/{access.KEYS_FILE}"]
    assert keys["permissions"] == "0600" and SECRET_A in keys["content"]
    nginx = files[f"{userdata.CONF_DIR}/nginx.conf"]["content"]
    assert "set_real_ip_from 10.20.0.0/24;" in nginx and SECRET_A not in nginx


# --- real nginx on loopback ---------------------------------------------------------------

#: the cache's address: its "balancer" (these tests) connects from 127.0.0.1
CACHE_ADDRESS = "127.0.0.3"


class AccessCache:
    """The sample origin and one cache nginx with the access ``option`` on loopback, behind
    a "balancer" at 127.0.0.1 (the requests' X-Forwarded-For names the viewer)."""

    def __init__(self, stack, tmp_path, option, region="eu-west"):
        self.origin, thread = origin_server.serve_in_thread("127.0.0.1", 0)
        stack.callback(thread.join, 5)
        stack.callback(self.origin.server_close)
        stack.callback(self.origin.shutdown)
        self.port, self.management = free_loopback_ports(2)
        self.stored = access.check(option)
        prefix = tmp_path / "cache"
        prefix.mkdir(parents=True)
        service = {"access": self.stored}
        access.write_vnf_files(prefix, access.vnf_files(service))
        text = cache.cache_config(
            name="loop-cache", workers=1, listen_address=CACHE_ADDRESS, listen_port=self.port,
            origin=Origin("http", "origin.example.com", self.origin.server_address[1]),
            origin_address="127.0.0.1", prefix_dir=str(prefix), daemon=False,
            management_sources=["127.0.0.1"], management_port=self.management, user="root",
            service=service, region=region, real_ip_from=["127.0.0.1"])
        tools.check_nginx(text, str(prefix))
        (prefix / "nginx.conf").write_text(text)
        stack.enter_context(running(
            ["nginx", "-p", f"{prefix}/", "-c", str(prefix / "nginx.conf")], "nginx",
            lambda: requests.get(f"http://{CACHE_ADDRESS}:{self.management}/nginx_status",
                                 timeout=1).ok))

    def get(self, path, viewer="10.1.0.40", cookie=None):
        headers = {"X-Forwarded-For": f"203.0.113.9, {viewer}"}
        if cookie:
            headers["Cookie"] = f"{access.COOKIE}={cookie}"
        return requests.get(f"http://{CACHE_ADDRESS}:{self.port}{path}", headers=headers,
                            timeout=10)

    def status(self, path, **kwargs):
        return self.get(path, **kwargs).status_code

    def sign(self, path, **body):
        token = access.sign(self.stored, {"path": path, **body})
        return f"{path}?{token['query']}"


@contextlib.contextmanager
def access_cache(tmp_path, option, **kwargs):
    need("nginx", root=True)
    if not os.path.exists(endpoints.JS_MODULE):
        pytest.skip("njs (libnginx-mod-http-js) is not installed: run scripts/setup")
    with contextlib.ExitStack() as stack:
        yield AccessCache(stack, tmp_path, option, **kwargs)


def test_signed_urls_are_verified_strictly(tmp_path):
    with access_cache(tmp_path, signed(paths=["/plain/v/"])) as cache:
        good = cache.sign("/plain/v/a")
        assert cache.status(good) == 200
        assert cache.status("/plain/v/a") == 403  # no token
        assert cache.status("/plain/free") == 200  # not a protected path
        assert cache.status(good.replace("/v/a", "/v/b")) == 403  # other path
        assert cache.status(good[:-2] + ("AA" if not good.endswith("AA") else "BB")) == 403
        expires = int(good.split("exp=")[1].split("&")[0])
        assert cache.status(good.replace(f"exp={expires}", f"exp={expires + 1}")) == 403
        assert cache.status(good.replace("kid=a", "kid=z")) == 403  # unknown key
        assert cache.status(good + "&sig=x") == 403  # a field twice
        assert cache.status(good.replace("sig=", "sig=%zz")) == 403  # malformed escape
        assert cache.status(cache.sign("/plain/v/a", expires_in=1)) == 200
        past = access.token(SECRET_A, "a", "/plain/v/a", int(time.time()) - 1)
        assert cache.status(f"/plain/v/a?{past}") == 403  # expired
        forged = access.token(SECRET_B, "a", "/plain/v/a", int(time.time()) + 60)
        assert cache.status(f"/plain/v/a?{forged}") == 403  # another secret


def test_a_prefix_token_and_cookie_cover_a_folder_and_a_client_prefix_binds(tmp_path):
    with access_cache(tmp_path, signed(paths=["/plain/"])) as cache:
        folder = cache.sign("/plain/show/index.m3u8", prefix="/plain/show/")
        assert cache.status(folder) == 200
        query = folder.split("?", 1)[1]
        assert cache.status(f"/plain/show/seg-1.ts?{query}") == 200
        assert cache.status(f"/plain/other/seg-1.ts?{query}") == 403  # other prefix
        assert cache.status(f"/plain/show/seg-2.ts?{query.replace('show', 'other')}") == 403
        assert cache.status("/plain/show/seg-3.ts", cookie=query) == 200  # cookie
        assert cache.status("/plain/other/seg-3.ts", cookie=query) == 403
        # a path token cannot be replayed as a prefix token of the same text
        path_only = cache.sign("/plain/show/").split("?", 1)[1]
        assert cache.status(f"/plain/show/x?{path_only}&prefix=/plain/show/") == 403
        bound = cache.sign("/plain/b", client="10.1.0.0/24")
        assert cache.status(bound, viewer="10.1.0.77") == 200
        assert cache.status(bound, viewer="10.2.0.77") == 403  # other client
        assert cache.status(bound.replace("10.1.0.0", "10.2.0.0"), viewer="10.2.0.77") == 403


def test_two_keys_verify_and_tokens_stay_out_of_the_cache_key(tmp_path):
    option = signed(paths=["/plain/"], keys=(("a", SECRET_A), ("b", SECRET_B)))
    with access_cache(tmp_path, option) as cache:
        first = cache.get(cache.sign("/plain/k", key_id="a"))
        second = cache.get(cache.sign("/plain/k", key_id="b", client="10.1.0.0/16"))
        assert [r.status_code for r in (first, second)] == [200, 200]
        assert [r.headers["X-Cache-Status"] for r in (first, second)] == ["MISS", "HIT"]
        assert cache.origin.stats()["/plain/k"] == 1
        with_args = cache.sign("/plain/q").replace("?", "?v=1&")
        other_args = cache.sign("/plain/q").replace("?", "?v=2&")
        assert [cache.get(with_args).headers["X-Cache-Status"],
                cache.get(other_args).headers["X-Cache-Status"]] == ["MISS", "MISS"]


def test_viewer_prefixes_are_allowed_or_denied_through_x_forwarded_for(tmp_path):
    with access_cache(tmp_path, {"clients": {"allow": ["10.1.0.0/24"]}}) as cache:
        assert cache.status("/plain/a", viewer="10.1.0.5") == 200
        assert cache.status("/plain/a", viewer="10.1.1.5") == 403
    with access_cache(tmp_path / "deny", {"clients": {"deny": ["10.1.0.0/24"]}}) as cache:
        assert cache.status("/plain/a", viewer="10.1.0.5") == 403
        assert cache.status("/plain/a", viewer="10.1.1.5") == 200


def test_a_region_not_allowed_answers_403(tmp_path):
    with access_cache(tmp_path, {"regions": {"allow": ["us-east"]}}) as cache:
        assert cache.status("/plain/a") == 403
    with access_cache(tmp_path / "allowed", {"regions": {"allow": ["eu-west"]}}) as cache:
        assert cache.status("/plain/a") == 200


def test_a_rate_limit_answers_429_past_the_burst_per_viewer(tmp_path):
    option = {"rate_limit": {"requests_per_second": 1, "burst": 3}}
    with access_cache(tmp_path, option) as cache:
        seen = [cache.status("/plain/r", viewer="10.1.0.5") for _ in range(8)]
        assert seen[:4] == [200] * 4 and 429 in seen[4:]
        assert cache.status("/plain/r", viewer="10.1.0.6") == 200  # another viewer


def test_a_signing_balancer_spreads_by_the_key_without_the_token(tmp_path):
    service = {"access": access.check(signed())}
    text = lb_config(**lb_values(tmp_path, service=service))
    assert "hash $uri consistent;" in text
    tools.check_nginx(text, str(tmp_path))


# --- the local driver -------------------------------------------------------------------

#: concurrent viewers (curl loops in one client namespace) signing requests during a rotation
VIEWERS = 40


def test_a_vcdn_signs_urls_and_rotates_keys_under_load_without_a_refusal(stack, origin,
                                                                        tmp_path):
    body = vcdn_body("guarded", origin=f"http://127.0.0.1:{origin.server_address[1]}")
    for hostile, field in [
            ({"clients": {"deny": ["10.0.0.0/8; allow all"]}}, "access.clients.deny[0]"),
            ({"signed_urls": {"keys": [{"id": "a", "secret": "short"}]}},
             "access.signed_urls.keys[0].secret"),
            ({"signed_urls": {"paths": ["/v/;"], "keys": [{"id": "a", "secret": SECRET_A}]}},
             "access.signed_urls.paths[0]"),
            ({"regions": {"allow": ["a b"]}}, "access.regions.allow[0]"),
            ({"rate_limit": {"requests_per_second": 0}}, "access.rate_limit.requests_per_second")]:
        bad = stack.acme.call("POST", "/vcdns", json={**body, "access": hostile})
        assert bad.status_code == 400, bad.text
        assert bad.json()["error"]["field"] == field, bad.json()
    assert not [v for v in stack.acme.ok("GET", "/vcdns")["vcdns"] if v["name"] == "guarded"]
    option = signed(paths=["/plain/"], keys=(("a", SECRET_A), ("b", SECRET_B)))
    accepted = stack.acme.ok("POST", "/vcdns", 202, json={**body, "access": option})
    assert stack.acme.wait(accepted["operation"]["id"], 90)["state"] == "COMPLETED"
    vcdn_id = accepted["vcdn"]["id"]
    vcdn = stack.acme.ok("GET", f"/vcdns/{vcdn_id}")
    assert vcdn["access"]["signed_urls"]["keys"][0] == {"id": "a", "secret": access.MASK}
    balancer = vcdn["regions"][0]["load_balancer"]

    def signed_url(path, **more):
        answer = stack.acme.ok("POST", f"/vcdns/{vcdn_id}/signed-urls",
                               json={"path": path, **more})
        return f"http://{balancer}{path}?{answer['query']}"

    refused_sign = stack.acme.call("POST", f"/vcdns/{vcdn_id}/signed-urls",
                                   json={"path": "/plain/a", "prefix": "/other/"})
    assert refused_sign.status_code == 400 and refused_sign.json()["error"]["field"] == "prefix"
    with clients.client(vcdn_id, "eu-west", "10.1.0.40") as viewer:
        assert viewer.fetch(signed_url("/plain/a"))[0] == 200
        assert viewer.fetch(f"http://{balancer}/plain/a")[0] == 403
        assert viewer.fetch(signed_url("/plain/a", client="10.1.0.40/32"))[0] == 200
        assert viewer.fetch(signed_url("/plain/a", client="10.9.0.0/16"))[0] == 403
        # rotation: tokens of key b keep working while a, b becomes b, c
        urls = [signed_url(f"/plain/rot-{i % 50}", key_id="b") for i in range(400)]
        done = threading.Event()
        seen = []  # (start, end, status) of every signed request of the load

        def viewer_loop(first):
            for index in range(first, first + 200):  # at most 200 requests per viewer
                if done.is_set():
                    return
                began = time.monotonic()
                status = viewer.fetch(urls[index % len(urls)], timeout=10)[0]
                seen.append((began, time.monotonic(), status))

        with concurrent.futures.ThreadPoolExecutor(VIEWERS) as pool:
            loops = [pool.submit(viewer_loop, n * 7) for n in range(VIEWERS)]
            try:
                time.sleep(2)
                patched = time.monotonic()
                rotation = signed(paths=["/plain/"], keys=(("b", SECRET_B), ("c", SECRET_C)))
                changed = stack.acme.ok("PATCH", f"/vcdns/{vcdn_id}", 202,
                                        json={"access": rotation})
                assert stack.acme.wait(changed["operation"]["id"], 60)["state"] == "COMPLETED"
                completed = time.monotonic()
                time.sleep(2)
            finally:
                done.set()
            for loop in loops:
                loop.result(60)
        statuses = [status for _, _, status in seen]
        during = sum(began < completed and ended > patched for began, ended, _ in seen)
        assert during and set(statuses) == {200}, {s: statuses.count(s) for s in set(statuses)}
        print(f"rotation under load: {len(seen)} signed requests from {VIEWERS} concurrent "
              f"viewers, {during} of them while the PATCH ran ({completed - patched:.1f} s), "
              f"{sum(s != 200 for s in statuses)} refused")
        assert viewer.fetch(signed_url("/plain/a", key_id="c"))[0] == 200
        env = {"CDNAAS_CONFIG": str(tmp_path / "config.yaml"),
               "CDNAAS_API_URL": stack.urls["api"]}
        made = invoke_json(["vcdn", "sign-url", vcdn_id, "/plain/cli/a", "--expires", "10m",
                            "--prefix", "/plain/cli/"], env, stack.acme.token)
        assert made["key_id"] == "c" and made["url"].endswith(made["query"])
        assert viewer.fetch(f"http://{balancer}/plain/cli/b",
                            headers=[f"Cookie: {access.COOKIE}={made['query']}"])[0] == 200
        assert invoke(["vcdn", "sign-url", vcdn_id, "/plain/a", "--expires", "1y"], env,
                      stack.acme.token).exit_code == 2
        other = stack.globex.call("POST", f"/vcdns/{vcdn_id}/signed-urls", json={"path": "/a"})
        assert other.status_code == 404
        old = access.token(SECRET_A, "a", "/plain/a", int(time.time()) + 60)
        assert viewer.fetch(f"http://{balancer}/plain/a?{old}")[0] == 403  # a is gone
    ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn_id}", 202)
    assert stack.acme.wait(ended["operation"]["id"], 60)["state"] == "COMPLETED"
