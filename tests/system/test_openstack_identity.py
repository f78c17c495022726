"""The customer API behind keystonemiddleware's ``auth_token``, against the mini cloud's real
Keystone (``tests/support/keystone.py``): projects are tenants, Keystone's roles meet the
oslo.policy defaults, application credentials work, and a ``policy.yaml`` changes answers."""
import contextlib
import os

import pytest

from cdnaas.common.etags import etag
from tests.support.api import Api, vcdn_body
from tests.support.keystone import keystone_cloud  # noqa: F401 (fixture)

#: Keystone and Designate only, each test with projects, regions or zones of its own
pytestmark = pytest.mark.minicloud_services


@pytest.fixture(scope="module")
def cloud(keystone_cloud):
    return keystone_cloud


def write_policy(path, text):
    """A new ``policy.yaml`` the API reads at its next request (a later mtime)."""
    before = path.stat().st_mtime
    path.write_text(text)
    os.utime(path, (before + 2, before + 2))


@contextlib.contextmanager
def leased(cloud, name):
    """A vCDN of project ``a`` leased and ACTIVE (its representation), ended afterwards."""
    member = cloud.api("member")
    accepted = member.ok("POST", "/vcdns", 202, json=vcdn_body(name))
    assert member.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
    vcdn_id = accepted["vcdn"]["id"]
    yield member.ok("GET", f"/vcdns/{vcdn_id}")
    ended = member.ok("DELETE", f"/vcdns/{vcdn_id}", 202)
    assert member.wait(ended["operation"]["id"])["state"] == "COMPLETED"


def full_life(api, name, project):
    """Lease, change, purge and end a vCDN as ``api``; the vCDN belongs to ``project``."""
    accepted = api.ok("POST", "/vcdns", 202, json=vcdn_body(name))
    assert api.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
    vcdn = api.ok("GET", f"/vcdns/{accepted['vcdn']['id']}")
    assert vcdn["tenant"] == project and vcdn["state"] == "ACTIVE"
    assert vcdn["entry_point"]["hostname"] == f"{name}.{project}.cdn.example.net"
    changed = api.ok("PATCH", f"/vcdns/{vcdn['id']}", 202,
                     json={"regions": [{"name": "eu-west", "demand": 700}]},
                     headers={"If-Match": etag(vcdn["revision"])})
    assert api.wait(changed["operation"]["id"])["state"] == "COMPLETED"
    purged = api.ok("POST", f"/vcdns/{vcdn['id']}/invalidations", 202,
                    json={"paths": ["/index.html"]})
    assert api.wait(purged["operation"]["id"])["state"] == "COMPLETED"
    ended = api.ok("DELETE", f"/vcdns/{vcdn['id']}", 202)
    assert api.wait(ended["operation"]["id"])["state"] == "COMPLETED"
    assert api.ok("GET", f"/vcdns/{vcdn['id']}")["state"] == "DELETED"
    operations = api.ok("GET", f"/vcdns/{vcdn['id']}/operations")["operations"]
    assert [o["type"] for o in operations] == ["INSTANTIATE", "UPDATE", "INVALIDATE",
                                               "TERMINATE"]


def test_a_member_leases_changes_purges_and_ends_a_vcdn_with_a_keystone_token(cloud):
    full_life(cloud.api("member"), "by-password", cloud.projects["a"])


def test_an_application_credential_does_the_same(cloud):
    full_life(cloud.api("member", cloud.appcred_token()), "by-appcred", cloud.projects["a"])


def test_a_keystone_token_in_the_bearer_header_works_too(cloud):
    """The ``cdnaas`` CLI and the portal send ``Authorization: Bearer <token>``."""
    bearer = Api(cloud.url, cloud.token("reader"))
    assert bearer.ok("GET", "/flavors")["flavors"][0]["name"] == "static"


def test_a_reader_only_reads(cloud):
    reader = cloud.api("reader")
    with leased(cloud, "read-only") as vcdn:
        assert vcdn["id"] in [v["id"] for v in reader.ok("GET", "/vcdns")["vcdns"]]
        assert reader.ok("GET", f"/vcdns/{vcdn['id']}")["state"] == "ACTIVE"
        reader.ok("GET", f"/vcdns/{vcdn['id']}/usage")
        for method, path, body in (
                ("POST", "/vcdns", vcdn_body("not-by-reader")),
                ("PATCH", f"/vcdns/{vcdn['id']}", {"regions": [{"name": "eu-west", "demand": 5}]}),
                ("POST", f"/vcdns/{vcdn['id']}/invalidations", {"paths": ["/a"]}),
                ("DELETE", f"/vcdns/{vcdn['id']}", None)):
            refused = reader.call(method, path, json=body)
            assert refused.status_code == 403, (method, path, refused.text)
            assert "reader" in refused.json()["error"]["message"]
        assert reader.ok("GET", f"/vcdns/{vcdn['id']}")["revision"] == vcdn["revision"]


