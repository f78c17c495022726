"""Traffic and usage end to end: what viewers received is what the bill says.

- a balancer's real nginx logs each request; RO's reader gets every record once from a
  byte position, across a rotation, and only from the management side;
- the Instance Manager stores per-minute rows with its cursor in one transaction, so a
  lost answer or a restart counts nothing twice (SQLite and PostgreSQL);
- the customer API on the noop driver: usage with its price, traffic series, the
  NDJSON export, the CLI, tenancy and windows, and the bill of a DELETED vCDN;
- on the local driver (root), clients in region namespaces fetch known objects: the
  usage's bytes_out is the sum of the bytes they received (status lines and headers
  included, nginx ``$bytes_sent``), its requests and hit ratio what their answers said,
  and the export holds the same records.
"""
import contextlib
import datetime as dt
import json
import os
import socket
import subprocess
import time
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from cdnaas.cli.main import cli
from cdnaas.common import answers
from cdnaas.common.ports import free_loopback_ports
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.common.timeutil import isoformat, utcnow
from cdnaas.db import migrate
from cdnaas.db.engine import Database
from cdnaas.im import usage
from cdnaas.im.models import Usage, UsageCursor
from cdnaas.im.reconcile import Seen
from cdnaas.ro import traffic
from cdnaas.ro.vim import logfiles
from cdnaas.ro.vim.local import clients
from cdnaas.ro.vim.noop import NoopDriver
from cdnaas.vnf import endpoints, tools
from cdnaas.vnf.balancer import lb_config
from tests.support.api import populate, vcdn_body
from tests.support.certs import TestCA
from tests.support.im import eventually
from tests.support.sigs import sample_sig
from tests.support.stack import running_stack

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="the local driver needs root")


def fetch(address, port, path, host="vcdn.example", source=None):
    """GET ``path`` on a connection of its own; ``(status, headers, bytes received)``:
    every byte the server sent (status line, headers and body) until it closed."""
    with socket.create_connection((address, port), timeout=10,
                                  source_address=(source, 0) if source else None) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
                     .encode())
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head = received.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])}
    return int(head[0].split()[1]), headers, len(received)


# -- a real balancer's log, read over HTTP ------------------------------------------------------

@contextlib.contextmanager
def running_balancer(tmp_path, origin, **options):
    """A balancer VNF's nginx on loopback (its rendered config, ``options`` given to
    :func:`lb_config`) in front of the sample origin; yields ``(public port,
    management port, prefix, nginx command)``."""
    public, management = free_loopback_ports(2)
    prefix = tmp_path / "lb"
    text = lb_config(name="lb", workers=1, listen_address="127.0.0.1",
                               listen_port=public, management_port=management,
                               members=[("origin", "127.0.0.1", origin.server_address[1])],
                               prefix_dir=str(prefix), management_sources=["127.0.0.1"],
                               user="root" if ROOT else None, **options)
    tools.prepare_nginx_prefix(str(prefix))
    (prefix / "nginx.conf").write_text(text)
    nginx = tools.tool_path("nginx")
    command = [nginx, "-p", f"{prefix}/", "-c", str(prefix / "nginx.conf")]
    subprocess.run(command, check=True, capture_output=True, timeout=30)
    try:
        yield public, management, prefix, command
    finally:
        subprocess.run(command + ["-s", "quit"], capture_output=True, timeout=30)


@pytest.fixture
def balancer(tmp_path, origin):
    with running_balancer(tmp_path, origin) as running:
        yield running


def read_all(management, position, expected, timeout=10):
    """Read the log from ``position`` until ``expected`` records came (the log's buffer
    flushes every 2 s); ``(records, LogRead of the last read)``."""
    records, deadline = [], time.monotonic() + timeout
    while True:
        found = logfiles.read("127.0.0.1", management, endpoints.USAGE_LOG_PATH, position,
                              max_bytes=8192)
        parsed, skipped = traffic.parse(found.data)
        assert skipped == 0
        records += parsed
        position = found.position
        if len(records) >= expected and not found.more or time.monotonic() > deadline:
            return records, found
        time.sleep(0.1 if found.more else 0.3)


