"""Hostile input against what ends up in VNF configs: the tests that start no process (the unit
tier); the others, and what the module covers, are in
tests/service/test_validation_hostile.py."""
import os
import socket
import time
from urllib.parse import urlsplit

import pytest

from cdnaas.common import errors, origin_policy, validation
from cdnaas.common.sig import Origin
from cdnaas.planning import models
from cdnaas.sidr import service as sidr_service
from cdnaas_plugins.qoe_video.plugin import PLUGIN_DIR, QoeVideoFlavor
from tests.support.im import VM_MODEL, template

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
