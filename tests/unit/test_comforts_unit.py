"""In-process checks of the change machinery: If-Match matching, what a PATCH body
changes of a vCDN, what an update changes of a deployment, which servers the OpenStack
driver rebuilds (and in what waves), and the CLI's update options."""
import datetime as dt
import json
import types

import pytest
from click.testing import CliRunner

from cdnaas.cli.main import cli
from cdnaas.common import errors, etags
from cdnaas.common.sig import Origin, ServiceInstanceGraph
from cdnaas.ro.vim.base import Deployment, DeploymentFailed, EntryPoint, VnfInstance
from cdnaas.ro.vim.changes import sig_change
from cdnaas.ro.vim.openstack import rebuild, rolling
from cdnaas.ro.vim.openstack.context import OpenStackContext
from cdnaas.so.changes import parse_change
from tests.support.sigs import sample_sig

NOW = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
START, END = NOW - dt.timedelta(hours=1), NOW + dt.timedelta(hours=5)
ORIGIN = Origin("http", "origin.example.com", 8080)
CURRENT = [{"name": "eu-west", "demand": 100, "quality": {"min_mos": 4.0}},
           {"name": "us-east", "demand": 50, "quality": {"min_mos": 4.0}}]
KNOWN = {"eu-west", "us-east", "ap-south"}


@pytest.mark.parametrize("header, refusal", [
    (None, None), ("*", None), ('"7"', None), ('"1", "7"', None), ('"a,b" , "7"', None),
    ('W/"7"', "the weak tag W/\"7\" never matches"), ('"8"', "GET it again"),
    ('"07"', "GET it again"),
])
def test_if_match_compares_strongly(header, refusal):
    if refusal is None:
        etags.check_if_match(header, 7)
    else:
        with pytest.raises(errors.PreconditionFailed, match=refusal):
            etags.check_if_match(header, 7)


@pytest.mark.parametrize("header", ["7", '"7', '"7",', "W/7", '"\x7f"', '"' + "9" * 2000 + '"'])
def test_a_malformed_if_match_is_a_bad_request(header):
    with pytest.raises(errors.BadRequest) as raised:
        etags.check_if_match(header, 7)
    assert raised.value.field == "If-Match"


def change(body):
    return parse_change(body, CURRENT, ORIGIN, START, END, KNOWN, NOW)


def test_a_change_adds_updates_and_removes_regions_in_order():
    result = change({"regions": [{"name": "ap-south", "demand": 5, "quality": {"min_mos": 3.0}},
                                 {"name": "us-east", "demand": 60}],
                     "remove_regions": ["eu-west"]})
    assert [(r["name"], r["demand"]) for r in result.regions] == [("us-east", 60), ("ap-south", 5)]
    assert result.replan and result.origin == ORIGIN and result.lease_end == END


def test_an_origin_or_lease_change_alone_plans_nothing_again():
    result = change({"origin": "https://new.example.com", "lease": {"end": "2030-01-02T00:00:00Z"},
                     "regions": [{"name": "eu-west", "demand": 100}]})
    assert not result.replan and result.origin == Origin("https", "new.example.com", 443)
    assert result.lease_end == dt.datetime(2030, 1, 2, tzinfo=dt.timezone.utc)
    assert result.regions == CURRENT


@pytest.mark.parametrize("body, error, field", [
    ({"remove_regions": ["eu-west", "us-east"]}, errors.Unprocessable, "remove_regions"),
    ({"remove_regions": ["ap-south"]}, errors.Unprocessable, "remove_regions[0]"),
    ({"remove_regions": ["us-east", "us-east"]}, errors.BadRequest, "remove_regions[1]"),
    ({"regions": [{"name": "us-east", "demand": 1}], "remove_regions": ["us-east"]},
     errors.BadRequest, "remove_regions[0]"),
    ({"regions": [{"name": "mars", "demand": 1, "quality": {}}]}, errors.Unprocessable,
     "regions[0].name"),
    ({"regions": [{"name": "ap-south", "demand": 1}]}, errors.BadRequest, "regions[0].quality"),
    ({"regions": [{"name": "eu-west"}, {"name": "eu-west"}]}, errors.BadRequest,
     "regions[1].name"),
    ({"lease": {"end": "2029-12-31T23:59:59Z"}}, errors.BadRequest, "lease.end"),
    ({"lease": {"end": "2030-01-01T00:00:00Z"}}, errors.BadRequest, "lease.end"),
    ({"lease": {"end": "soon"}}, errors.BadRequest, "lease.end"),
    ({"origin": "ftp://x.example"}, errors.BadRequest, "origin"),
])
def test_a_contradictory_change_names_its_field(body, error, field):
    with pytest.raises(error) as raised:
        change(body)
    assert raised.value.field == field


