"""The vCDN's response rules (cdnaas.delivery.responses): checked strictly (400 naming
the field, nothing stored), rendered into a real nginx cache in front of the sample
origin (headers added and removed, CORS answers and preflights, custom error pages from
files, gzip and brotli that decode to the origin's bytes), carried by the OpenStack
user-data, and written by the local driver for a deployed vCDN."""
import base64
import contextlib
import gzip

import brotli
import pytest
import requests
import yaml

from cdnaas import delivery
from cdnaas.common.ports import free_loopback_ports
from cdnaas.common.sig import Origin, ServiceInstanceGraph
from cdnaas.delivery import responses
from cdnaas.origin import server as origin_server
from cdnaas.ro.vim.local import clients
from cdnaas.ro.vim.openstack import userdata
from cdnaas.vnf import options
from cdnaas.vnf.cache import cache_config
from cdnaas.vnf.fields import ConfigError
from tests.support.api import vcdn_body
from tests.support.delivery import assert_api_refuses, local_stack, refused_field, sample_origin
from tests.support.sigs import sample_sig
from tests.test_cli import invoke_json
from tests.test_comforts_unit import openstack_sig, rebuilt
from tests.test_vnf_rendering import need, start_nginx

PAGE = "<!doctype html><title>Not here</title><h1>Nothing at this address</h1>\n"
RULES = {
    "add_headers": [{"name": "X-Frame-Options", "value": "DENY"},
                    {"name": "Strict-Transport-Security", "value": "max-age=63072000"}],
    "remove_headers": ["Cache-Control"],
    "cors": {"allow_origins": ["https://app.example.com"], "max_age": 600},
    "error_pages": [{"status": 404, "body": PAGE}],
    "compression": {"gzip": True, "brotli": True, "types": ["application/dash+xml"]},
}


def refused(value):
    return refused_field(responses, value)


# --- validation -------------------------------------------------------------------------

def test_defaults_are_stored_as_nothing_and_rules_check_again_to_themselves():
    assert responses.check({}, "response_rules") is None
    assert delivery.view({})["response_rules"] == responses.DEFAULTS
    stored = responses.check(RULES, "response_rules")
    assert responses.check(stored, "response_rules") == stored
    assert stored["cors"]["allow_methods"] == ["GET", "HEAD", "OPTIONS"]


HOSTILE = [
    ({"add_headers": [{"name": "X-A", "value": "x\r\nSet-Cookie: a"}]},
     "response_rules.add_headers[0].value"),
    ({"add_headers": [{"name": "X-A: b", "value": "x"}]}, "response_rules.add_headers[0].name"),
    ({"add_headers": [{"name": "X-A", "value": "a;b"}]}, "response_rules.add_headers[0].value"),
    ({"add_headers": [{"name": "X-A", "value": "}"}]}, "response_rules.add_headers[0].value"),
    ({"add_headers": [{"name": "X-A", "value": "$request_uri"}]},
     "response_rules.add_headers[0].value"),
    ({"add_headers": [{"name": "X-Cache-Status", "value": "HIT"}]},
     "response_rules.add_headers[0].name"),
    ({"add_headers": [{"name": "Access-Control-Allow-Origin", "value": "x"}]},
     "response_rules.add_headers[0].name"),
    ({"remove_headers": ["Content-Length"]}, "response_rules.remove_headers[0]"),
    ({"remove_headers": ["X;"]}, "response_rules.remove_headers[0]"),
    ({"cors": {"allow_origins": ["https://a.example/path"]}}, "response_rules.cors.allow_origins[0]"),
    ({"cors": {"allow_origins": ['https://a.example";']}}, "response_rules.cors.allow_origins[0]"),
    ({"cors": {"allow_origins": []}}, "response_rules.cors.allow_origins"),
    ({"cors": {"allow_origins": "*", "allow_methods": ["DELETE"]}},
     "response_rules.cors.allow_methods[0]"),
    ({"cors": {"allow_origins": "*", "max_age": -1}}, "response_rules.cors.max_age"),
    ({"cors": {}}, "response_rules.cors.allow_origins"),
    ({"error_pages": [{"status": 200, "body": "x"}]}, "response_rules.error_pages[0].status"),
    ({"error_pages": [{"status": 404, "body": ""}]}, "response_rules.error_pages[0].body"),
    ({"error_pages": [{"status": 404, "body": "a\x00"}]}, "response_rules.error_pages[0].body"),
    ({"error_pages": [{"status": 404, "body": "a" * (64 * 1024 + 1)}]},
     "response_rules.error_pages[0].body"),
    ({"error_pages": [{"status": 404, "body": "a" * 40000},
                      {"status": 503, "body": "b" * 40000}]}, "response_rules.error_pages"),
    ({"error_pages": [{"status": 404, "body": "a"}, {"status": 404, "body": "b"}]},
     "response_rules.error_pages[1].status"),
    ({"compression": {"gzip": True, "types": ["text/html;"]}}, "response_rules.compression.types[0]"),
    ({"compression": {"gzip": True, "types": ["text/*"]}}, "response_rules.compression.types[0]"),
    ({"compression": {"gzip": True, "types": ["text/html {"]}},
     "response_rules.compression.types[0]"),
    ({"compression": {"gzip": True}}, "response_rules.compression.types"),
    ({"compression": {"gzip": "yes", "types": ["text/plain"]}}, "response_rules.compression.gzip"),
    ({"headers": []}, "response_rules.headers"),
]


