"""Quotas (cdnaas.so.quotas) through the customer API, on SQLite and on PostgreSQL: the
operator sets defaults and a tenant's limits, every customer request that takes more is
checked inside its transaction, and a refusal names the quota and the use."""
import concurrent.futures
import json

import pytest
from click.testing import CliRunner

from cdnaas.cli.main import cli
from tests.support.api import Api, populated_stack, vcdn_body


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def stack(request, tmp_path_factory):
    with populated_stack(request, tmp_path_factory.mktemp(f"quotas-{request.param}"),
                         {"CDNAAS_IM_INTERVAL": "3600"}) as running:
        yield _prepare(running)


def _prepare(running):
    for region in ("wide", "wide-2"):
        running.operator.ok("POST", "/regions", 201, json={
            "name": region, "client_prefixes": ["10.6.0.0/16" if region == "wide"
                                                else "10.7.0.0/16"]})
        running.operator.ok("POST", f"/regions/{region}/hosts", 201,
                            json={"name": f"{region}-1", "vcpus": 256, "ram_mb": 1 << 20})
    return running


def tenant(stack, name, **limits):
    """A new tenant's API client, with ``limits`` set by the operator first."""
    stack.operator.ok("POST", "/tenants", 201, json={"name": name})
    token = stack.operator.ok("POST", f"/tenants/{name}/tokens", 201, json={})["token"]
    if limits:
        stack.operator.ok("PUT", f"/tenants/{name}/quotas", json=limits)
    return Api(stack.urls["api"], token)


def quota(answer, name):
    return next(q for q in answer["quotas"] if q["name"] == name)


def test_fifty_concurrent_creates_under_a_quota_of_ten_accept_exactly_ten(stack):
    client = tenant(stack, "racer", vcdns=10)

    def create(number):
        answer = client.call("POST", "/vcdns", json=vcdn_body(f"race-{number}", (("wide", 10),)))
        return answer.status_code, answer.json()
    with concurrent.futures.ThreadPoolExecutor(50) as pool:
        answers = list(pool.map(create, range(50)))
    statuses = sorted(status for status, _body in answers)
    assert statuses == [202] * 10 + [403] * 40
    refused = next(body for status, body in answers if status == 403)["error"]
    assert refused["field"] == "vcdns" and "quota vcdns exceeded" in refused["message"]
    assert refused["details"][0] == {"quota": "vcdns", "limit": 10, "in_use": 10,
                                     "requested": 11}
    shown = quota(client.ok("GET", "/quotas"), "vcdns")
    assert (shown["limit"], shown["in_use"]) == (10, 10)
    listed = client.ok("GET", "/vcdns")["vcdns"]
    assert len(listed) == 10


def test_vcpus_are_counted_per_region_and_a_change_that_grows_is_checked(stack):
    client = tenant(stack, "regional", vcpus_per_region=5)
    first = client.ok("POST", "/vcdns", 202, json=vcdn_body("one", (("wide", 10),)))
    client.wait(first["operation"]["id"])
    second = client.call("POST", "/vcdns", json=vcdn_body("two", (("wide", 10),)))
    assert second.status_code == 403, second.text
    error = second.json()["error"]
    assert error["field"] == "vcpus_per_region"
    assert error["details"][0]["requested"] == 8 and error["details"][0]["limit"] == 5
    elsewhere = client.ok("POST", "/vcdns", 202, json=vcdn_body("three", (("wide-2", 10),)))
    client.wait(elsewhere["operation"]["id"])
    # the vCDN of wide-2 taking wide too would hold 4 + 3 vCPUs there
    grown = client.call("PATCH", f"/vcdns/{elsewhere['vcdn']['id']}",
                        json={"regions": [{"name": "wide", "demand": 10,
                                           "quality": {"min_mos": 4.0}}]})
    assert grown.status_code == 403 and grown.json()["error"]["field"] == "vcpus_per_region"
    assert quota(client.ok("GET", "/quotas"), "vcpus_per_region")["in_use"] == 4


def test_a_quota_lowered_below_use_refuses_only_changes_that_take_more(stack):
    client = tenant(stack, "shrunk")
    made = client.ok("POST", "/vcdns", 202, json=vcdn_body(
        "named", (("wide", 10),), hostnames=["a.shrunk.example", "b.shrunk.example"]))
    client.wait(made["operation"]["id"])
    stack.operator.ok("PUT", "/tenants/shrunk/quotas", json={"hostnames": 1,
                                                            "vcpus_per_region": 1})
    changed = client.ok("PATCH", f"/vcdns/{made['vcdn']['id']}", 202,
                        json={"regions": [{"name": "wide", "demand": 20,
                                           "quality": {"min_mos": 4.0}}]})
    client.wait(changed["operation"]["id"])
    more = client.call("PATCH", f"/vcdns/{made['vcdn']['id']}",
                       json={"hostnames": ["a.shrunk.example", "b.shrunk.example",
                                           "c.shrunk.example"]})
    assert more.status_code == 403 and more.json()["error"]["field"] == "hostnames"
    refused = client.call("POST", "/vcdns", json=vcdn_body("other", (("wide-2", 10),)))
    assert refused.status_code == 403 and refused.json()["error"]["field"] == "vcpus_per_region"


