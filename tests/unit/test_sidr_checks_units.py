"""Flavor-defined VNF configs and what SIDR checks of them (real nginx -t, dnsmasq --test),
plugins found without a restart, and deprecating and deleting template versions: the tests
that start no process (the unit tier); the others, and what the module covers, are in
tests/system/test_sidr_checks.py."""
import copy
from pathlib import Path

import pytest
import yaml

from cdnaas.db import migrate
from cdnaas.db.engine import Database
from cdnaas.sidr import checks
from cdnaas.sidr.app import create_app
from cdnaas.vnf import fields, templates
from tests.support.auth import signed

REPO = Path(__file__).resolve().parents[2]
STATIC = yaml.safe_load((REPO / "plugins/static/template.yaml").read_text())
HOSTILE = ["a\nb", "x;", "x{", "$host", "'q'", '"q"', "a\x00b", "é", "x" * 257, "", "a b",
           "#c", "\\", 1.5, None, {"k": "v"}, [["nested"]], 1 << 40, ["ok", "bad;"]]


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


# -- SIDR checks at registration -------------------------------------------------------------


@pytest.mark.parametrize("name", ["../x.j2", "/etc/x.j2", "sub/x.j2", "x.j2;", "x\n.j2",
                                  ".x.j2", "x" * 125 + ".j2"])
def test_the_schema_refuses_template_names_with_a_path(sidr, name):
    response = sidr.post("/sidr/v1/templates", json=flavored("named", "static", cache=[name]))
    assert response.status_code == 400
    assert "vnfs.cache.config_templates[0]" in problems(response)


def test_the_sample_is_a_vnf_of_each_role_at_the_smallest_size():
    sig = checks.sample_sig(STATIC)
    assert sorted(v.role for v in sig.vnfs) == ["cache", "dns", "load_balancer"]
    assert sig.plugin == "static" and sig.vnfs_in(role="cache")[0].config_templates == \
        ["nginx-cache.conf.j2"]