def test_the_balancer_logs_each_request_and_the_reader_gets_each_once_across_rotations(
        balancer):
    public, management, prefix, command = balancer
    sent = [fetch("127.0.0.1", public, path) for path in
            ("/objects/small", "/objects/chunk-low", "/missing", '/a"b\\c?x=%00;{$x}')]
    records, last = read_all(management, None, len(sent))
    assert [(r.status, r.bytes_sent) for r in records] == [(s, n) for s, _h, n in sent]
    assert records[3].uri == '/a"b\\c?x=%00;{$x}' and records[0].cache_status == ""
    assert last.lost is False and last.in_current

    # a rotation (as the local driver does it), more requests, read on from the position
    os.replace(prefix / "logs/access.log", prefix / "logs/access.log.1")
    straggler = fetch("127.0.0.1", public, "/objects/small")  # before nginx reopens
    subprocess.run(command + ["-s", "reopen"], check=True, capture_output=True, timeout=30)
    time.sleep(0.5)
    after = [fetch("127.0.0.1", public, "/objects/chunk-low") for _ in range(30)]
    more, read = read_all(management, last.position, 31)
    assert sum(r.bytes_sent for r in more) == straggler[2] + sum(n for _s, _h, n in after)
    assert read.in_current and not read.lost
    everything, _read = read_all(management, None, len(sent) + 31)
    assert len(everything) == len(sent) + 31  # what it keeps: the previous file and this one

    # rotated twice: the old position's file is gone, and the reader says so
    for _ in range(2):
        os.replace(prefix / "logs/access.log", prefix / "logs/access.log.1")
        subprocess.run(command + ["-s", "reopen"], check=True, capture_output=True, timeout=30)
        time.sleep(0.3)
        fetch("127.0.0.1", public, "/objects/small")
        time.sleep(2.5)
    assert logfiles.read("127.0.0.1", management, endpoints.USAGE_LOG_PATH,
                         last.position).lost is True


def curl(*args):
    """curl's answer's status (``-w %{http_code}``); the body is dropped."""
    done = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time",
                           "10", *args], capture_output=True, text=True, timeout=30, check=True)
    return int(done.stdout)


def test_the_log_names_host_sni_protocol_tls_version_agent_and_referer(tmp_path, origin):
    name = "cdn.shop-example.com"
    ca = TestCA()
    issued = ca.issue([name])
    (tmp_path / "chain.pem").write_text(issued.chain_pem)
    (tmp_path / "key.pem").write_text(issued.key_pem)
    (tmp_path / "ca.pem").write_text(ca.root_pem)
    [tls_port] = free_loopback_ports(1)
    tls = {"port": tls_port, "certificate": str(tmp_path / "chain.pem"),
           "key": str(tmp_path / "key.pem")}
    with running_balancer(tmp_path, origin, tls=tls, server_names=[name]) as running:
        public, management = running[0], running[1]
        https = ["--cacert", str(tmp_path / "ca.pem"), "--resolve", f"{name}:{tls_port}:127.0.0.1"]
        assert curl("--http1.1", "-A", "viewer/1.0", "-e", "https://shop-example.com/a?b=1",
                    "-H", f"Host: {name}", f"http://127.0.0.1:{public}/objects/small") == 200
        assert curl(*https, "--http2", "-A", 'agent "two"', f"https://{name}:{tls_port}"
                    "/objects/small") == 200
        assert curl(*https, "--http1.1", "--tlsv1.2", "--tls-max", "1.2", "-A", "",
                    f"https://{name}:{tls_port}/objects/chunk-low") == 200
        records, _read = read_all(management, None, 3)
    exported = [r.export("eu-west") for r in records]
    keys = ("host", "sni", "protocol", "tls_version", "user_agent", "referer")
    assert [tuple(e[k] for k in keys) for e in exported] == [
        (name, None, "HTTP/1.1", None, "viewer/1.0", "https://shop-example.com/a?b=1"),
        (name, name, "HTTP/2.0", "TLSv1.3", 'agent "two"', None),
        (name, name, "HTTP/1.1", "TLSv1.2", None, None)]
    # the usage figures read the same lines as before
    assert [r.status for r in records] == [200, 200, 200] and all(r.bytes_sent > 0
                                                                  for r in records)