def test_purges_per_hour(stack):
    client = tenant(stack, "purger", purges_per_hour=2)
    made = client.ok("POST", "/vcdns", 202, json=vcdn_body("p", (("wide", 10),)))
    client.wait(made["operation"]["id"])
    path = f"/vcdns/{made['vcdn']['id']}"
    client.ok("POST", f"{path}/invalidations", 202, json={"paths": ["/a"]})
    client.ok("POST", f"{path}/prefetches", 202, json={"paths": ["/b"]})
    third = client.call("POST", f"{path}/invalidations", json={"paths": ["/c"]})
    assert third.status_code == 403, third.text
    assert third.json()["error"]["details"][0] == {"quota": "purges_per_hour", "limit": 2,
                                                   "in_use": 2, "requested": 3}


def test_operators_set_defaults_and_a_tenant_falls_back_to_them(stack):
    client = tenant(stack, "defaulted")
    before = stack.operator.ok("GET", "/quotas/defaults")
    assert quota(before, "vcdns")["limit"] == 100  # the setting's
    stack.operator.ok("PUT", "/quotas/defaults", json={"vcdns": 3})
    try:
        assert quota(client.ok("GET", "/quotas"), "vcdns")["limit"] == 3
        stack.operator.ok("PUT", "/tenants/defaulted/quotas", json={"vcdns": 7})
        assert quota(stack.operator.ok("GET", "/quotas?tenant=defaulted"), "vcdns")["limit"] == 7
        stack.operator.ok("PUT", "/tenants/defaulted/quotas", json={"vcdns": None})
        assert quota(client.ok("GET", "/tenants/defaulted/quotas"), "vcdns")["limit"] == 3
    finally:
        stack.operator.ok("PUT", "/quotas/defaults", json={"vcdns": None})
    assert quota(client.ok("GET", "/quotas"), "vcdns")["limit"] == 100


@pytest.mark.parametrize("body, field", [
    ({"vcdns": -1}, "vcdns"), ({"nope": 1}, "nope"), ({"hostnames": 1.5}, "hostnames"),
    ({"vcdns": True}, "vcdns"), ({}, "body")])
def test_bad_limits_are_refused_and_change_nothing(stack, body, field):
    before = stack.operator.ok("GET", "/quotas/defaults")
    answer = stack.operator.call("PUT", "/quotas/defaults", json=body)
    assert answer.status_code == 400, answer.text
    assert stack.operator.ok("GET", "/quotas/defaults") == before


def test_only_operators_set_quotas_and_tenants_see_only_their_own(stack):
    client = tenant(stack, "curious")
    assert client.call("PUT", "/tenants/curious/quotas", json={"vcdns": 1000}).status_code == 403
    assert client.call("PUT", "/quotas/defaults", json={"vcdns": 1000}).status_code == 403
    assert client.call("GET", "/tenants/acme/quotas").status_code == 404
    assert client.ok("GET", "/quotas?tenant=acme")["tenant"] == "curious"
    assert stack.operator.call("GET", "/quotas").status_code == 400


def test_the_cli_sets_and_shows_quotas(stack, tmp_path):
    tenant(stack, "clied")
    env = {"CDNAAS_CONFIG": str(tmp_path / "config.yaml"), "CDNAAS_API_URL": stack.urls["api"],
           "CDNAAS_TOKEN": stack.operator_token}
    runner = CliRunner()
    done = runner.invoke(cli, ["--json", "quota", "set", "--tenant", "clied", "vcdns=4",
                               "hostnames=default"], env=env, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert quota(json.loads(done.stdout), "vcdns")["limit"] == 4
    shown = runner.invoke(cli, ["quota", "show", "--tenant", "clied"], env=env,
                          catch_exceptions=False)
    assert shown.exit_code == 0 and "Quotas of clied" in shown.output
    assert "vcpus_per_region" in shown.output
    bad = runner.invoke(cli, ["quota", "set", "--tenant", "clied", "vcdns=many"], env=env)
    assert bad.exit_code == 2 and "NAME=LIMIT" in bad.output
    both = runner.invoke(cli, ["quota", "set", "vcdns=1"], env=env)
    assert both.exit_code == 2 and "--tenant" in both.output
