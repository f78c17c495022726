"""The request-body gate (cdnaas.common.bodies) with the worst bytes, against each service's
app: every bad body answers 400 or 413 with a JSON error naming the field, and nothing is
stored.

Its tests that start no process are in tests/unit/test_bodies_units.py (the unit tier)."""
import time

import pytest

from tests.support.api import TEMPLATE
from tests.unit.test_bodies_units import (  # noqa: F401 (fixtures)
    JSON, MAX_BODY_BYTES, TARGETS, _assert_refused, clients)


DEEP = 100_000

#: name -> (body bytes, content type, status, field)
WORST_JSON = {
    "invalid utf-8": (b"\xff\xfe", JSON, 400, "body"),
    "utf-8 in a string, then garbage": (b'{"name": "\xff\xfe"}', JSON, 400, "body"),
    "overlong slash": (b'{"name": "\xc0\xaf"}', JSON, 400, "body"),
    "overlong nul": (b'{"name": "\xe0\x80\x80"}', JSON, 400, "body"),
    "encoded surrogate": (b'{"name": "\xed\xa0\x80"}', JSON, 400, "body"),
    "escaped lone surrogate": (b'{"name": "\\ud800"}', JSON, 400, "name"),
    "escaped lone low surrogate in a key": (b'{"\\udc00": 1}', JSON, 400, "body"),
    "utf-8 bom": (b'\xef\xbb\xbf{"name": "a"}', JSON, 400, "body"),
    "utf-16 bom": ('{"name": "a"}'.encode("utf-16"), JSON, 400, "body"),
    "utf-32": ('{"name": "a"}'.encode("utf-32-le"), JSON, 400, "body"),
    "100k nested arrays": (b"[" * DEEP + b"]" * DEEP, JSON, 400, "body"),
    "100k nested objects": (b'{"a":' * DEEP + b"1" + b"}" * DEEP, JSON, 400, "body"),
    "unterminated deep": (b"[" * DEEP, JSON, 400, "body"),
    "quotes then depth": (b'"\\"' * 50_000, JSON, 400, "body"),
    "2^63": (b'{"name": "a", "n": 9223372036854775808}', JSON, 400, "n"),
    "-2^63-1": (b'{"name": "a", "n": [-9223372036854775809]}', JSON, 400, "n[0]"),
    "5000 digits": (b'{"n": 1' + b"0" * 5000 + b"}", JSON, 400, "n"),
    "1e400": (b'{"name": "a", "x": 1e400}', JSON, 400, "x"),
    "-1e400": (b'{"x": {"y": -1e400}}', JSON, 400, "x.y"),
    "NaN": (b'{"name": NaN}', JSON, 400, "body"),
    "Infinity": (b'{"name": "a", "x": Infinity}', JSON, 400, "body"),
    "-Infinity": (b'[-Infinity]', JSON, 400, "body"),
    "duplicate keys": (b'{"name": "a", "name": "b"}', JSON, 400, "name"),
    "two values": (b'{"name": "a"} {"name": "b"}', JSON, 400, "body"),
    "truncated": (b'{"name": ', JSON, 400, "body"),
    "nul bytes": (b"\x00" * 64, JSON, 400, "body"),
    "oversized": (b'{"name": "' + b"a" * (MAX_BODY_BYTES + 1) + b'"}', JSON, 413, "body"),
}


def _stored(client, service):
    listing = client.get(TARGETS[service][2]).json
    return {key: value for key, value in listing.items()
            if not (service == "api" and key == "tenants" and
                    [t["name"] for t in value] == ["admin"])}


@pytest.mark.parametrize("service", TARGETS)
@pytest.mark.parametrize("case", WORST_JSON)
def test_worst_json_bytes_are_refused_naming_the_field(clients, service, case):
    body, mimetype, status, field = WORST_JSON[case]
    client = clients[service]
    method, path, _listing = TARGETS[service]
    before = _stored(client, service)
    started = time.perf_counter()
    response = client.open(path, method=method, data=body, headers={"Content-Type": mimetype})
    _assert_refused(response, status, field)
    assert time.perf_counter() - started < 2
    assert _stored(client, service) == before


# -- YAML templates (SIDR, and the API which forwards them) ---------------------------------

ALIAS_BOMB = b"""\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""
YAML = "application/yaml"
WORST_YAML = {
    "50k-deep block sequence": (b"- " * 50_000 + b"x", 400, "body"),
    "50k-deep flow sequence": (b"[" * 50_000 + b"]" * 50_000, 400, "body"),
    "50k-deep flow mappings": (b"{a: " * 50_000 + b"1" + b"}" * 50_000, 400, "body"),
    "1,000-deep block mappings": (b"".join(b" " * i + b"a:\n" for i in range(1000)) + b" " * 1000 + b"b", 400, "body"),
    "alias bomb": (ALIAS_BOMB, 400, "body"),
    "python object tag": (b"!!python/object/apply:os.system ['true']\n", 400, "body"),
    "python name tag": (b"flavor: !!python/name:os.system\n", 400, "body"),
    "binary tag": (b"flavor: !!binary aGVsbG8=\n", 400, "body"),
    "custom tag": (b"flavor: !evil x\n", 400, "body"),
    "invalid utf-8": (b"flavor: \xff\xfe\n", 400, "body"),
    "utf-16": ("flavor: static\n".encode("utf-16"), 400, "body"),
    "bom": (b"\xef\xbb\xbfflavor: static\n", 400, "body"),
    "2^63 version": (TEMPLATE.read_bytes().replace(b"version: 1", b"version: 9223372036854775808"), 400, "version"),
    ".nan": (b"flavor: static\nversion: .nan\n", 400, "version"),
    "two documents": (b"flavor: a\n---\nflavor: b\n", 400, "body"),
    "100,001 nodes": (b"[" + b"1," * 100_001 + b"1]", 400, "body"),
    "oversized": (b"description: " + b"a" * (MAX_BODY_BYTES + 1) + b"\n", 413, "body"),
}


@pytest.mark.parametrize("service", ["sidr", "api"])
@pytest.mark.parametrize("case", WORST_YAML)
def test_worst_yaml_templates_are_refused(clients, service, case):
    body, status, field = WORST_YAML[case]
    path = {"sidr": "/sidr/v1/templates", "api": "/api/v1/templates"}[service]
    before = clients["sidr"].get("/sidr/v1/templates").json
    started = time.perf_counter()
    response = clients[service].post(path, data=body, headers={"Content-Type": YAML})
    _assert_refused(response, status, field)
    assert time.perf_counter() - started < 2
    assert clients["sidr"].get("/sidr/v1/templates").json == before


def test_a_plain_template_still_registers(clients):
    response = clients["sidr"].post("/sidr/v1/templates", data=TEMPLATE.read_bytes(),
                                    headers={"Content-Type": YAML})
    assert response.status_code == 201, response.json
    assert response.json["flavor"] == "static"