@pytest.mark.parametrize("value, field", HOSTILE)
def test_hostile_values_are_refused_naming_their_field(value, field):
    assert refused(value) == field


def test_the_renderer_and_the_files_check_again():
    stored = {"response_rules": {**responses.DEFAULTS, "remove_headers": ["a;b"]}}
    with pytest.raises(ConfigError, match="remove_headers"):
        options.delivery_values(stored)
    with pytest.raises(ConfigError, match="remove_headers"):
        options.cache_files(stored)


def test_the_openstack_user_data_carries_the_pages_beside_the_config():
    sig = ServiceInstanceGraph.from_dict({**sample_sig(), "service": delivery.accept(
        {"response_rules": RULES})})
    cache = sig.vnfs_in(role="cache")[0]
    document = yaml.safe_load(userdata.cache(sig, cache, "10.0.0.5", "192.0.2.1"))
    written = {f["path"]: f for f in document["write_files"]}
    page = written[f"{userdata.PREFIX}/cdnaas-error-pages/404.html"]
    assert page["encoding"] == "gz+b64"
    assert gzip.decompress(base64.b64decode(page["content"])).decode() == PAGE
    conf = written[f"{userdata.CONF_DIR}/nginx.conf"]["content"]
    assert f"alias {userdata.PREFIX}/cdnaas-error-pages/;" in conf
    assert PAGE not in conf
    assert f"load_module {responses.BROTLI_MODULE};" in conf


def test_a_new_page_rebuilds_every_openstack_cache_and_nothing_else():
    def paged(body):
        return openstack_sig(response_rules=responses.check(
            {"error_pages": [{"status": 404, "body": body}]}, "response_rules"))

    caches = ["north-cache-1", "north-cache-2", "south-cache-1"]
    assert sorted(rebuilt(openstack_sig(), paged(PAGE))) == caches
    # the page's text alone changes: the config is the same, the user-data is not
    assert sorted(rebuilt(paged(PAGE), paged(PAGE + "<p>again</p>"))) == caches
    assert rebuilt(paged(PAGE), paged(PAGE)) == {}


# --- real nginx on loopback ---------------------------------------------------------------

class RuledCache:
    """The sample origin and one cache nginx with the response ``rules`` on loopback."""

    def __init__(self, stack, tmp_path, rules):
        self.origin = sample_origin(stack)
        self.port, self.management = free_loopback_ports(2)
        service = delivery.accept({"response_rules": rules})
        prefix = tmp_path / "cache"
        prefix.mkdir()
        for relative, text in options.cache_files(service).items():
            (prefix / relative).parent.mkdir(exist_ok=True)
            (prefix / relative).write_text(text)
        text = cache_config(
            name="ruled-cache", workers=1, listen_address="127.0.0.1", listen_port=self.port,
            origin=Origin("http", "origin.example.com", self.origin.server_address[1]),
            origin_address="127.0.0.1", prefix_dir=str(prefix), daemon=False,
            management_sources=["127.0.0.1"], management_port=self.management, user="root",
            service=service)
        stack.enter_context(start_nginx(text, prefix, self.management))

    def request(self, method, path, headers=None):
        return requests.request(method, f"http://127.0.0.1:{self.port}{path}",
                                headers=headers or {}, timeout=10, stream=True)


@contextlib.contextmanager
def ruled_cache(tmp_path, rules):
    need("nginx", root=True)
    with contextlib.ExitStack() as stack:
        yield RuledCache(stack, tmp_path, rules)