def test_the_log_is_served_only_on_the_management_listener_to_its_sources(balancer):
    public, management, _prefix, _command = balancer
    fetch("127.0.0.1", public, "/objects/small")
    time.sleep(2.5)
    assert fetch("127.0.0.1", management, endpoints.USAGE_LOG_PATH)[0] == 200
    assert fetch("127.0.0.1", management, endpoints.USAGE_LOG_PATH, source="127.0.0.2")[0] == 403
    status, _headers, _size = fetch("127.0.0.1", public, endpoints.USAGE_LOG_PATH)
    assert status == 404  # the public port proxies it to the caches, which know no such object
    assert fetch("127.0.0.1", management, endpoints.USAGE_LOG_PATH + "/../error.log")[0] == 404


# -- the Instance Manager's rows and cursor ----------------------------------------------------

class NoopRo:
    """RO's traffic answers for one noop deployment, read in process (the same code)."""

    def __init__(self, driver, deployment):
        self.driver, self.deployment, self.calls = driver, deployment, 0

    def traffic(self, _vcdn_id, cursor=None):
        self.calls += 1
        return self.read(cursor)

    def read(self, cursor=None):
        """RO's answer (``GET .../traffic``) from ``cursor``, as its client returns it."""
        return answers.from_json(answers.Traffic, {
            "id": self.deployment.deployment_id,
            **traffic.read(self.driver, self.deployment, cursor)})


class Point:
    def __init__(self, at):
        self.at = at


class Reading:
    def __init__(self, region, vcpus):
        self.region, self.vcpus = region, vcpus


def observed(vcdn_id, previous_at, viewers, watts):
    """What a reconcile pass saw of the vCDN (levels of north and south)."""
    points = [{"scope": "region", "key": region, "viewers": viewers, "watts": watts}
              for region in ("north", "south")]
    readings = [Reading("north", 2), Reading("north", 2), Reading("north", 1),
                Reading("south", 2), Reading("south", 1)]
    return Seen(vcdn=answers.from_json(answers.Instance, {"id": vcdn_id}), flavor=None, model=None, readings=readings,
                previous={("vcdn", ""): Point(previous_at)} if previous_at else {},
                points=points)


START = dt.datetime(2026, 3, 1, 12, 0, 30, tzinfo=dt.timezone.utc)


@pytest.fixture
def billed(database_url):
    """A noop deployment ``billed`` (north 2 caches and 120 viewers, south 1 and 12) on a
    clock the test moves (``now[0]``, from :data:`START`), the IM's database, and RO's
    traffic answers read in process."""
    migrate.upgrade("im", database_url)
    database = Database(database_url)
    now = [START.timestamp()]
    driver = NoopDriver(load=lambda _id: {"north": 120, "south": 12}, clock=lambda: now[0])
    deployment = driver.deploy(ServiceInstanceGraph.from_dict(
        sample_sig("billed", {"north": 2, "south": 1})))
    yield types.SimpleNamespace(database=database, now=now, driver=driver,
                                deployment=deployment, ro=NoopRo(driver, deployment))
    driver.terminate(deployment)
    database.dispose()


