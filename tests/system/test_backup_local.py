"""A restore on the embedded default (SQLite, the local driver, real nginx and dnsmasq):
a backup, 10 operations after it, the stack stopped, the backup restored, the stack
started: RO rebuilds the vCDN deleted since, removes those created since and the VNFs
added since, sets the origin changed since back, and the ledger holds (SO's
reservations = the VNFs RO reports = the namespaces, CPU groups and processes running),
with no vCDN record lost."""
import concurrent.futures
import contextlib
import os
import subprocess
from pathlib import Path

import pytest

from cdnaas.cli import stack as stacks
from cdnaas.common.clients import RoClient
from cdnaas.db.engine import Database
from cdnaas.origin.server import serve_in_thread
from cdnaas.ro.vim.local import clients
from tests.support.api import populate, vcdn_body
from tests.support.ledger import assert_ledger, running
from tests.support.stack import running_stack

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")

EU, US = (("eu-west", 10),), (("us-east", 10),)
#: one cache per region at this demand: a changed config is reloaded without a rolling wait
QOE_TEMPLATE = Path(__file__).resolve().parents[2] / "plugins/qoe_video/template.yaml"


@pytest.fixture
def second_origin():
    server, _thread = serve_in_thread("0.0.0.0", 0)
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def stack(tmp_path, origin):
    """A stack on the local driver; once stopped, every VNF of its RO is removed."""
    extra = {"CDNAAS_VIM_DRIVER": "local", "CDNAAS_IM_INTERVAL": "3600"}
    with contextlib.ExitStack() as after, \
            running_stack(None, tmp_path, extra_env=extra) as started:
        after.callback(cli, started, "local", "cleanup", "--all")
        populate(started)
        sidr = started.operator.call("POST", "/templates", data=QOE_TEMPLATE.read_bytes(),
                                     headers={"Content-Type": "application/yaml"})
        assert sidr.status_code == 201, sidr.text
        for region, host in (("eu-west", "eu-3"), ("us-east", "us-2")):  # room for 10 operations
            started.operator.ok("POST", f"/regions/{region}/hosts", 201,
                                json={"name": host, "vcpus": 16, "ram_mb": 65536})
        started.so_db = Database(stacks.database_url_of(started.env, "so"))
        started.ro = started.client(RoClient)
        started.origin = f"http://127.0.0.1:{origin.server_address[1]}"
        yield started
        started.so_db.dispose()


def run_all(stack, requests):
    """Send ``[(method, path, body)]`` at once; wait until every operation ends COMPLETED;
    return the vCDN ids of the creations."""
    accepted = [stack.acme.ok(method, path, 202, json=body) for method, path, body in requests]
    with concurrent.futures.ThreadPoolExecutor(len(accepted)) as pool:
        ended = list(pool.map(lambda a: stack.acme.wait(a["operation"]["id"], 120), accepted))
    assert [o["state"] for o in ended] == ["COMPLETED"] * len(ended), ended
    return [a["vcdn"]["id"] for a, (m, _p, _b) in zip(accepted, requests) if m == "POST"]


def cli(stack, *args):
    done = subprocess.run(stacks.cli_command(*args), env=stack.env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def create(stack, name, regions, origin=None):
    return ("POST", "/vcdns", vcdn_body(name, regions, flavor="qoe-video",
                                        origin=origin or stack.origin))


def patch(vcdn_id, **changes):
    return ("PATCH", f"/vcdns/{vcdn_id}", changes)


def delete(vcdn_id):
    return ("DELETE", f"/vcdns/{vcdn_id}", None)


def fetch(vcdn_id, vcdn, path):
    entry = vcdn["entry_point"]
    with clients.client(vcdn_id, "eu-west", "10.1.0.30") as viewer:
        answer = viewer.resolve(entry["dns_servers"][0], entry["hostname"])
        return viewer.fetch(f"http://{entry['hostname']}{path}",
                            resolve=(entry["hostname"], answer[0]))[0]


def test_a_restore_of_a_backup_taken_10_operations_ago(stack, origin, second_origin, tmp_path):
    a, b, c = run_all(stack, [create(stack, n, EU) for n in ("a", "b", "c")])
    cli(stack, "db", "backup", str(tmp_path / "backups"))
    moved = f"http://127.0.0.1:{second_origin.server_address[1]}"
    us_east = [{"name": "us-east", "demand": 10, "quality": {"min_mos": 4.0}}]
    d, e = run_all(stack, [create(stack, "d", EU), create(stack, "e", US), delete(a),
                           patch(b, regions=us_east), patch(c, origin=moved)])
    f, = run_all(stack, [patch(d, origin=moved), delete(e), create(stack, "f", US),
                         patch(c, regions=us_east), patch(b, lease={"end": "2098-01-01T00:00:00Z"})])
    before = assert_ledger(stack)
    assert set(before) == {b, c, d, f} and len(before[b]) == len(before[c]) == 5

    stack.stack.stop()
    stack.so_db.dispose()  # the restore refuses while a process has the databases open
    cli(stack, "db", "restore", "--yes", str(tmp_path / "backups"))
    assert running(stack)["namespaces"] == before, "the restore touched what runs"
    stack.stack.start(timeout=120)

    vcdns = {v["id"]: v for v in stack.acme.ok("GET", "/vcdns")["vcdns"]}
    assert {i: v["state"] for i, v in vcdns.items()} == {a: "ACTIVE", b: "ACTIVE", c: "ACTIVE"}
    assert [stack.acme.call("GET", f"/vcdns/{i}").status_code for i in (d, e, f)] == [404] * 3
    after = assert_ledger(stack)
    assert set(after) == {a, b, c} and {len(vnfs) for vnfs in after.values()} == {3}
    report, = stack.ro.reconciliations()
    assert report.status == "DONE", report
    done = {(x.deployment, x.vnf): x.action for x in report.actions}
    assert done == {(d, None): "remove", (f, None): "remove",
                    **{(a, vnf): "rebuild" for vnf in after[a]},
                    **{(b, vnf): "adopt" for vnf in after[b]},
                    **{(b, vnf): "remove" for vnf in before[b] - after[b]},
                    **{(c, vnf): "adopt" for vnf in after[c]},
                    **{(c, vnf): "remove" for vnf in before[c] - after[c]}}, report
    assert fetch(a, vcdns[a], "/objects/small") == 200  # the rebuilt one serves
    assert fetch(c, vcdns[c], "/plain/after-restore") == 200  # from the origin of the backup
    assert origin.stats().get("/plain/after-restore") == 1
    assert "/plain/after-restore" not in second_origin.stats()