def test_headers_cors_pages_and_compression_on_real_answers(tmp_path):
    manifest = origin_server.manifest()
    with ruled_cache(tmp_path, RULES) as cache:
        listed = {"Origin": "https://app.example.com"}
        answer = cache.request("GET", "/objects/small", listed)
        assert answer.status_code == 200
        assert answer.headers["X-Frame-Options"] == "DENY"
        assert answer.headers["Strict-Transport-Security"] == "max-age=63072000"
        assert "Cache-Control" not in answer.headers  # the origin's, removed
        assert answer.headers["Access-Control-Allow-Origin"] == "https://app.example.com"
        assert "Origin" in answer.headers["Vary"]
        other = cache.request("GET", "/objects/small", {"Origin": "https://evil.example"})
        assert "Access-Control-Allow-Origin" not in other.headers

        preflight = cache.request("OPTIONS", "/objects/small", {
            **listed, "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "x-player"})
        assert preflight.status_code == 204
        assert preflight.headers["Access-Control-Allow-Origin"] == "https://app.example.com"
        assert preflight.headers["Access-Control-Allow-Methods"] == "GET, HEAD, OPTIONS"
        assert preflight.headers["Access-Control-Allow-Headers"] == "x-player"
        assert preflight.headers["Access-Control-Max-Age"] == "600"
        assert cache.origin.stats() == {"/objects/small": 1}  # the preflight stayed here

        missing = cache.request("GET", "/no/such/thing", listed)
        assert missing.status_code == 404
        assert missing.text == PAGE
        assert missing.headers["Content-Type"].startswith("text/html")
        assert missing.headers["X-Frame-Options"] == "DENY"

        for encoding, decode in (("gzip", gzip.decompress), ("br", brotli.decompress)):
            packed = cache.request("GET", "/video/manifest.mpd", {"Accept-Encoding": encoding})
            assert packed.headers["Content-Encoding"] == encoding
            raw = packed.raw.read(decode_content=False)
            assert len(raw) < len(manifest) / 4
            assert decode(raw) == manifest
        plain = cache.request("GET", "/objects/chunk-low", {"Accept-Encoding": "gzip, br"})
        assert "Content-Encoding" not in plain.headers  # not a listed type


def test_any_origin_gets_a_star_and_no_rules_change_nothing(tmp_path):
    with ruled_cache(tmp_path, {"cors": {"allow_origins": "*"}}) as cache:
        answer = cache.request("GET", "/objects/small", {"Origin": "https://x.example"})
        assert answer.headers["Access-Control-Allow-Origin"] == "*"
        assert answer.headers["Cache-Control"] == origin_server.CACHEABLE
        assert cache.request("GET", "/no/such").status_code == 404


# --- the API and the local driver ---------------------------------------------------------

@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    yield from local_stack(tmp_path_factory)


@pytest.mark.parametrize("value, field", [
    ({"add_headers": [{"name": "X-A", "value": "x\r\nSet-Cookie: a"}]},
     "response_rules.add_headers[0].value"),
    ({"error_pages": [{"status": 404, "body": "a" * (64 * 1024 + 1)}]},
     "response_rules.error_pages[0].body"),
    ({"compression": {"gzip": True, "types": ["text/html; x"]}},
     "response_rules.compression.types[0]"),
])
def test_the_api_refuses_hostile_rules_and_stores_nothing(stack, value, field):
    assert_api_refuses(stack, "response_rules", value, field)


def test_the_cli_gives_a_deployed_vcdn_its_error_page(stack, origin, tmp_path):
    body = vcdn_body("paged", origin=f"http://127.0.0.1:{origin.server_address[1]}")
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
    assert stack.acme.wait(accepted["operation"]["id"], 90)["state"] == "COMPLETED"
    vcdn_id = accepted["vcdn"]["id"]
    rules = {"error_pages": [{"status": 404, "body": PAGE}],
             "add_headers": [{"name": "X-Frame-Options", "value": "DENY"}]}
    env = {"CDNAAS_CONFIG": str(tmp_path / "config.yaml"), "CDNAAS_API_URL": stack.urls["api"]}
    written = tmp_path / "rules.yaml"
    written.write_text(yaml.safe_dump(rules))
    invoke_json(["vcdn", "update", vcdn_id, "--response-rules", str(written), "--wait"], env,
                stack.acme.token)
    vcdn = stack.acme.ok("GET", f"/vcdns/{vcdn_id}")
    assert vcdn["state"] == "ACTIVE"
    assert vcdn["response_rules"]["error_pages"] == rules["error_pages"]
    balancer = vcdn["regions"][0]["load_balancer"]
    with clients.client(vcdn_id, "eu-west", "10.1.0.42") as viewer:
        status, headers, content = viewer.fetch(f"http://{balancer}/no/such/thing")
    assert (status, content.decode()) == (404, PAGE)
    assert headers["x-frame-options"] == "DENY"
    ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn_id}", 202)
    assert stack.acme.wait(ended["operation"]["id"], 60)["state"] == "COMPLETED"