def test_rows_and_cursor_are_written_together_so_nothing_counts_twice(billed, database_url):
    database, now, ro, start = billed.database, billed.now, billed.ro, START
    usage.record_many(database, ro, [observed("billed", None, 100, 50.0)], start)
    for step in range(1, 4):
        now[0] += 30
        at = dt.datetime.fromtimestamp(now[0], dt.timezone.utc)
        if step == 2:  # an answer the IM lost (it died before committing): asked again
            with database.sessions() as session:
                ro.traffic("billed", session.get(UsageCursor, "billed").cursor)
        usage.record_many(database, ro, [observed("billed", at - dt.timedelta(seconds=30),
                                                  100, 50.0)], at)
    database = Database(database_url)  # a restarted IM goes on from the stored cursor
    try:
        now[0] += 30
        at = dt.datetime.fromtimestamp(now[0], dt.timezone.utc)
        usage.record_many(database, ro, [observed("billed", at - dt.timedelta(seconds=30), 100,
                                                  50.0)], at)
        with database.sessions() as session:
            report = usage.report(session, "billed", start - dt.timedelta(hours=1),
                                  at + dt.timedelta(hours=1))
            rows = session.query(Usage).count()
            series = usage.series(session, "billed", start.replace(second=0),
                                  at + dt.timedelta(minutes=1), 60)
    finally:
        database.dispose()
    served = {m.name: m.requests for m in billed.driver.metrics(billed.deployment)}
    regions = {r["name"]: r for r in report["regions"]}
    assert regions["north"]["requests"] == served["north-lb"] == 120 // 2 * 120
    assert regions["south"]["requests"] == served["south-lb"]
    assert report["total"]["requests"] == served["north-lb"] + served["south-lb"]
    assert regions["north"]["viewer_hours"] == pytest.approx(100 * 120 / 3600, abs=1e-6)
    assert regions["north"]["vcpu_hours"] == pytest.approx(5 * 120 / 3600, abs=1e-6)
    assert regions["south"]["vcpu_hours"] == pytest.approx(3 * 120 / 3600, abs=1e-6)
    assert regions["north"]["kwh"] == pytest.approx(50.0 * 120 / 3600 / 1000, abs=1e-6)
    assert rows == 2 * 3  # per region, the minutes 12:00, 12:01, 12:02
    assert 0.9 < regions["north"]["hit_ratio"] < 1.0
    assert sum(p["requests_per_second"] * 60 for s in series for p in s["points"]) == \
        pytest.approx(report["total"]["requests"])


def test_traffic_read_with_the_readings_is_counted_without_asking_ro_again(billed):
    """The pass's first traffic answer comes with its readings (``GET .../readings``):
    counted as read, RO is not asked again; one RO could not read (``traffic_error``)
    counts nothing and keeps the cursor, while the levels still count."""
    database, ro, start = billed.database, billed.ro, START

    def stored():
        with database.sessions() as session:
            return usage.cursors(session, ["billed"]).get("billed")
    billed.driver.metrics(billed.deployment)  # the counters start
    billed.now[0] += 60  # a minute of viewers
    first = ro.read()
    seen = observed("billed", None, 100, 50.0)
    seen.traffic = usage.TrafficRead(None, first)
    usage.record_many(database, ro, [seen], start)
    assert ro.calls == 0 and stored() == first.cursor

    billed.now[0] += 30
    at = start + dt.timedelta(seconds=30)
    seen = observed("billed", start, 100, 50.0)
    seen.traffic = usage.TrafficRead(first.cursor, None, "the VIM could not read the logs")
    usage.record_many(database, ro, [seen], at)
    assert ro.calls == 0 and stored() == first.cursor
    with database.sessions() as session:
        report = usage.report(session, "billed", start - dt.timedelta(hours=1),
                              at + dt.timedelta(hours=1))
    counted = sum(m.requests for r in first.regions for m in r.minutes)
    assert counted > 0 and report["total"]["requests"] == counted
    assert report["total"]["viewer_hours"] == pytest.approx(2 * 100 * 30 / 3600)  # 2 regions

    seen = observed("billed", at, 100, 50.0)  # next pass: read from the kept cursor
    usage.record_many(database, ro, [seen], at + dt.timedelta(seconds=30))
    assert ro.calls == 1 and stored() != first.cursor


# -- the customer API, CLI and export on the noop driver ----------------------------------------