def deployment_of(sig):
    return Deployment(
        deployment_id=sig.vcdn_id, driver="test",
        vnfs=[VnfInstance(name=v.name, role=v.role, region=v.region, host=v.host,
                          address="198.18.0.9", resource_id=v.name, vcpus=v.vcpus)
              for v in sig.vnfs],
        entry_point=EntryPoint(hostname=sig.hostname, dns_servers=[]),
        region_endpoints={r.name: "198.18.0.2" for r in sig.regions},
        resources={"regions": {r.name: {} for r in sig.regions}})


def test_sig_change_says_which_regions_and_vnfs_come_stay_go_and_move():
    before = ServiceInstanceGraph.from_dict(sample_sig("v", {"north": 2, "south": 1}))
    document = sample_sig("v", {"south": 2, "west": 1})
    after = ServiceInstanceGraph.from_dict(document)
    found = sig_change(deployment_of(before), after)
    assert (found.added_regions, found.removed_regions) == (["west"], ["north"])
    assert sorted(v.name for v in found.new) == ["south-cache-2", "west-cache-1", "west-lb"]
    assert sorted(v.name for v in found.gone) == ["north-cache-1", "north-cache-2", "north-lb"]
    assert [v.name for v in found.moved] == ["dns-1"] and found.regions_changed


class FakeCloud:
    """A cloud whose compute API offers microversions up to ``top`` (``held``: the one
    clouds.yaml holds it at), as :func:`openstack.utils.supports_microversion` reads them."""

    def __init__(self, top="2.96", held=None):
        endpoint = types.SimpleNamespace(min_microversion="2.1", max_microversion=top)
        self.compute = types.SimpleNamespace(default_microversion=held,
                                             get_endpoint_data=lambda: endpoint)

    def conn(self, _vim_region=None):
        return self


def openstack_sig(caches=None, origin="192.0.2.10", **service):
    document = sample_sig("v", caches or {"north": 2, "south": 1})
    document["origin"] = {"scheme": "http", "host": origin, "port": 8080}
    return ServiceInstanceGraph.from_dict({**document, "service": service})


def rebuilt(previous, sig, recorded=None, cloud=None):
    """Names of the servers the OpenStack driver rebuilds to bring a deployment of
    ``previous`` (digests ``recorded``: name -> user-data) to ``sig``, and their user-data."""
    deployment = deployment_of(previous)
    deployment.resources["servers"] = {
        v.name: {"server_id": f"id-{v.name}", "region": v.region,
                 rebuild.DIGEST_KEY: rebuild.digest((recorded or {})[v.name])
                 if v.name in (recorded or {}) else None}
        for v in previous.vnfs if v.role != "load_balancer"}
    kept = [v for v in sig.vnfs if v.role != "load_balancer"]
    prepared = {"origin_address": sig.origin.host, "secondary_address": None,
                "images": {(None, v.image): f"image-{v.image}" for v in kept}}
    context = OpenStackContext(deployment_id=sig.vcdn_id, sig=sig, previous=previous,
                               record=deployment.resources, deployment=deployment,
                               cloud=cloud or FakeCloud(), prepared=prepared,
                               addresses={v.name: v.address for v in deployment.vnfs})
    found = rolling.rebuilds(context, kept)
    assert all(r.image_id == f"image-{r.vnf.image}" for r in found)
    return {r.vnf.name: r.user_data for r in found}


def reconfigured(previous, sig):
    """Whether an update from ``previous`` to ``sig`` rebuilds servers of the OpenStack
    driver: the caches' configuration or the served names change."""
    change = sig_change(deployment_of(previous), sig, previous)
    return change.caches_reconfigured or change.renamed


