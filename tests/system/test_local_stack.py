"""The five services on the local driver: a vCDN leased through the customer API
serves real clients in each region, and leaves nothing when it ends or fails."""
import os

import pytest

from cdnaas.ro.vim.local import clients, network
from tests.support.api import populate, vcdn_body
from tests.support.faults import local_host_fails
from tests.support.stack import running_stack

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("local-stack")
    extra = {"CDNAAS_VIM_DRIVER": "local", "CDNAAS_LOCAL_HOST_CPUS": local_host_fails("doomed-1")}
    with running_stack(None, tmp, extra_env=extra) as running:
        yield populate(running)


def leftovers(vcdn_id):
    return ([n for n in network.list_namespaces() if vcdn_id in n]
            + [b[0] for b in network.list_bridges() if b[2] == vcdn_id])


def test_a_leased_vcdn_serves_clients_in_each_region_and_ends_cleanly(stack, origin):
    body = vcdn_body("real", (("eu-west", 1000), ("us-east", 1000)),
                     origin=f"http://127.0.0.1:{origin.server_address[1]}")
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
    operation = stack.acme.wait(accepted["operation"]["id"])
    assert operation["state"] == "COMPLETED", operation
    vcdn = stack.acme.ok("GET", f"/vcdns/{accepted['vcdn']['id']}")
    entry = vcdn["entry_point"]
    assert entry["hostname"] == "real.acme.cdn.example.net" and len(entry["dns_servers"]) == 2
    balancers = {r["name"]: r["load_balancer"] for r in vcdn["regions"]}
    for index, (region, client_address) in enumerate((("eu-west", "10.1.0.30"),
                                                       ("us-east", "10.2.0.30"))):
        with clients.client(vcdn["id"], region, client_address) as viewer:
            answer = viewer.resolve(entry["dns_servers"][index], entry["hostname"])
            assert answer == [balancers[region]]
            statuses = [viewer.fetch(f"http://{entry['hostname']}/objects/chunk-low",
                                     resolve=(entry["hostname"], answer[0]))
                        for _ in range(2)]
            assert [s[0] for s in statuses] == [200, 200]
            assert [s[1]["x-cache-status"] for s in statuses] == ["MISS", "HIT"]
    ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn['id']}", 202)
    assert stack.acme.wait(ended["operation"]["id"])["state"] == "COMPLETED"
    assert leftovers(vcdn["id"]) == []


def test_a_failing_cache_rolls_the_whole_deployment_back(stack, origin):
    body = vcdn_body("doomed", (("eu-west", 10), ("doomed", 10)),
                     origin=f"http://127.0.0.1:{origin.server_address[1]}")
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
    operation = stack.acme.wait(accepted["operation"]["id"])
    assert operation["state"] == "ROLLED_BACK" and "removed" in operation["error"]
    assert stack.acme.ok("GET", f"/vcdns/{accepted['vcdn']['id']}")["state"] == "FAILED"
    assert leftovers(accepted["vcdn"]["id"]) == []


@pytest.mark.parametrize("origin_url", ["http://127.0.0.1;include /etc/passwd",
                                        "http://127.0.0.1:80/\nserver {", "http://{evil}:80"])
def test_a_malicious_origin_is_refused_before_anything_is_rendered(stack, origin_url):
    response = stack.acme.call("POST", "/vcdns", json=vcdn_body("evil", origin=origin_url))
    assert response.status_code == 400 and response.json()["error"]["field"] == "origin"


def test_a_vcdn_a_failed_test_left_running_goes_with_its_stack(tmp_path, origin):
    """A test that fails before deleting its vCDN leaves its VNFs to the stack's stop."""
    body = vcdn_body("left", (("eu-west", 1000),),
                     origin=f"http://127.0.0.1:{origin.server_address[1]}")
    with running_stack(None, tmp_path, extra_env={"CDNAAS_VIM_DRIVER": "local"}) as running:
        acme = populate(running).acme
        accepted = acme.ok("POST", "/vcdns", 202, json=body)
        assert acme.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
        vcdn_id = accepted["vcdn"]["id"]
        assert leftovers(vcdn_id)  # it runs
    assert leftovers(vcdn_id) == []
