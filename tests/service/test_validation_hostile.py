"""Hostile input against what ends up in VNF configs: origins, client prefixes, the
operator's origin policy and the service templates' model files.

Every refusal is a 400/422 naming the field, and nothing is stored; a model file's
content never appears in a message; an accepted origin always renders back into a
URL with the same host and port and no config metacharacter (a property test).

Its tests that start no process are in tests/unit/test_validation_hostile_units.py (the unit
tier)."""
import re
import socket
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdnaas.common import errors, validation
from cdnaas.common.sig import Origin
from cdnaas.planning import models
from cdnaas_plugins.qoe_video.plugin import PLUGIN_DIR, QoeVideoFlavor
from tests.support.api import populate, vcdn_body
from tests.support.im import template
from tests.support.stack import running_stack
from tests.unit.test_validation_hostile_units import SECRET, policy  # noqa: F401 (fixtures)


# --- property: what is accepted renders back to itself --------------------------------------

_RENDERED = re.compile(r"https?://(?:[a-z0-9.-]+|\[[0-9a-f:.]+\]):[0-9]{1,5}")
_HOSTILE = "[]:%@/?#;{}$'\"\\\n\r\t\x00 \u0660\uff10\u0435."


def _hosts():
    return st.one_of(
        st.from_regex(r"[A-Za-z0-9-]{1,12}(\.[A-Za-z0-9-]{1,12}){0,3}", fullmatch=True),
        st.ip_addresses(v=4).map(str),
        st.ip_addresses(v=6).map(lambda a: f"[{a}]"),
        st.ip_addresses(v=6).map(str),
        st.ip_addresses(v=6).map(lambda a: f"[{a}%25eth0]"),
        st.text(alphabet=st.sampled_from("ab1.-:[]%" + _HOSTILE), max_size=20),
    )


def _ports():
    return st.one_of(st.just(""), st.integers(-5, 70000).map(lambda p: f":{p}"),
                     st.text(alphabet="0123456789\u0660\uff10+- ", max_size=8).map(lambda p: f":{p}"))


_URLS = st.one_of(
    st.text(max_size=60),
    st.builds(lambda scheme, host, port, tail: f"{scheme}{host}{port}{tail}",
              st.sampled_from(["http://", "https://", "HTTP://", "ftp://", "http:/", ""]),
              _hosts(), _ports(), st.sampled_from(["", "/", "/x", "?q", "#f", "\n", "]"])),
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_URLS)
def test_an_accepted_origin_renders_a_url_that_parses_back(url):
    try:
        origin = validation.parse_origin(url)
    except errors.BadRequest as exc:
        assert exc.field == "origin"
        return
    rendered = origin.url
    assert _RENDERED.fullmatch(rendered), rendered           # no config metacharacter
    assert 1 <= origin.port <= 65535 and "%" not in origin.host
    assert validation.parse_origin(rendered) == origin
    parts = urlsplit(rendered)
    assert (parts.scheme, parts.hostname, parts.port) == (origin.scheme, origin.host, origin.port)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=50),
                 st.builds(lambda a, n: f"{a}/{n}", st.ip_addresses(), st.integers(-1, 130)),
                 st.builds(lambda a, z, n: f"{a}%{z}/{n}", st.ip_addresses(v=6), st.text(max_size=12),
                           st.integers(0, 128))))
def test_an_accepted_prefix_is_canonical_cidr(prefix):
    try:
        [normalised] = validation.parse_prefixes([prefix])
    except errors.BadRequest as exc:
        assert exc.field == "client_prefixes[0]"
        return
    assert re.fullmatch(r"[0-9a-f:.]+/[0-9]{1,3}", normalised), normalised
    assert "%" not in prefix


# --- the origin policy ------------------------------------------------------------------------


@pytest.mark.parametrize("driver_module", ["local", "openstack"])
def test_drivers_check_the_policy_again_on_what_the_name_resolves_to_at_deploy_time(
        policy, driver_module):
    """DNS rebinding: a name accepted with a public address that later points at the
    metadata address (or this machine) is refused when the VIM resolves it to deploy."""
    from cdnaas.ro.vim.base import VimError  # pylint: disable=import-outside-toplevel
    from cdnaas.ro.vim.local import addressing  # pylint: disable=import-outside-toplevel
    from cdnaas.ro.vim.openstack import lookup  # pylint: disable=import-outside-toplevel
    origin = Origin(scheme="http", host="rebound.example.com", port=8080)
    policy.setattr(socket, "getaddrinfo", lambda host, *a, **k: [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254" if driver_module ==
                                                     "openstack" else "127.0.0.1", 0))])
    resolve = {"local": lambda: addressing.origin_address(origin, {"subnet": "198.18.0.0/24"}),
               "openstack": lambda: lookup.resolve(origin)}[driver_module]
    with pytest.raises(VimError, match="at deploy time.*(metadata|loopback)"):
        resolve()
    policy.setenv("CDNAAS_ORIGIN_ALLOW", "rebound.example.com:8080")
    assert resolve() in ("169.254.169.254", "198.18.0.1")


# --- model files ------------------------------------------------------------------------------


