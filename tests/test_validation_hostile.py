"""Hostile input against what ends up in VNF configs: origins, client prefixes, the
operator's origin policy and the service templates' model files.

Every refusal is a 400/422 naming the field, and nothing is stored; a model file's
content never appears in a message; an accepted origin always renders back into a
URL with the same host and port and no config metacharacter (a property test).
"""
import os
import re
import socket
import time
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdnaas.common import errors, origin_policy, validation
from cdnaas.common.sig import Origin
from cdnaas.planning import models
from cdnaas.sidr import service as sidr_service
from cdnaas_plugins.qoe_video.plugin import PLUGIN_DIR, QoeVideoFlavor
from tests.support.api import populate, vcdn_body
from tests.support.im import VM_MODEL, template
from tests.support.stack import running_stack

SECRET = "hunter2-SECRET-do-not-echo"

BAD_SYNTAX = [
    "http://o.example.com:0", "http://o.example.com:00", "http://o.example.com:65536",
    "http://o.example.com:99999999999999999999", "http://o.example.com:-1",
    "http://o.example.com:", "http://o.example.com:+80", "http://o.example.com: 80",
    "http://o.example.com:\u0668\u0660",          # Arabic-Indic digits 80
    "http://o.example.com:\uff18\uff10",          # fullwidth digits 80
    "http://[::1]]", "http://[::1", "http://::1]", "http://[[::1]]", "http://[::1]x",
    "http://[::1]:", "http://[::1]:0", "http://[]", "http://[1.2.3.4]", "http://[::g]",
    "http://[fe80::1%25eth0]", "http://[fe80::1%eth0]", "http://fe80::1%eth0",
    "http://::1", "http://2001:db8::1:80",
    "http://\u0435xample.com",                    # Cyrillic e: a homoglyph
    "http://\uff45xample.com",                    # fullwidth e (NFKC-folds to 'e')
    "http://xn--exmple-cua.com\u200b",            # zero-width space after an IDN
    "http://o.example.com\n", "http://o.example.com\r\nX: y", "http://o.exa\x00mple.com",
    "http://o.example.com\t", " http://o.example.com", "http://o.example.com/\nserver {",
    "http://" + "a" * 64 + ".com", "http://" + ".".join(["a" * 63] * 4) + ".com",
    "http://" + "a" * 300, "http://-a.com", "http://a-.com", "http://a..com", "http://.a.com",
    "http://a.com.", "http://a_b.com", "http://a.com;proxy_pass http://evil",
    "http://a.com}", "http://a{b}.com", "http://$host", "http://a.com'", "http://a.com\"",
    "http://127.1", "http://2130706433", "http://0x7f000001", "http://0177.0.0.1",
    "http://127.000.000.001", "http://1.2.3", "http://1.2.3.4.5",
    "http://u:p@o.example.com", "http://@o.example.com", "http://o.example.com/path",
    "http://o.example.com?x", "http://o.example.com#x", "http://o.example.com\\@evil",
    "ftp://o.example.com", "file:///etc/passwd", "gopher://o.example.com", "//o.example.com",
    "o.example.com", "http:/o.example.com", "http://", "http://:80", "", None, 80,
    ["http://o.example.com"], {"url": "http://o.example.com"},
]


@pytest.mark.parametrize("url", BAD_SYNTAX, ids=range(len(BAD_SYNTAX)))
def test_a_hostile_origin_is_refused_with_the_field_named(url):
    with pytest.raises(errors.BadRequest) as caught:
        validation.parse_origin(url, field="origin")
    assert caught.value.status == 400 and caught.value.field == "origin"
    assert caught.value.details[0]["field"] == "origin"
    assert "\n" not in caught.value.message and "\x00" not in caught.value.message