@pytest.fixture(scope="module")
def noop_stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("usage-noop")
    load = tmp / "load.json"
    load.write_text("{}")
    with running_stack(None, tmp, extra_env={"CDNAAS_TEST_NOOP_LOAD_FILE": str(load)}) as stack:
        populate(stack)
        body = vcdn_body("billed", (("eu-west", 1000), ("us-east", 500)))
        accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
        assert stack.acme.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
        stack.vcdn_id = accepted["vcdn"]["id"]
        load.write_text(json.dumps({stack.vcdn_id: {"eu-west": 200, "us-east": 20}}))
        yield stack


def cli_run(stack, *args):
    token = stack.operator.ok("POST", "/tenants/acme/tokens", 201, json={})["token"]
    return CliRunner().invoke(cli, list(args), catch_exceptions=False,
                              env={**stack.env, "CDNAAS_TOKEN": token, "COLUMNS": "250"})


def test_usage_traffic_and_export_through_the_api_and_the_cli(noop_stack):
    stack, vcdn_id = noop_stack, noop_stack.vcdn_id
    found = eventually(lambda: (lambda u: u if u["total"]["requests"] > 500 and
                                u["total"]["viewer_hours"] > 0 else None)(
        stack.acme.ok("GET", f"/vcdns/{vcdn_id}/usage")), "usage collected", 30)
    assert [r["name"] for r in found["regions"]] == ["eu-west", "us-east"]
    total = found["total"]
    assert total["requests"] == sum(r["requests"] for r in found["regions"])
    assert total["bytes_out"] == total["requests"] * 445_720 and total["gb"] > 0
    assert total["price"]["currency"] == "EUR" and total["price"]["amount"] >= 0
    assert total["price"]["breakdown"]["traffic"] == pytest.approx(total["gb"] * 0.01, abs=0.01)
    series = stack.acme.ok("GET", f"/vcdns/{vcdn_id}/traffic", params={"step": 60})
    assert series["step"] == 60 and {s["region"] for s in series["regions"]} == \
        {"eu-west", "us-east"}
    assert max(p["requests_per_second"] for s in series["regions"] for p in s["points"]) > 0
    exported = stack.acme.call("GET", f"/vcdns/{vcdn_id}/access-log", params={"limit": 50})
    assert exported.status_code == 200 and \
        exported.headers["Content-Type"].startswith("application/x-ndjson")
    lines = [json.loads(text) for text in exported.text.splitlines()]
    assert len(lines) == 50 and {"time", "region", "bytes_sent", "cache_status"} <= set(lines[0])

    table = cli_run(stack, "vcdn", "usage", vcdn_id)
    assert table.exit_code == 0 and "Total" in table.output and "EUR" in table.output, \
        table.output
    charts = cli_run(stack, "vcdn", "traffic", vcdn_id)
    assert charts.exit_code == 0 and "requests/s" in charts.output and "hit ratio" in \
        charts.output, charts.output
    saved = cli_run(stack, "vcdn", "logs", vcdn_id, "--from", "1h", "--limit", "7")
    assert saved.exit_code == 0 and len(saved.stdout.splitlines()) == 7, saved.output
    assert all(json.loads(text)["status"] == 200 for text in saved.stdout.splitlines())


@pytest.mark.parametrize("path, params, field", [
    ("usage", {"from": "last week"}, "from"), ("usage", {"to": "9000-01-01T00:00:00Z"}, "to"),
    ("usage", {"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"}, "from"),
    ("usage", {"from": "2000-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"}, "from"),
    ("usage", {"from": "2026-01-01T00:00:00Z\n;{$x}"}, "from"),
    ("traffic", {"step": 90}, "step"), ("traffic", {"step": "x"}, "step"),
    ("traffic", {"since": "2026-01-01T00:00:00Z", "until": "2026-03-01T00:00:00Z"}, "since"),
    ("access-log", {"limit": 0}, "limit"), ("access-log", {"from": "\x00"}, "from"),
    ("access-log", {"from": "2026-01-01T00:00:00Z", "to": "2026-02-01T00:00:00Z"}, "from")])
def test_windows_are_checked_and_refusals_name_the_parameter(noop_stack, path, params, field):
    response = noop_stack.acme.call("GET", f"/vcdns/{noop_stack.vcdn_id}/{path}", params=params)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["field"] == field