def test_a_purger_purges_and_nothing_else(cloud):
    purger = cloud.api("purger")
    with leased(cloud, "purged") as vcdn:
        accepted = purger.ok("POST", f"/vcdns/{vcdn['id']}/invalidations", 202,
                             json={"prefixes": ["/v/"]})
        # it follows its purge (the vCDN and the operation), and reads nothing else
        assert purger.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
        assert purger.ok("GET", f"/vcdns/{vcdn['id']}")["id"] == vcdn["id"]
        for method, path in (("GET", "/vcdns"), ("GET", f"/vcdns/{vcdn['id']}/usage"),
                             ("DELETE", f"/vcdns/{vcdn['id']}")):
            assert purger.call(method, path).status_code == 403, (method, path)


def test_another_project_gets_404(cloud):
    other = cloud.api("other")
    with leased(cloud, "private") as vcdn:
        for method, path in (("GET", f"/vcdns/{vcdn['id']}"), ("DELETE", f"/vcdns/{vcdn['id']}"),
                             ("GET", f"/vcdns/{vcdn['id']}/operations")):
            assert other.call(method, path).status_code == 404, (method, path)
        purge = other.call("POST", f"/vcdns/{vcdn['id']}/invalidations", json={"paths": ["/a"]})
        assert purge.status_code == 404
        assert vcdn["id"] not in [v["id"] for v in other.ok("GET", "/vcdns")["vcdns"]]
        assert cloud.api("member").ok("GET", f"/vcdns/{vcdn['id']}")["state"] == "ACTIVE"


def test_the_admin_role_reaches_operator_routes_with_system_scope_or_in_the_operators_project(
        cloud):
    for user in ("system-admin", "operator"):
        hosts = cloud.api(user).ok("GET", "/regions/eu-west/hosts")["hosts"]
        assert {h["name"] for h in hosts} == {"eu-1", "eu-2"}, user
    with leased(cloud, "seen-by-operator") as vcdn:
        listed = cloud.api("system-admin").ok("GET", "/vcdns")["vcdns"]
        assert vcdn["id"] in [v["id"] for v in listed]
    for user in ("member", "project-admin"):  # the admin of any other project is no operator
        refused = cloud.api(user).call("GET", "/regions/eu-west/hosts")
        assert refused.status_code == 403, (user, refused.text)
        assert "operator" in refused.json()["error"]["message"]
    # a system-scoped token owns no project: it leases nothing
    assert cloud.api("system-admin").call("POST", "/vcdns",
                                          json=vcdn_body("no-project")).status_code == 403


def test_a_policy_file_changes_the_answers(cloud):
    policy_file = cloud.policy_file
    member, reader = cloud.api("member"), cloud.api("reader")
    with leased(cloud, "policed") as vcdn:
        try:
            write_policy(policy_file, '"cdn:vcdn:purge": "rule:system_admin"\n'
                                      '"cdn:host:get_all": "role:reader"\n')
            refused = member.call("POST", f"/vcdns/{vcdn['id']}/invalidations",
                                  json={"paths": ["/a"]})
            assert refused.status_code == 403 and "cdn:vcdn:purge" in refused.text, refused.text
            # a check string is overridden, the scope a rule takes is not
            assert reader.call("GET", "/regions/eu-west/hosts").status_code == 403
            write_policy(policy_file, '"cdn:vcdn:delete": "rule:system_admin"\n')
            assert member.call("DELETE", f"/vcdns/{vcdn['id']}").status_code == 403
            member.ok("POST", f"/vcdns/{vcdn['id']}/invalidations", 202, json={"paths": ["/a"]})
        finally:
            write_policy(policy_file, "{}\n")


def test_without_a_valid_keystone_token_the_answer_is_401_naming_keystone(cloud):
    for token in (None, "not-a-token", cloud.running.operator_token):  # a local token too
        answer = Api(cloud.url, token, x_auth_token=True).call("GET", "/vcdns")
        assert answer.status_code == 401, (token, answer.text)
        assert answer.headers["WWW-Authenticate"] == f'Keystone uri="{cloud.auth_url}"'
    assert Api(cloud.url).call("GET", "/flavors").status_code == 401
    public = Api(cloud.url).session.get(f"{cloud.url}/healthz", timeout=10)
    assert public.status_code == 200



def test_an_operator_sets_a_keystone_projects_quota_and_the_project_sees_it(cloud):
    """Under Keystone a tenant is a project id this API keeps no row of (the fixture's
    projects are its own): an operator names it; a project sees its own quotas only."""
    project = cloud.projects["a"]

    def vcdns_limit(answer):
        return next(q for q in answer["quotas"] if q["name"] == "vcdns")["limit"]
    cloud.api("system-admin").ok("PUT", f"/tenants/{project}/quotas", json={"vcdns": 30})
    assert vcdns_limit(cloud.api("member").ok("GET", "/quotas")) == 30
    assert vcdns_limit(cloud.api("reader").ok("GET", f"/tenants/{project}/quotas")) == 30
    assert cloud.api("other").call("GET", f"/tenants/{project}/quotas").status_code == 404
    assert cloud.api("member").call("PUT", f"/tenants/{project}/quotas",
                                    json={"vcdns": 99}).status_code == 403