@pytest.mark.parametrize("url, expected", [
    ("http://origin.example.com:8080", ("http", "origin.example.com", 8080)),
    ("HTTPS://Origin.Example.COM", ("https", "origin.example.com", 443)),
    ("http://o.example.com/", ("http", "o.example.com", 80)),
    ("http://o.example.com:1", ("http", "o.example.com", 1)),
    ("http://o.example.com:65535", ("http", "o.example.com", 65535)),
    ("http://[2001:DB8::1]:8443", ("http", "2001:db8::1", 8443)),
    ("http://[2001:db8:0:0:0:0:0:1]", ("http", "2001:db8::1", 80)),
    ("http://203.0.113.7:81", ("http", "203.0.113.7", 81)),
    ("http://xn--bcher-kva.example", ("http", "xn--bcher-kva.example", 80)),
    ("http://origin", ("http", "origin", 80)),
])
def test_a_good_origin_is_normalised(url, expected):
    origin = validation.parse_origin(url)
    assert (origin.scheme, origin.host, origin.port) == expected


def test_an_ipv6_origin_stays_bracketed_in_its_url():
    origin = validation.parse_origin("http://[2001:db8::1]:8080")
    assert origin.url == "http://[2001:db8::1]:8080"
    assert urlsplit(origin.url).hostname == "2001:db8::1" and urlsplit(origin.url).port == 8080
    assert validation.parse_origin(origin.url) == origin


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


# --- client prefixes --------------------------------------------------------------------------

BAD_PREFIXES = [
    "fe80::%x}\n}\ntable inet evil {/64", "fe80::%eth0/64", "fe80::1%1/128", "10.0.0.0/33",
    "10.0.0.0/8\n", " 10.0.0.0/8", "10.0.0.0/8;", "10.0.0.0/8 }", "10.0.0.0/-1", "10.0.0/8",
    "::/129", "\u0661\u0660.0.0.0/8", "10.0.0.0/\uff18", "1.2.3.4/32/1", "", "/8", "a.b.c.d/8",
    "10.0.0.0/8\x00", None, 10, ["10.0.0.0/8"], "x" * 1000,
]


@pytest.mark.parametrize("prefix", BAD_PREFIXES, ids=range(len(BAD_PREFIXES)))
def test_a_hostile_prefix_is_refused_with_its_index_named(prefix):
    with pytest.raises(errors.BadRequest) as caught:
        validation.parse_prefixes(["10.1.0.0/16", prefix])
    assert caught.value.field == "client_prefixes[1]"
    assert [d["field"] for d in caught.value.details] == ["client_prefixes[1]"]
    assert "\n" not in caught.value.message


def test_prefixes_are_normalised():
    assert validation.parse_prefixes(["10.1.2.3/16", "2001:DB8::1/32", "192.0.2.1"]) == \
        ["10.1.0.0/16", "2001:db8::/32", "192.0.2.1/32"]


# --- the origin policy ------------------------------------------------------------------------

@pytest.fixture
def policy(monkeypatch):
    """The default policy (no allow list); tests set the variables they need."""
    for name in ("CDNAAS_ORIGIN_ALLOW", "CDNAAS_ORIGIN_DENY", "CDNAAS_LOCAL_POOL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("url, words", [
    ("http://127.0.0.1:8080", "loopback"), ("http://127.255.0.9", "loopback"),
    ("http://[::1]", "loopback"), ("http://localhost:8080", "resolves to 127.0.0.1"),
    ("http://[::ffff:127.0.0.1]", "loopback"), ("http://[64:ff9b::7f00:1]", "loopback"),
    ("http://169.254.169.254", "metadata"), ("http://[fd00:ec2::254]", "metadata"),
    ("http://[::ffff:169.254.169.254]", "metadata"), ("http://169.254.1.1", "link-local"),
    ("http://[fe80::1]", "link-local"), ("http://0.0.0.0", "unspecified"),
    ("http://0.1.2.3", "unspecified"), ("http://[::]", "unspecified"),
    ("http://198.18.0.2", "VNF pool"), ("http://198.19.255.1", "VNF pool"),
])
def test_the_default_policy_refuses_this_machine_metadata_and_the_pool(policy, url, words):
    with pytest.raises(errors.BadRequest) as caught:
        origin_policy.accepted_origin(url)
    assert caught.value.field == "origin" and words in caught.value.message
    assert "CDNAAS_ORIGIN_ALLOW" in caught.value.message