@pytest.mark.parametrize("path", ["usage", "traffic", "access-log"])
def test_another_tenants_vcdn_is_not_found(noop_stack, path):
    response = noop_stack.globex.call("GET", f"/vcdns/{noop_stack.vcdn_id}/{path}")
    assert response.status_code == 404
    assert noop_stack.globex.call("GET", f"/vcdns/no-such-vcdn/{path}").status_code == 404


def test_a_deleted_vcdns_bill_stays_and_its_log_is_gone(noop_stack):
    stack = noop_stack
    body = vcdn_body("short", (("eu-west", 100),))
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
    vcdn_id = accepted["vcdn"]["id"]
    assert stack.acme.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
    load = Path(stack.env["CDNAAS_TEST_NOOP_LOAD_FILE"])
    load.write_text(json.dumps({**json.loads(load.read_text()), vcdn_id: {"eu-west": 100}}))
    eventually(lambda: (lambda total: total["requests"] and total["vcpu_hours"])(
        stack.acme.ok("GET", f"/vcdns/{vcdn_id}/usage")["total"]), "usage of the short vCDN", 30)
    ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn_id}", 202)
    assert stack.acme.wait(ended["operation"]["id"])["state"] == "COMPLETED"
    bill = stack.acme.ok("GET", f"/vcdns/{vcdn_id}/usage")
    assert bill["state"] == "DELETED" and bill["total"]["requests"] > 0
    assert bill["total"]["vcpu_hours"] > 0 and bill["total"]["price"]["amount"] >= 0
    gone = stack.acme.call("GET", f"/vcdns/{vcdn_id}/access-log")
    assert gone.status_code == 409 and gone.json()["error"]["field"] == "vcdn_id"
    later = isoformat(utcnow() + dt.timedelta(days=1))
    assert stack.acme.ok("GET", f"/vcdns/{vcdn_id}/usage",
                         params={"from": later, "to": isoformat(utcnow() + dt.timedelta(days=2))}
                         )["total"]["requests"] == 0


# -- the local driver: the bill matches the bytes viewers received ------------------------------

#: fetches of each client: (path, times); the first of each path is a MISS, the rest HITs,
#: a missing object is a MISS each time (the origin says no-store)
FETCHES = (("/objects/small", 3), ("/objects/chunk-low", 2), ("/video/hd/seg-1.m4s", 2),
           ("/missing", 2))

#: a viewer: fetches each path on a connection of its own (Connection: close) and counts
#: every byte it received, status line and headers included
VIEWER = r'''
import json, socket, sys
address, host, plan = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
answers = []
for path, times in plan:
    for _ in range(times):
        with socket.create_connection((address, 80), timeout=10) as sock:
            sock.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                          % (path, host)).encode())
            received = b""
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += chunk
        head = received.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        headers = dict((k.strip().lower(), v.strip())
                       for k, _, v in (h.partition(":") for h in head[1:]))
        answers.append({"status": int(head[0].split()[1]), "bytes": len(received),
                        "cache": headers.get("x-cache-status")})
print(json.dumps(answers))
'''


@pytest.fixture(scope="module")
def local_stack(tmp_path_factory):
    if not ROOT:
        pytest.skip("the local driver needs root")
    tmp = tmp_path_factory.mktemp("usage-local")
    with running_stack(None, tmp, extra_env={"CDNAAS_VIM_DRIVER": "local",
                                             "CDNAAS_IM_INTERVAL": "1"}) as stack:
        yield populate(stack)


