"""Access control (delivery option ``access``): the tests that start no process (the unit
tier); the others, and what the module covers, are in tests/system/test_access.py."""
import stat

import pytest

from cdnaas.common import errors
from cdnaas.delivery import access
from cdnaas.vnf import cache, fields, options, templates
from tests.unit.test_vnf_rendering_units import cache_values

SECRET_A = "secret-a-" + "a" * 32
SECRET_B = "secret-b-" + "b" * 32


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
    from tests.unit.test_comforts_unit import openstack_sig
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