def test_the_default_policy_lets_public_and_unresolved_origins_through(policy):
    for url in ("http://203.0.113.7", "http://[2001:db8::1]", "http://10.1.2.3",
                "http://origin.example.com:8080"):  # example.com names do not resolve here
        origin_policy.accepted_origin(url)


def test_the_pool_is_the_local_drivers_setting(policy):
    policy.setenv("CDNAAS_LOCAL_POOL", "100.80.0.0/16")
    origin_policy.accepted_origin("http://198.18.0.2")
    with pytest.raises(errors.BadRequest, match="VNF pool"):
        origin_policy.accepted_origin("http://100.80.3.4")


def test_the_allow_list_wins_and_can_name_a_port(policy):
    policy.setenv("CDNAAS_ORIGIN_ALLOW", "127.0.0.1:8080,[::1],origin.internal.test,10.9.0.0/16:443")
    policy.setenv("CDNAAS_ORIGIN_DENY", "default,private")
    assert origin_policy.accepted_origin("http://127.0.0.1:8080").port == 8080
    assert origin_policy.accepted_origin("http://localhost:8080").host == "localhost"
    origin_policy.accepted_origin("http://[::1]:9")
    origin_policy.accepted_origin("http://origin.internal.test")
    origin_policy.accepted_origin("https://10.9.0.1")
    for url, words in (("http://127.0.0.1:8081", "loopback"), ("http://10.9.0.1", "private"),
                       ("http://192.168.1.1", "private"), ("http://169.254.169.254", "metadata")):
        with pytest.raises(errors.BadRequest, match=words):
            origin_policy.accepted_origin(url)


def test_an_operator_origin_is_allowed_only_while_it_serves(policy):
    """RO's calibration origin on loopback: allowed inside the block, for its port only."""
    with origin_policy.operator_origin("127.0.0.1", 40123):
        assert origin_policy.accepted_origin("http://127.0.0.1:40123").port == 40123
        origin_policy.check_resolved(origin_policy.accepted_origin("http://127.0.0.1:40123"),
                                     ["127.0.0.1"])
        with pytest.raises(errors.BadRequest, match="loopback"):
            origin_policy.accepted_origin("http://127.0.0.1:40124")
    with pytest.raises(errors.BadRequest, match="loopback"):
        origin_policy.accepted_origin("http://127.0.0.1:40123")


def test_the_deny_list_takes_names_networks_and_the_unresolved_keyword(policy):
    policy.setenv("CDNAAS_ORIGIN_DENY", "evil.example.com,203.0.113.0/24,unresolved")
    for url, words in (("http://evil.example.com", "deny list"), ("http://203.0.113.9", "203.0.113.0/24"),
                       ("http://nothing.example.com", "does not resolve")):
        with pytest.raises(errors.BadRequest, match=words):
            origin_policy.accepted_origin(url)
    origin_policy.accepted_origin("http://127.0.0.1")  # the list replaced the default
    policy.setenv("CDNAAS_ORIGIN_DENY", "none")
    origin_policy.accepted_origin("http://169.254.169.254")


@pytest.mark.parametrize("setting, value", [
    ("CDNAAS_ORIGIN_DENY", "loopback,not a network"), ("CDNAAS_ORIGIN_DENY", "10.0.0.0/8:99999"),
    ("CDNAAS_ORIGIN_ALLOW", "10.0.0.0/8;x"), ("CDNAAS_ORIGIN_ALLOW", "fe80::%eth0"),
    ("CDNAAS_ORIGIN_ALLOW", "[::1"), ("CDNAAS_ORIGIN_ALLOW", "a.example:0"),
])
def test_a_meaningless_policy_setting_fails_closed_and_says_which(policy, setting, value):
    policy.setenv(setting, value)
    with pytest.raises(errors.CdnaasError) as caught:
        origin_policy.accepted_origin("http://203.0.113.7")
    assert caught.value.status == 500 and setting in caught.value.message