@needs_root
def test_the_bill_matches_the_bytes_viewers_received(local_stack, origin):
    stack = local_stack
    body = vcdn_body("metered", (("eu-west", 100), ("us-east", 100)),
                     origin=f"http://127.0.0.1:{origin.server_address[1]}")
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
    assert stack.acme.wait(accepted["operation"]["id"], timeout=90)["state"] == "COMPLETED"
    vcdn = stack.acme.ok("GET", f"/vcdns/{accepted['vcdn']['id']}")
    try:
        # the driver's check of each region fetched once through it: wait until counted
        before = eventually(lambda: (lambda u: u if u["total"]["requests"] == 2 else None)(
            stack.acme.ok("GET", f"/vcdns/{vcdn['id']}/usage")), "the deploy checks counted", 30)
        started = utcnow()
        answers = {}
        for region, address in (("eu-west", "10.1.0.40"), ("us-east", "10.2.0.40")):
            balancer = next(r["load_balancer"] for r in vcdn["regions"] if r["name"] == region)
            with clients.client(vcdn["id"], region, address) as viewer:
                answers[region] = json.loads(viewer.run(
                    ["python3", "-c", VIEWER, balancer, vcdn["entry_point"]["hostname"],
                     json.dumps(FETCHES)], timeout=60))
        received = {region: sum(a["bytes"] for a in found) for region, found in answers.items()}
        fetched = sum(times for _path, times in FETCHES)

        def collected():
            found = stack.acme.ok("GET", f"/vcdns/{vcdn['id']}/usage")
            return found if found["total"]["requests"] == 2 + 2 * fetched else None
        after = eventually(collected, "the IM collected every request", 30)
        time.sleep(3)  # a pass more: nothing else arrives, nothing counts twice
        after = stack.acme.ok("GET", f"/vcdns/{vcdn['id']}/usage")
        for region in ("eu-west", "us-east"):
            now, then = (next(r for r in found["regions"] if r["name"] == region)
                         for found in (after, before))
            answered = answers[region]
            assert now["requests"] - then["requests"] == len(answered) == fetched
            assert now["bytes_out"] - then["bytes_out"] == received[region]
            hits = sum(a["cache"] == "HIT" for a in answered)
            misses = sum(a["cache"] == "MISS" for a in answered)
            assert (now["hits"] - then["hits"], now["misses"] - then["misses"]) == (hits, misses)
            assert [a["status"] for a in answered].count(404) == 2 == \
                now["status"]["4xx"] - then["status"]["4xx"]  # (the deploy check's `/` too)
        assert after["total"]["bytes_out"] - before["total"]["bytes_out"] == \
            sum(received.values())
        hits = sum(a["cache"] == "HIT" for found in answers.values() for a in found)
        misses = sum(a["cache"] == "MISS" for found in answers.values() for a in found)
        assert hits == 2 * 4 and misses == 2 * 5  # 3 paths' first fetch and 2 of /missing
        assert after["total"]["hit_ratio"] == pytest.approx(
            (before["total"]["hits"] + hits)
            / (before["total"]["hits"] + before["total"]["misses"] + hits + misses), abs=1e-6)

        exported = stack.acme.call("GET", f"/vcdns/{vcdn['id']}/access-log",
                                   params={"from": isoformat(started)})
        records = [json.loads(text) for text in exported.text.splitlines()]
        for region in ("eu-west", "us-east"):
            mine = [r for r in records if r["region"] == region]
            assert [r["time"] for r in mine] == sorted(r["time"] for r in mine)
            # (each nginx worker buffers its lines: the log holds them in the order written)
            assert sorted((r["status"], r["bytes_sent"], r["cache_status"]) for r in mine) == \
                sorted((a["status"], a["bytes"], a["cache"]) for a in answers[region])
            assert {r["client"] for r in mine} == {"10.1.0.40" if region == "eu-west"
                                                   else "10.2.0.40"}
            # the viewers' Host over plain HTTP/1.1, no agent or referer sent
            assert {(r["host"], r["protocol"], r["sni"], r["tls_version"], r["user_agent"],
                     r["referer"]) for r in mine} == {
                (vcdn["entry_point"]["hostname"], "HTTP/1.1", None, None, None, None)}
        drawn = stack.acme.ok("GET", f"/vcdns/{vcdn['id']}/traffic")
        assert sum(p["requests_per_second"] * drawn["step"] for s in drawn["regions"]
                   for p in s["points"]) == pytest.approx(after["total"]["requests"], abs=0.01)
    finally:
        ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn['id']}", 202)
        stack.acme.wait(ended["operation"]["id"], timeout=90)
