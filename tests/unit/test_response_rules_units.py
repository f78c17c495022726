"""The vCDN's response rules (cdnaas.delivery.responses): the tests that start no process (the
unit tier); the others, and what the module covers, are in
tests/service/test_response_rules.py."""
import base64
import gzip

import pytest
import yaml

from cdnaas import delivery
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.delivery import responses
from cdnaas.ro.vim.openstack import userdata
from cdnaas.vnf import options
from cdnaas.vnf.fields import ConfigError
from tests.support.delivery import refused_field
from tests.support.sigs import sample_sig
from tests.unit.test_comforts_unit import openstack_sig, rebuilt

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
