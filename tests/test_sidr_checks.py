"""Flavor-defined VNF configs and what SIDR checks of them (real nginx -t, dnsmasq --test),
plugins found without a restart, and deprecating and deleting template versions."""
import copy
import time
from pathlib import Path

import pytest
import yaml

from cdnaas.common import plugins
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.db import migrate
from cdnaas.db.engine import Database
from cdnaas.ro.vim.openstack import userdata
from cdnaas.sidr import checks
from cdnaas.sidr.app import create_app
from cdnaas.vnf import fields, templates
from tests.support import postgres
from tests.support.api import populate, vcdn_body
from tests.support.auth import signed
from tests.support.flavors import installed_plugin
from tests.support.sigs import sample_sig
from tests.support.stack import running_stack
from tests.test_cli import invoke, invoke_json

REPO = Path(__file__).resolve().parents[1]
STATIC = yaml.safe_load((REPO / "plugins/static/template.yaml").read_text())
CUSTOM_CACHE = (REPO / "templates/nginx-cache.conf.j2").read_text().replace(
    "add_header X-Served-By {{ name }} always;",
    "add_header X-Served-By {{ name }} always;\n            add_header X-Custom {{ marker }} always;")
HOSTILE = ["a\nb", "x;", "x{", "$host", "'q'", '"q"', "a\x00b", "é", "x" * 257, "", "a b",
           "#c", "\\", 1.5, None, {"k": "v"}, [["nested"]], 1 << 40, ["ok", "bad;"]]


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on sys.path where tests "install" plugins (tests.support.flavors)."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


@pytest.fixture
def sidr(tmp_path):
    url = f"sqlite:///{tmp_path / 'sidr.db'}"
    migrate.upgrade("sidr", url)
    database = Database(url)
    yield signed(create_app(database).test_client())
    database.dispose()


def flavored(name, plugin, cache=("custom-cache.conf.j2",), dns=("dnsmasq-geo.conf.j2",),
             version=1):
    document = copy.deepcopy(STATIC)
    document.update(flavor=name, plugin=plugin, version=version)
    document["vnfs"]["cache"]["config_templates"] = list(cache)
    document["vnfs"]["dns"]["config_templates"] = list(dns)
    return document


def problems(response):
    return {d["field"]: d["problem"] for d in response.json["error"]["details"]}


# -- plugins found without a restart --------------------------------------------------------

def test_a_plugin_installed_after_the_first_lookup_is_found(site):
    with pytest.raises(LookupError, match="no plugin 'late-flavor'"):
        plugins.load(plugins.FLAVORS, "late-flavor")
    installed_plugin(site, "late-flavor")
    assert plugins.load(plugins.FLAVORS, "late-flavor").name == "late-flavor"
    assert "late-flavor" in plugins.names(plugins.FLAVORS)


# -- template files: a search path, never out of its folders --------------------------------

def test_a_template_is_found_in_the_plugin_folder_first_then_the_project(tmp_path):
    mine = tmp_path / "templates"
    mine.mkdir()
    (mine / "nginx-cache.conf.j2").write_text("mine\n")
    assert templates.find_template("nginx-cache.conf.j2", (mine, templates.TEMPLATES_DIR)) \
        == (mine / "nginx-cache.conf.j2").resolve()
    assert templates.find_template("nginx-lb.conf.j2", (mine, templates.TEMPLATES_DIR)) \
        == templates.TEMPLATES_DIR.resolve() / "nginx-lb.conf.j2"
    assert templates.find_template("nope.j2", (mine, templates.TEMPLATES_DIR)) is None


@pytest.mark.parametrize("name", ["../nginx-cache.conf.j2", "/etc/passwd.j2", "sub/x.j2",
                                  "..j2/x.j2", ".hidden.j2", "x.j2\n", "x\x00.j2", "é.j2",
                                  "x" * 200 + ".j2", "nginx.conf", ""])
def test_template_names_are_plain_file_names(tmp_path, name):
    with pytest.raises(fields.ConfigError, match="template name"):
        templates.find_template(name, (tmp_path, templates.TEMPLATES_DIR))


