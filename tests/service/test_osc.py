"""``openstack cdn ...`` (the OSC plugin, :mod:`cdnaas.osc`) run as the real ``openstack``
command against a stack of the five services (noop driver), authenticated with the
embedded default's local tokens in ``X-Auth-Token`` (``--os-auth-type admin_token``):
real cliff parsing, real output formats, real HTTP."""
import pytest

from tests.support.api import populated_stack
from tests.support.osc import with_token

ORIGIN = "http://origin.example.com:8080"


@pytest.fixture(scope="module", params=["sqlite"])
def stack(request, tmp_path_factory):
    with populated_stack(request, tmp_path_factory.mktemp("stack-osc")) as running:
        yield running


@pytest.fixture(scope="module")
def acme(stack):
    return with_token(stack.urls["api"], stack.acme.token)


def test_catalogue_lists_flavors_and_regions(acme):
    flavors = acme.ok("cdn", "flavor", "list", "-f", "json")
    assert [(f["Name"], f["Technology"]) for f in flavors] == [("static", "vm")]
    regions = acme.ok("cdn", "region", "list", "-f", "json")
    assert sorted(r["Name"] for r in regions) == ["doomed", "eu-west", "us-east"]
    assert [r["Name"] for r in regions if r["Default"]] == ["eu-west"]


def test_a_vcdn_leased_changed_purged_measured_and_ended(stack, acme):
    created = acme.ok("cdn", "vcdn", "create", "osc-news", "--flavor", "static",
                      "--origin", ORIGIN, "--region", "eu-west:1000:4.2",
                      "--region", "us-east:500:p95=200", "--lease-hours", "2",
                      "--hostname", "www.news.example.org", "--wait", "-f", "json")
    assert created["state"] == "ACTIVE"
    assert created["hostnames"] == ["www.news.example.org"]
    assert {r["name"]: (r["demand"], r["quality"]) for r in created["regions"]} == {
        "eu-west": (1000, {"min_mos": 4.2}),
        "us-east": (500, {"response_time": {"percentile": 95.0, "max_ms": 200.0}})}
    assert created["dns_servers"] and created["hostname"].startswith("osc-news.")
    vcdn_id = created["id"]
    # the API agrees with what the command showed
    assert stack.acme.ok("GET", f"/vcdns/{vcdn_id}")["state"] == "ACTIVE"

    listed = acme.ok("cdn", "vcdn", "list", "-f", "value", "-c", "ID", "-c", "State")
    assert listed.split() == [vcdn_id, "ACTIVE"]
    shown = acme.ok("cdn", "vcdn", "show", "osc-news", "-f", "json")  # by name
    assert (shown["id"], shown["revision"]) == (vcdn_id, 1)

    acme.ok("cdn", "vcdn", "set", vcdn_id, "--region", "eu-west:2000", "--add-region",
            "doomed:100", "--if-match", "1", "--wait")
    changed = stack.acme.ok("GET", f"/vcdns/{vcdn_id}")
    assert changed["revision"] == 2
    assert {r["name"]: r["demand"] for r in changed["regions"]} == {
        "eu-west": 2000, "us-east": 500, "doomed": 100}
    stale = acme.fails("cdn", "vcdn", "set", vcdn_id, "--origin", "http://other.example.com",
                       "--if-match", "1")
    assert "precondition" in stale.lower() or "etag" in stale.lower(), stale

    purged = acme.ok("cdn", "vcdn", "purge", "osc-news", "--path", "/a.png",
                     "--path-prefix", "/video/", "--wait", "-f", "json")
    assert purged["state"] == "COMPLETED" and purged["vcdn"] == vcdn_id
    assert (purged["paths"], purged["prefixes"]) == (["/a.png"], ["/video/"])
    assert sorted({c["region"] for c in purged["caches"]}) == ["doomed", "eu-west", "us-east"]
    assert all(c["state"] == "COMPLETED" for c in purged["caches"])

    usage = acme.ok("cdn", "vcdn", "usage", vcdn_id, "-f", "json")
    assert [row["Region"] for row in usage][-1] == "total"
    assert sorted(row["Region"] for row in usage[:-1]) == ["doomed", "eu-west", "us-east"]
    assert usage[-1]["vCPU-hours"] == pytest.approx(sum(r["vCPU-hours"] for r in usage[:-1]),
                                                    abs=1e-3)

    acme.ok("cdn", "vcdn", "delete", "osc-news", "--wait")
    assert stack.acme.ok("GET", f"/vcdns/{vcdn_id}")["state"] == "DELETED"
    assert acme.ok("cdn", "vcdn", "list", "-f", "json") == []
    assert acme.ok("cdn", "vcdn", "list", "--all", "--state", "deleted", "-f", "value",
                   "-c", "Name").split() == ["osc-news"]


def test_errors_name_what_to_fix_and_change_nothing(stack, acme):
    bad_region = acme.fails("cdn", "vcdn", "create", "osc-bad", "--flavor", "static",
                            "--origin", ORIGIN, "--region", "eu-west", "--lease-hours", "1",
                            status=2)
    assert "'eu-west' is not NAME:DEMAND[:QUALITY]" in bad_region
    unknown_flavor = acme.fails("cdn", "vcdn", "create", "osc-bad", "--flavor", "gold",
                                "--origin", ORIGIN, "--region", "eu-west:10", "--lease-hours",
                                "1")
    assert "flavor gold is not offered" in unknown_flavor and "field: flavor" in unknown_flavor
    assert "no vCDN has the name or id 'nowhere'" in acme.fails("cdn", "vcdn", "show", "nowhere")
    assert "nothing to change" in acme.fails("cdn", "vcdn", "set", "nowhere")
    assert stack.acme.ok("GET", "/vcdns?include_deleted=true&name=osc-bad")["vcdns"] == []


def test_another_tenant_neither_sees_nor_ends_a_vcdn(stack, acme):
    created = acme.ok("cdn", "vcdn", "create", "osc-private", "--flavor", "static",
                      "--origin", ORIGIN, "--region", "eu-west:10", "--lease-hours", "1",
                      "-f", "json")
    globex = with_token(stack.urls["api"], stack.globex.token)
    assert globex.ok("cdn", "vcdn", "list", "-f", "json") == []
    globex.fails("cdn", "vcdn", "delete", created["id"])
    acme.ok("cdn", "vcdn", "delete", created["id"], "--wait")


def test_a_bad_token_is_refused(stack):
    refused = with_token(stack.urls["api"], "cdn_not_a_token").fails("cdn", "vcdn", "list")
    assert "unknown or revoked" in refused or "401" in refused, refused