@pytest.mark.parametrize("content", [
    f"password: {SECRET}\n",                                  # a mapping: schema errors
    f"{SECRET}: [unclosed\n",                                 # not YAML
    f"- {SECRET}\n- x\n",                                     # a list
    f"name: {SECRET}\ntechnology: {SECRET}\n{SECRET}: 1\n",   # wrong values, unknown key
    f"qoe: {{points: [{{mos: '{SECRET}'}}]}}\n",
    b"\xff\xfe" + SECRET.encode(),                            # not UTF-8
    "[" * 5000 + "]" * 5000,                                  # deep nesting
])
def test_a_broken_model_file_is_described_never_quoted(tmp_path, monkeypatch, content):
    folder = tmp_path / "models-dir"
    folder.mkdir()
    path = folder / "broken.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    monkeypatch.setenv("CDNAAS_MODEL_DIRS", str(folder))
    with pytest.raises(models.ModelError) as caught:
        models.named("broken.yaml", PLUGIN_DIR)
    assert "broken.yaml" in str(caught.value) and SECRET not in str(caught.value)
    document = template("broken.yaml")
    with pytest.raises(errors.Unprocessable) as refused:
        QoeVideoFlavor.load_model(document)
    assert refused.value.field == "flavor" and SECRET not in refused.value.message


# --- through the services: refused, named, nothing stored -------------------------------------

@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    models_dir = tmp / "models"
    models_dir.mkdir()
    (tmp / "secret.yaml").write_text(f"password: {SECRET}\n")
    (models_dir / "leak.yaml").symlink_to(tmp / "secret.yaml")
    (models_dir / "secret.yaml").write_text(f"password: {SECRET}\n")
    with running_stack(None, tmp, extra_env={"CDNAAS_MODEL_DIRS": str(models_dir)}) as running:
        yield populate(running)


@pytest.mark.parametrize("url", [
    "http://o.example.com:0", "http://o.example.com:65536", "http://[::1]]",
    "http://[fe80::1%25eth0]", "http://o.example.com:\u0668\u0660", "http://\u0435xample.com",
    "http://o.example.com\n", "http://o.exa\x00mple.com", "http://169.254.169.254",
    "http://[::1]:8080", "http://[::ffff:169.254.169.254]", "http://198.18.0.1",
    "http://0.0.0.0:8080",
])
def test_the_api_refuses_a_hostile_origin_and_stores_nothing(stack, url):
    for path in ("/vcdns", "/quotes"):
        response = stack.acme.call("POST", path, json=vcdn_body("hostile", origin=url))
        assert response.status_code == 400, response.text
        assert response.json()["error"]["field"] == "origin"
    assert not [v for v in stack.acme.ok("GET", "/vcdns")["vcdns"] if v["name"] == "hostile"]


def test_the_tests_allow_list_covers_only_their_origins_address(stack):
    accepted = stack.acme.ok("POST", "/quotes", json=vcdn_body("local", origin="http://localhost:9"))
    assert accepted["vcpus"] >= 1  # localhost is 127.0.0.1, which the test stacks allow
    refused = stack.acme.call("POST", "/quotes", json=vcdn_body("local", origin="http://127.0.0.2"))
    assert refused.status_code == 400 and refused.json()["error"]["field"] == "origin"


def test_the_api_takes_the_tests_allowed_origin(stack):
    quote = stack.acme.ok("POST", "/quotes", json=vcdn_body("fine", origin="http://127.0.0.1:9"))
    assert quote["vcpus"] >= 1


@pytest.mark.parametrize("prefix", ["fe80::%x}\n}\ntable inet evil {/64", "fe80::%eth0/64",
                                    "10.0.0.0/8;", "10.0.0.0/33", "\u0661\u0660.0.0.0/8"])
def test_a_region_with_a_hostile_prefix_is_refused_and_not_stored(stack, prefix):
    response = stack.operator.call("POST", "/regions", json={
        "name": "evil", "client_prefixes": ["10.3.0.0/16", prefix], "zone": "az-evil"})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["field"] == "client_prefixes[1]"
    changed = stack.operator.call("PATCH", "/regions/us-east",
                                  json={"client_prefixes": [prefix]})
    assert changed.status_code == 400, changed.text
    assert changed.json()["error"]["field"] == "client_prefixes[0]"
    regions = stack.operator.ok("GET", "/regions")["regions"]
    assert "evil" not in [r["name"] for r in regions]
    assert next(r for r in regions if r["name"] == "us-east")["client_prefixes"] == ["10.2.0.0/16"]


@pytest.mark.parametrize("name, status, field", [
    ("/etc/passwd", 422, "model"), ("../../../../etc/passwd", 422, "model"),
    ("models/../../x.yaml", 422, "model"), ("leak.yaml", 422, "model"),
    ("models/absent.yaml", 422, "model"), ("models/vm.yaml\n", 422, "model"),
])
def test_sidr_refuses_a_template_whose_model_leaves_the_folder(stack, name, status, field):
    document = {**template(name), "flavor": "hostile-model"}
    response = stack.operator.call("POST", "/templates", json=document)
    assert response.status_code == status, response.text
    assert response.json()["error"]["field"] == field and SECRET not in response.text
    listed = stack.operator.ok("GET", "/templates", params={"flavor": "hostile-model"})
    assert listed["templates"] == []


def test_a_quote_never_echoes_a_model_files_content(stack):
    document = {**template("secret.yaml"), "flavor": "leaky"}
    stack.operator.ok("POST", "/templates", 201, json=document)  # a file of CDNAAS_MODEL_DIRS
    response = stack.acme.call("POST", "/quotes", json=vcdn_body("leaky", flavor="leaky"))
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "flavor"
    assert "secret.yaml" in response.text and SECRET not in response.text