def test_the_openstack_driver_rebuilds_the_servers_whose_user_data_changes():
    sig = openstack_sig()
    caches = ["north-cache-1", "north-cache-2", "south-cache-1"]
    moved = openstack_sig(origin="192.0.2.20")
    assert reconfigured(sig, moved)
    new = rebuilt(sig, moved)  # no digest recorded (older deployments): the previous SIG's
    assert sorted(new) == caches
    assert all("server 192.0.2.20:8080;" in text for text in new.values())
    named = openstack_sig(hostnames=["www.example.org"])
    assert reconfigured(sig, named)
    assert list(rebuilt(sig, named)) == ["dns-1"]
    assert "www.example.org" in rebuilt(sig, named)["dns-1"]
    assert rebuilt(sig, sig) == {} and not reconfigured(sig, sig)
    # recorded digests decide: a server already given the new origin is not rebuilt
    assert sorted(rebuilt(sig, moved, {"north-cache-1": new["north-cache-1"]})) == caches[1:]
    # a size alone (a cache more in north) changes user-data but rebuilds nothing
    assert not reconfigured(sig, openstack_sig({"north": 3, "south": 1}))


def test_without_compute_api_2_57_a_new_origin_is_refused_before_anything_changes():
    sig, moved = openstack_sig(), openstack_sig(origin="192.0.2.20")
    for cloud in (FakeCloud(top="2.56"), FakeCloud(top="2.96", held="2.53")):
        with pytest.raises(DeploymentFailed, match="needs compute API 2.57.*nothing was changed"):
            rebuilt(sig, moved, cloud=cloud)
    assert rebuilt(sig, sig, cloud=FakeCloud(top="2.56")) == {}  # nothing to rebuild: no need
    assert len(rebuilt(sig, moved, cloud=FakeCloud(top="2.57"))) == 3


@pytest.mark.parametrize("region, changed, expected", [
    (1, 1, [[1]]),  # in place: nothing else serves
    (2, 2, [[1], [2]]),
    (3, 3, [[1], [2], [3]]),
    (4, 4, [[1, 2], [3, 4]]),
    (5, 5, [[1, 2], [3, 4], [5]]),
    (4, 1, [[1]]),
    (6, 3, [[1], [2], [3]]),
])
def test_caches_are_rebuilt_in_waves_that_never_empty_their_pool(region, changed, expected):
    found = rebuild.waves(list(range(1, changed + 1)), region)
    assert found == expected
    if region > 1:
        assert all(len(wave) <= max(1, region // 2) for wave in found)


def test_a_restore_sees_which_servers_an_interrupted_update_rebuilt():
    entry = {rebuild.DIGEST_KEY: rebuild.digest("old")}
    assert rebuild.rebuilt_since({rebuild.METADATA_KEY: rebuild.digest("new")}, entry)
    assert rebuild.rebuilt_since({rebuild.METADATA_KEY: rebuild.digest("new")}, {})
    assert not rebuild.rebuilt_since({rebuild.METADATA_KEY: rebuild.digest("old")}, entry)
    assert not rebuild.rebuilt_since({"cdnaas_role": "cache"}, entry)  # booted before digests
    assert not rebuild.rebuilt_since(None, entry)


def test_the_cli_update_sends_every_change_in_one_body(monkeypatch):
    sent = {}

    def update_vcdn(_self, vcdn_id, body, if_match=None):
        sent.update(id=vcdn_id, body=body, if_match=if_match)
        return {"vcdn": {"id": vcdn_id, "name": "x", "state": "UPDATING"},
                "operation": {"id": "op", "state": "PENDING"}}
    monkeypatch.setattr("cdnaas.cli.client.ApiClient.update_vcdn", update_vcdn)
    result = CliRunner().invoke(cli, [
        "--json", "vcdn", "update", "v1", "--region", "eu-west:200", "--add-region",
        "us-east:10:p95=300", "--add-region", "ap-south:5", "--remove-region", "old-one",
        "--origin", "http://n.example", "--lease-end", "2031-01-01T00:00:00Z",
        "--if-match", '"4"'], env={"CDNAAS_TOKEN": "cdn_x_y"})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["operation"]["id"] == "op"
    assert sent["body"] == {
        "regions": [{"name": "eu-west", "demand": 200},
                    {"name": "us-east", "demand": 10,
                     "quality": {"response_time": {"percentile": 95.0, "max_ms": 300.0}}},
                    {"name": "ap-south", "demand": 5, "quality": {"min_mos": 3.6}}],
        "remove_regions": ["old-one"], "origin": "http://n.example",
        "lease": {"end": "2031-01-01T00:00:00Z"}}
    assert sent["if_match"] == '"4"'
    nothing = CliRunner().invoke(cli, ["vcdn", "update", "v1"], env={"CDNAAS_TOKEN": "x"})
    assert nothing.exit_code == 2 and "nothing to change" in nothing.output