def test_a_symlink_out_of_the_folder_is_refused_not_followed(tmp_path):
    mine, outside = tmp_path / "templates", tmp_path / "secret.j2"
    mine.mkdir()
    outside.write_text("secret\n")
    (mine / "leak.j2").symlink_to(outside)
    with pytest.raises(fields.ConfigError, match="link out of its folder"):
        templates.find_template("leak.j2", (mine,))
    flavor = templates.FlavorConfig(template="includes.j2", folders=(mine,))
    (mine / "includes.j2").write_text('{% include "../secret.j2" %}\n')
    with pytest.raises(fields.ConfigError, match="template name"):
        templates.render_flavored("nginx-cache.conf.j2", flavor)


# -- extra variables of boot_config ---------------------------------------------------------

def test_extra_variables_are_checked(tmp_path):
    assert templates.extra_variables(
        {"ttl": "1m", "types": ["text/css", "image/svg+xml"], "on": True, "mb": 64},
        {"name": "c"}) == {"ttl": "1m", "types": ["text/css", "image/svg+xml"], "on": True,
                           "mb": 64}
    for value in HOSTILE:
        with pytest.raises(fields.ConfigError, match="boot_config variable ttl"):
            templates.extra_variables({"ttl": value}, {})
    for name in ["Name", "1x", "a-b", "a b", "x" * 64, "", 3, "é"]:
        with pytest.raises(fields.ConfigError, match="boot_config variable"):
            templates.extra_variables({name: "v"}, {})
    with pytest.raises(fields.ConfigError, match="would replace a value"):
        templates.extra_variables({"origin_server": "10.0.0.1:80"}, {"origin_server": "x"})
    with pytest.raises(fields.ConfigError, match="not a dict"):
        templates.extra_variables(["ttl"], {})
    with pytest.raises(fields.ConfigError, match="more than 64"):
        templates.extra_variables({"l": ["a"] * 65}, {})


# -- RO renders the flavor's template, on the local driver and in cloud-init ----------------

def test_the_flavor_template_and_boot_config_reach_the_vnf_config(site):
    installed_plugin(site, "custom", {"custom-cache.conf.j2": CUSTOM_CACHE},
                     boot_config='{"marker": vnf.name + "-" + sig.flavor} '
                                 'if vnf.role == "cache" else {}')
    document = sample_sig()
    document["plugin"] = "custom"
    for vnf in document["vnfs"]:
        if vnf["role"] == "cache":
            vnf["config_templates"] = ["custom-cache.conf.j2", "nginx-management.conf.j2"]
    sig = ServiceInstanceGraph.from_dict(document)
    cache, dns = sig.vnfs_in(role="cache")[0], sig.vnfs_in(role="dns")[0]
    cloud = userdata.cache(sig, cache, "10.0.0.5", "192.0.2.1")
    assert f"add_header X-Custom {cache.name}-static always;" in cloud
    stock = ServiceInstanceGraph.from_dict(sample_sig())
    assert "X-Custom" not in userdata.cache(stock, stock.vnfs_in(role="cache")[0], "10.0.0.5",
                                            "192.0.2.1")
    assert "host-record=vcdn-1.cdn.example.net,10.0.0.2" in userdata.dns(sig, dns, "10.0.0.9",
                                                              {"north": "10.0.0.2",
                                                               "south": "10.0.1.2"})
    document["plugin"] = "not-installed"
    with pytest.raises(fields.ConfigError, match="no plugin 'not-installed'"):
        userdata.cache(ServiceInstanceGraph.from_dict(document), cache, "10.0.0.5", "192.0.2.1")


def test_a_failing_or_hostile_boot_config_refuses_the_config(site):
    installed_plugin(site, "raising", boot_config="1 / 0")
    installed_plugin(site, "hostile", {"custom-cache.conf.j2": CUSTOM_CACHE},
                     boot_config='{"marker": "x; include /etc/passwd"}')
    for plugin, words in (("raising", "boot_config of north-cache-1 failed: ZeroDivisionError"),
                          ("hostile", "boot_config variable marker")):
        document = sample_sig()
        document["plugin"] = plugin
        cache = ServiceInstanceGraph.from_dict(document).vnfs_in(role="cache")[0]
        cache.config_templates = ["custom-cache.conf.j2"]
        with pytest.raises(fields.ConfigError, match=words):
            userdata.cache(ServiceInstanceGraph.from_dict(document), cache, "10.0.0.5",
                           "192.0.2.1")