def test_a_name_that_resolves_to_a_denied_address_is_refused(policy):
    policy.setattr(socket, "getaddrinfo", lambda host, *a, **k: [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("203.0.113.5", 0)),
        (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("fe80::1%eth0", 0, 0, 2))])
    with pytest.raises(errors.BadRequest, match="resolves to fe80::1, a link-local"):
        origin_policy.accepted_origin("http://mixed.example.com")


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


def test_resolving_is_bounded_in_time(policy):
    policy.setenv("CDNAAS_ORIGIN_RESOLVE_TIMEOUT", "0.3")
    policy.setenv("CDNAAS_ORIGIN_DENY", "default,unresolved")
    policy.setattr(socket, "getaddrinfo", lambda *a, **k: time.sleep(2))
    started = time.monotonic()
    with pytest.raises(errors.BadRequest, match="does not resolve"):
        origin_policy.accepted_origin("http://slow.example.com")
    assert time.monotonic() - started < 1.5


def test_policy_settings_are_read_at_call_time(policy):
    with pytest.raises(errors.BadRequest):
        origin_policy.accepted_origin("http://127.0.0.1:1")
    policy.setenv("CDNAAS_ORIGIN_ALLOW", "127.0.0.1")
    origin_policy.accepted_origin("http://127.0.0.1:1")
    assert origin_policy.KEYWORDS["loopback"][0] == ("127.0.0.0/8", "::1/128")


# --- model files ------------------------------------------------------------------------------

@pytest.fixture
def plugin_folder(tmp_path, monkeypatch):
    """A plugin folder with a model, a symlink out of it and a secret beside it."""
    folder = tmp_path / "plugin"
    (folder / "models").mkdir(parents=True)
    (folder / "models" / "vm.yaml").write_bytes((PLUGIN_DIR / VM_MODEL).read_bytes())
    secret = tmp_path / "secret.yaml"
    secret.write_text(f"password: {SECRET}\n")
    (folder / "models" / "leak.yaml").symlink_to(secret)
    (folder / "models" / "passwd.yaml").symlink_to("/etc/passwd")
    (folder / "up").symlink_to(tmp_path)
    monkeypatch.delenv("CDNAAS_MODEL_DIRS", raising=False)
    return folder


BAD_MODEL_NAMES = [
    ("/etc/passwd", "absolute"), ("/work/main/plugins/qoe_video/models/vm.yaml", "absolute"),
    ("../../x.yaml", "no .."), ("models/../../secret.yaml", "no .."), ("..", "no .."),
    ("models/..", "no .."), ("C:/x.yaml", "absolute"), ("models\\..\\x.yaml", "relative path"),
    ("models/vm.yaml\n", "relative path"), ("models/vm.yaml\x00", "relative path"),
    ("models//vm.yaml", "relative path"), ("./models/vm.yaml", "relative path"),
    ("models/.hidden.yaml", "relative path"), ("models/vm.py", "relative path"),
    ("plugin.py", "relative path"), ("", "relative path"), ("m" * 300 + ".yaml", "relative path"),
    ("models/v\u0441.yaml", "relative path"), (["models/vm.yaml"], "a string"), (7, "a string"),
    ("models/leak.yaml", "symbolic link"), ("models/passwd.yaml", "symbolic link"),
    ("up/secret.yaml", "symbolic link"), ("models/absent.yaml", "no such file"),
]


