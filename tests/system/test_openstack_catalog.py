"""CDNaaS in the mini cloud's real Keystone: ``cdnaas admin register-service`` puts service
type ``cdn`` and its endpoints in the catalog (idempotent, a moved URL updated), and
``openstack --os-cloud <user> cdn ...`` finds the API there and acts with the user's Keystone
token (tests/support/keystone.py: a stack taking Keystone tokens, users per role).

Each run registers its endpoints in a Keystone region of its own (removed afterwards), so
it never moves the endpoints another user of the shared cloud relies on."""
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from tests.support.keystone import keystone_cloud  # noqa: F401 (fixture)
from tests.support.osc import Osc

#: Keystone and Designate only, each test with projects, regions or zones of its own
pytestmark = pytest.mark.minicloud_services

CDNAAS = Path(sys.executable).parent / "cdnaas"
ORIGIN = "http://origin.example.com:8080"


def register(clouds_yaml, region, *urls):
    """``cdnaas --json admin register-service`` as the cloud's admin: its report."""
    options = [f"--{interface}-url={url}" for interface, url in
               zip(("public", "internal", "admin"), urls)]
    env = {key: value for key, value in os.environ.items() if not key.startswith("OS_")}
    done = subprocess.run([str(CDNAAS), "--json", "admin", "register-service",
                           "--os-cloud", "minicloud-admin", "--region", region, *options],
                          capture_output=True, text=True, timeout=240, check=False,
                          env={**env, "OS_CLIENT_CONFIG_FILE": str(clouds_yaml)})
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def changes(report):
    """``{"service" or interface: change}`` of a report."""
    return {row["interface"] or row["kind"]: row["change"] for row in report}


def catalog_urls(admin_conn, region):
    """``{interface: url}`` of the ``cdn`` endpoints Keystone holds in ``region``."""
    (service,) = [s for s in admin_conn.identity.services() if s.type == "cdn"]
    return {e.interface: e.url for e in admin_conn.identity.endpoints(service_id=service.id,
                                                                      region_id=region)}


@pytest.fixture(scope="module")
def catalog_region(minicloud, keystone_cloud):  # noqa: F811 (fixture)
    """A Keystone region of this module's own, where the ``cdn`` service of the catalog
    has the stack's API as its endpoints (registered by the command once); removed after."""
    from openstack import config as os_config, connection
    conn = connection.Connection(config=os_config.OpenStackConfig(
        config_files=[str(minicloud)]).get_one("minicloud-admin"))
    region = conn.identity.create_region(id=f"cdnaas-test-{uuid.uuid4().hex[:8]}").id
    try:
        first = register(minicloud, region, keystone_cloud.url)
        yield region, first
    finally:
        for endpoint in list(conn.identity.endpoints(region_id=region)):
            conn.identity.delete_endpoint(endpoint, ignore_missing=True)
        conn.identity.delete_region(region, ignore_missing=True)
        conn.close()


@pytest.fixture(scope="module")
def clouds(keystone_cloud, catalog_region, tmp_path_factory):  # noqa: F811 (fixture)
    """The users' clouds.yaml (:mod:`tests.support.keystone`) in the module's region."""
    entries = yaml.safe_load(keystone_cloud.clouds_yaml.read_text())["clouds"]
    for entry in entries.values():
        entry["region_name"] = catalog_region[0]
    path = tmp_path_factory.mktemp("clouds") / "clouds.yaml"
    path.write_text(yaml.safe_dump({"clouds": entries}))
    return path


def as_user(clouds_yaml, user):
    """``openstack --os-cloud <user>``: a password (or application credential) login to
    Keystone, the API found in the token's catalog."""
    return Osc("--os-cloud", user, env={"OS_CLIENT_CONFIG_FILE": str(clouds_yaml)})


def test_register_service_is_idempotent_and_moves_an_endpoint(minicloud, admin_conn,
                                                              keystone_cloud,  # noqa: F811
                                                              catalog_region):
    region, first = catalog_region
    url = keystone_cloud.url
    assert changes(first)["public"] == changes(first)["internal"] == \
        changes(first)["admin"] == "created"
    assert catalog_urls(admin_conn, region) == {"public": url, "internal": url, "admin": url}
    (service,) = [s for s in admin_conn.identity.services() if s.type == "cdn"]
    assert (service.name, service.is_enabled) == ("cdnaas", True)

    assert changes(register(minicloud, region, url)) == {
        "service": "unchanged", "public": "unchanged", "internal": "unchanged",
        "admin": "unchanged"}
    moved = "http://127.0.0.1:9"
    assert changes(register(minicloud, region, url, moved)) == {
        "service": "unchanged", "public": "unchanged", "internal": "updated",
        "admin": "updated"}
    assert catalog_urls(admin_conn, region) == {"public": url, "internal": moved,
                                                "admin": moved}
    assert changes(register(minicloud, region, url))["internal"] == "updated"
    assert catalog_urls(admin_conn, region) == {"public": url, "internal": url, "admin": url}
    assert len(list(admin_conn.identity.endpoints(region_id=region))) == 3


def test_openstack_cdn_finds_the_api_in_the_catalog(keystone_cloud, clouds):  # noqa: F811
    member = as_user(clouds, "member")
    assert [f["Name"] for f in member.ok("cdn", "flavor", "list", "-f", "json")] == ["static"]
    created = member.ok("cdn", "vcdn", "create", "catalog-news", "--flavor", "static",
                        "--origin", ORIGIN, "--region", "eu-west:1000", "--lease-hours", "1",
                        "--wait", "-f", "json")
    assert created["state"] == "ACTIVE"
    assert created["tenant"] == keystone_cloud.projects["a"]  # the Keystone project
    listed = member.ok("cdn", "vcdn", "list", "-f", "json")
    assert [(v["ID"], v["State"]) for v in listed] == [(created["id"], "ACTIVE")]
    assert member.ok("cdn", "vcdn", "show", "catalog-news", "-f", "json")["id"] == created["id"]

    # an application credential of the member acts as the member
    appcred = as_user(clouds, "member-appcred")
    assert appcred.ok("cdn", "vcdn", "show", created["id"], "-f", "value", "-c", "name") \
        .strip() == "catalog-news"
    # a reader reads and cannot change; another project does not see the vCDN
    reader = as_user(clouds, "reader")
    assert reader.ok("cdn", "vcdn", "show", created["id"], "-f", "value", "-c", "state") \
        .strip() == "ACTIVE"
    reader.fails("cdn", "vcdn", "delete", created["id"])
    assert "no vCDN has the name or id" in as_user(clouds, "other").fails(
        "cdn", "vcdn", "show", created["id"])

    member.ok("cdn", "vcdn", "delete", created["id"], "--wait")
    assert member.ok("cdn", "vcdn", "list", "-f", "json") == []
    assert keystone_cloud.api("member").ok("GET", f"/vcdns/{created['id']}")["state"] == \
        "DELETED"