# -- SIDR checks at registration -------------------------------------------------------------

def test_sidr_finds_a_plugin_installed_after_a_refusal(sidr, site):
    document = flavored("later", "later-plugin")
    refused = sidr.post("/sidr/v1/templates", json=document)
    assert refused.status_code == 422 and refused.json["error"]["field"] == "plugin"
    assert "no plugin 'later-plugin'" in problems(refused)["plugin"]
    installed_plugin(site, "later-plugin", {"custom-cache.conf.j2": CUSTOM_CACHE},
                     boot_config='{"marker": "m1"} if vnf.role == "cache" else {}')
    started = time.monotonic()
    stored = sidr.post("/sidr/v1/templates", json=document)
    assert stored.status_code == 201, stored.json
    assert time.monotonic() - started < 3  # three roles rendered and checked by the tools


@pytest.mark.parametrize("case, change, field, words", [
    ("missing file", {"cache": ["nope.j2"]}, "vnfs.cache.config_templates[0]",
     "no file nope.j2 in the plugin's templates folder"),
    ("missing include", {"cache": ["custom-cache.conf.j2", "gone.j2"]},
     "vnfs.cache.config_templates[1]", "no file gone.j2"),
    ("undefined variable", {"cache": ["undefined.j2"]}, "vnfs.cache.config_templates[0]",
     "'no_such_value' is undefined"),
    ("syntax", {"cache": ["syntax.j2"]}, "vnfs.cache.config_templates[0]", "line 2"),
    ("nginx refuses", {"cache": ["bogus.j2"]}, "vnfs.cache.config_templates[0]",
     "nginx rejected the configuration"),
    ("dnsmasq refuses", {"dns": ["bad-dns.j2"]}, "vnfs.dns.config_templates[0]",
     "dnsmasq rejected the configuration"),
    ("wrong role", {"dns": ["nginx-cache.conf.j2"]}, "vnfs.dns.config_templates[0]",
     "is undefined"),
    ("link out", {"cache": ["leak.j2"]}, "vnfs.cache.config_templates[0]",
     "link out of its folder"),
])
def test_sidr_refuses_config_templates_that_do_not_work(sidr, site, tmp_path, case, change,
                                                        field, words):
    folder = installed_plugin(site, "checked", {
        "custom-cache.conf.j2": CUSTOM_CACHE,
        "undefined.j2": CUSTOM_CACHE.replace("{{ marker }}", "{{ no_such_value }}"),
        "syntax.j2": "events {}\n{% if %}\n",
        "bogus.j2": CUSTOM_CACHE.replace("server_tokens off;", "bogus_directive on;"),
        "bad-dns.j2": "no-such-option={{ name }}\n",
    }, boot_config='{"marker": "m1"} if vnf.role == "cache" else {}') / "templates"
    (tmp_path / "outside.j2").write_text(CUSTOM_CACHE)
    (folder / "leak.j2").symlink_to(tmp_path / "outside.j2")
    document = flavored("checked", "checked", **change)
    response = sidr.post("/sidr/v1/templates", json=document)
    assert response.status_code == 422, (case, response.json)
    assert response.json["error"]["field"] == field
    assert words in problems(response)[field], problems(response)
    assert sidr.get("/sidr/v1/templates").json["templates"] == []


@pytest.mark.parametrize("name", ["../x.j2", "/etc/x.j2", "sub/x.j2", "x.j2;", "x\n.j2",
                                  ".x.j2", "x" * 125 + ".j2"])
def test_the_schema_refuses_template_names_with_a_path(sidr, name):
    response = sidr.post("/sidr/v1/templates", json=flavored("named", "static", cache=[name]))
    assert response.status_code == 400
    assert "vnfs.cache.config_templates[0]" in problems(response)


def test_a_hostile_boot_config_is_refused_at_registration(sidr, site):
    installed_plugin(site, "sneaky", {"custom-cache.conf.j2": CUSTOM_CACHE},
                     boot_config='{"marker": "on;\\n}\\nserver { listen 80"}')
    response = sidr.post("/sidr/v1/templates", json=flavored("sneaky", "sneaky"))
    assert response.status_code == 422
    assert "boot_config variable marker" in problems(response)["vnfs.cache.config_templates[0]"]