@pytest.mark.parametrize("name, words", BAD_MODEL_NAMES, ids=range(len(BAD_MODEL_NAMES)))
def test_a_model_outside_the_plugins_folder_is_refused(plugin_folder, name, words):
    with pytest.raises(models.ModelError) as caught:
        models.resolve(name, plugin_folder)
    assert words in str(caught.value) and SECRET not in str(caught.value)
    assert "root:" not in str(caught.value)


def test_a_model_is_found_in_the_plugins_folder_then_the_operators_dirs(plugin_folder, tmp_path,
                                                                      monkeypatch):
    assert models.resolve("models/vm.yaml", plugin_folder) == plugin_folder / "models" / "vm.yaml"
    mine = tmp_path / "operator-models"
    (mine / "calibrated").mkdir(parents=True)
    (mine / "calibrated" / "hw.yaml").write_bytes((PLUGIN_DIR / VM_MODEL).read_bytes())
    with pytest.raises(models.ModelError, match="no such file"):
        models.resolve("calibrated/hw.yaml", plugin_folder)
    monkeypatch.setenv("CDNAAS_MODEL_DIRS", f"{tmp_path / 'absent'},{mine}")
    assert models.named("calibrated/hw.yaml", plugin_folder).technology == "vm"


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


def test_a_model_that_is_not_a_regular_file_or_too_large_is_refused(tmp_path):
    os.mkfifo(tmp_path / "fifo.yaml")
    with pytest.raises(models.ModelError, match="not a regular file"):
        models.load(tmp_path / "fifo.yaml")  # would block if it were opened
    (tmp_path / "big.yaml").write_bytes(b"#" * (models.MAX_BYTES + 1))
    with pytest.raises(models.ModelError, match="larger than"):
        models.load(tmp_path / "big.yaml")


def test_a_stored_template_naming_a_file_outside_is_refused_again_at_load():
    for name in ("/etc/passwd", "../../../../etc/passwd"):
        with pytest.raises(errors.Unprocessable) as caught:
            QoeVideoFlavor.load_model({**template(VM_MODEL), "model": name})
        assert caught.value.field == "flavor" and "root:" not in caught.value.message


@pytest.mark.parametrize("name", ["/etc/passwd", "../../x.yaml", "models/../../../etc/passwd"])
def test_sidr_refuses_a_model_outside_the_folder_naming_the_field(name):
    with pytest.raises(errors.Unprocessable) as caught:
        sidr_service.check_model({**template(VM_MODEL), "model": name})
    assert caught.value.status == 422 and caught.value.field == "model"


def test_sidr_needs_the_plugin_to_find_a_model():
    with pytest.raises(errors.Unprocessable) as caught:
        sidr_service.check_model({**template(VM_MODEL), "plugin": "no-such-plugin"})
    assert caught.value.field == "plugin"
    sidr_service.check_model({**template(VM_MODEL), "model": None})


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


def test_origin_url_renders_ipv6_in_brackets():
    assert Origin("https", "2001:db8::7", 443).url == "https://[2001:db8::7]:443"
    assert Origin("http", "o.example.com", 80).url == "http://o.example.com:80"


@pytest.mark.parametrize("text", ["0001-01-01T00:30:00+01:00", "9999-12-31T23:30:00-01:00",
                                  "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
                                  "1969-12-31T23:59:59Z"])
def test_times_at_the_ends_of_the_calendar_are_refused_not_overflowed(text):
    """A lease or a metrics window at year 1 or 9999 overflowed (500) once shifted or
    converted; every time a request names is now within 1970-9000."""
    from cdnaas.common import timeutil  # pylint: disable=import-outside-toplevel
    from cdnaas.so.instances import _lease  # pylint: disable=import-outside-toplevel
    with pytest.raises(ValueError, match="between 1970 and 9000"):
        timeutil.parse(text)
    with pytest.raises(errors.BadRequest) as caught:
        _lease({"lease": {"end": text}}, timeutil.utcnow())
    assert caught.value.field == "lease.end"