def test_the_sample_is_a_vnf_of_each_role_at_the_smallest_size():
    sig = checks.sample_sig(STATIC)
    assert sorted(v.role for v in sig.vnfs) == ["cache", "dns", "load_balancer"]
    assert sig.plugin == "static" and sig.vnfs_in(role="cache")[0].config_templates == \
        ["nginx-cache.conf.j2"]


# -- deprecate and delete versions (SIDR asks SO) --------------------------------------------

@pytest.fixture(params=["sqlite", "postgresql"])
def stack(request, tmp_path):
    """A noop stack on the embedded default (a SQLite file per service) or PostgreSQL."""
    if request.param == "sqlite":
        with running_stack(None, tmp_path) as running:
            yield populate(running)
    else:
        admin = request.getfixturevalue("postgres_admin_url")
        with postgres.fresh_database(admin) as url, running_stack(url, tmp_path) as running:
            yield populate(running)


def test_deprecated_versions_are_not_offered_and_used_ones_are_not_deleted(stack):
    operator, acme = stack.operator, stack.acme
    operator.ok("POST", "/templates", 201, json={**STATIC, "version": 2})
    first = acme.ok("POST", "/vcdns", 202, json=vcdn_body("first"))
    assert acme.wait(first["operation"]["id"])["state"] == "COMPLETED"
    assert first["vcdn"]["template_version"] == 2

    deprecated = operator.ok("PATCH", "/templates/static/2", json={"deprecated": True})
    assert deprecated["deprecated"] and deprecated["deprecated_at"]
    # the vCDN of a deprecated version still changes and runs
    changed = acme.ok("PATCH", f"/vcdns/{first['vcdn']['id']}", 202,
                      json={"regions": [{"name": "eu-west", "demand": 2000}]})
    assert acme.wait(changed["operation"]["id"])["state"] == "COMPLETED"
    offered = {f["name"]: f["version"] for f in acme.ok("GET", "/flavors")["flavors"]}
    assert offered["static"] == 1
    second = acme.ok("POST", "/vcdns", 202, json=vcdn_body("second"))
    assert second["vcdn"]["template_version"] == 1
    assert acme.wait(second["operation"]["id"])["state"] == "COMPLETED"

    env = {"CDNAAS_API_URL": stack.urls["api"], "CDNAAS_TOKEN": stack.operator_token}
    assert invoke_json(["template", "deprecate", "static", "1"], env)["deprecated"] is True
    assert "static" not in {f["name"] for f in acme.ok("GET", "/flavors")["flavors"]}
    refused = acme.call("POST", "/vcdns", json=vcdn_body("third"))
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "flavor"
    assert "every version of flavor 'static' is deprecated" in refused.json()["error"]["message"]

    used = operator.call("DELETE", "/templates/static/2")
    assert used.status_code == 409 and first["vcdn"]["id"] in used.json()["error"]["message"]
    result = invoke(["template", "delete", "static", "2"], env)
    assert result.exit_code != 0 and first["vcdn"]["id"] in result.output
    ended = acme.ok("DELETE", f"/vcdns/{first['vcdn']['id']}", 202)
    assert acme.wait(ended["operation"]["id"])["state"] == "COMPLETED"
    assert invoke_json(["template", "delete", "static", "2"], env) == \
        {"deleted": {"flavor": "static", "version": 2}}
    assert operator.call("GET", "/templates", params={"flavor": "static"}).json()["templates"][0][
        "version"] == 1
    assert operator.call("DELETE", "/templates/static/2").status_code == 404
    assert operator.call("PATCH", "/templates/static/9", json={"deprecated": True}) \
        .status_code == 404
    assert operator.call("PATCH", "/templates/static/1",
                         json={"deprecated": "yes"}).status_code == 400
    assert acme.call("DELETE", "/templates/static/1").status_code == 403
    assert operator.ok("PATCH", "/templates/static/1", json={"deprecated": False})[
        "deprecated"] is False
    assert "static" in {f["name"] for f in acme.ok("GET", "/flavors")["flavors"]}
