"""Log streams: the option checked strictly (400 naming the field), the shipper forwarding
real datagrams to real collectors (syslog over TCP and TLS, NDJSON over HTTP) with a
bounded queue that drops and counts while a collector is down, and, on the local driver
(root), records of real requests streamed from the balancer while a dead collector does
not slow the vCDN."""
import base64
import contextlib
import gzip
import http.server
import dataclasses
import json
import os
import socket
import ssl
import tempfile
import threading
import time
import uuid

import pytest
import yaml

from cdnaas.common import errors
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.delivery import logstreams
from cdnaas.ro.vim import logfiles, logship
from cdnaas.ro.vim.local import cgroups, clients, processes
from cdnaas.ro.vim.local.driver import LocalDriver
from cdnaas.ro.vim.openstack import userdata
from cdnaas.vnf import cache, tools
from cdnaas.vnf.balancer import lb_config
from tests.support.api import vcdn_body
from tests.support.certs import TestCA
from tests.support.collectors import HttpCollector, SyslogCollector, wait_for
from tests.support.sigs import sample_sig
from tests.test_cache_rules import stack  # noqa: F401 (a module's own stack)
from tests.test_cli import invoke, invoke_json
from tests.test_vnf_rendering import cache_values, lb_values, need


# --- the option ---------------------------------------------------------------------------

def refused_field(value):
    with pytest.raises(errors.BadRequest) as caught:
        logstreams.check(value, "log_streams")
    return caught.value.field


@pytest.mark.parametrize("value,field", [
    ({"type": "syslog"}, "log_streams"),
    ([{"type": "syslog", "address": "a.example:1"}] * 3, "log_streams"),
    ([{"type": "kafka"}], "log_streams[0].type"),
    ([{"type": "syslog", "address": "collector.example.com"}], "log_streams[0].address"),
    ([{"type": "syslog", "address": "collector.example.com:0"}], "log_streams[0].address"),
    ([{"type": "syslog", "address": "bad_host!:514"}], "log_streams[0].address"),
    ([{"type": "syslog", "address": "a.example\n:514"}], "log_streams[0].address"),
    ([{"type": "syslog", "address": "a.example:514\x00"}], "log_streams[0].address"),
    ([{"type": "syslog", "address": "a.example:514;"}], "log_streams[0].address"),
    ([{"type": "syslog", "address": "a.example:514", "transport": "udp"}],
     "log_streams[0].transport"),
    ([{"type": "syslog", "address": "a.example:514", "ca_certificate": "x"}],
     "log_streams[0].ca_certificate"),
    ([{"type": "syslog", "address": "a.example:6514", "transport": "tls",
       "ca_certificate": "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n"}],
     "log_streams[0].ca_certificate"),
    ([{"type": "syslog", "address": "a.example:514", "url": "https://a.example/"}],
     "log_streams[0].url"),
    ([{"type": "https", "url": "ftp://a.example/"}], "log_streams[0].url"),
    ([{"type": "https", "url": "http://a.example/"}], "log_streams[0].url"),
    ([{"type": "https", "url": "https://u:p@a.example/"}], "log_streams[0].url"),
    ([{"type": "https", "url": "https://a.example/x y"}], "log_streams[0].url"),
    ([{"type": "https", "url": "https://a.example/\r\nHost: x"}], "log_streams[0].url"),
    ([{"type": "https", "url": "https://a.example/", "headers": {"Host": "evil"}}],
     "log_streams[0].headers.'Host'"),
    ([{"type": "https", "url": "https://a.example/", "headers": {"Cookie": "a"}}],
     "log_streams[0].headers.'Cookie'"),
    ([{"type": "https", "url": "https://a.example/",
       "headers": {"Authorization": "a\r\nX-Evil: 1"}}],
     "log_streams[0].headers.'Authorization'"),
    ([{"type": "https", "url": "https://a.example/", "batch_records": 0}],
     "log_streams[0].batch_records"),
    ([{"type": "https", "url": "https://a.example/", "batch_seconds": True}],
     "log_streams[0].batch_seconds"),
    ([{"type": "syslog", "address": "127.0.0.1:514"}], "log_streams[0].address"),  # policy
    ([{"type": "https", "url": "https://169.254.169.254/"}], "log_streams[0].url"),
])
def test_each_refusal_names_its_field(value, field):
    assert refused_field(value) == field


def test_defaults_are_filled_headers_masked_and_checking_is_idempotent():
    stored = logstreams.check([
        {"type": "syslog", "address": "Collector.Example.com:6514", "transport": "tls"},
        {"type": "https", "url": "https://logs.example.com/in?x=1",
         "headers": {"Authorization": "Bearer s3cret"}}], "log_streams")
    assert stored[0] == {"type": "syslog", "address": "collector.example.com:6514",
                         "transport": "tls"}
    assert stored[1]["batch_records"] == 500 and stored[1]["batch_seconds"] == 5
    assert logstreams.check(stored, "service.log_streams") == stored
    assert logstreams.view(stored)[1]["headers"] == {"Authorization": logstreams.MASK}
    assert "s3cret" not in json.dumps(logstreams.view(stored))
    assert logstreams.check([], "log_streams") is None and logstreams.render(None) is None


# --- the shipper against real collectors ----------------------------------------------------

@contextlib.contextmanager
def shipper(destinations, queue_records=1000):
    config = {"listen": "127.0.0.1:0", "status": "127.0.0.1:0", "app": "cdnaas",
              "hostname": "lb-1", "queue_records": queue_records,
              "destinations": destinations}
    running = logship.Shipper(config)
    thread = threading.Thread(target=running.serve, daemon=True)
    thread.start()
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.connect(running.socket.getsockname())

    def send(record):  # as nginx's access_log syslog: sends it
        sender.send(b"<190>Nov 27 12:00:00 cdnaas: "
                    + json.dumps(record, separators=(",", ":")).encode())
    try:
        yield running, send
    finally:
        running.stop()
        thread.join(5)
        running.socket.close()
        sender.close()


def syslog_spec(port, tls=False, ca=None):
    return {"name": "0:syslog", "type": "syslog", "host": "localhost", "port": port,
            "connect": "127.0.0.1", "tls": tls, "ca_certificate": ca}


def https_spec(port, batch_records=50, batch_seconds=1):
    return {"name": "1:https", "type": "https", "host": "127.0.0.1", "port": port,
            "connect": "127.0.0.1", "tls": False, "path": "/ingest?src=cdn",
            "headers": {"X-Api-Key": "k1"}, "batch_records": batch_records,
            "batch_seconds": batch_seconds}


def test_records_reach_a_syslog_and_an_https_collector():
    syslog, web = SyslogCollector(host="127.0.0.1"), HttpCollector(host="127.0.0.1")
    try:
        with shipper([syslog_spec(syslog.port), https_spec(web.port)]) as (running, send):
            for index in range(120):
                send({"t": 1700000000.5 + index, "s": "200", "u": f"/r/{index}"})
            wait_for(lambda: [d["sent"] for d in running.status()["destinations"]] == [120] * 2)
            status = running.status()
        first = syslog.messages[0]
        assert first.startswith(b"<134>1 2023-11-14T22:13:20.500Z lb-1 cdnaas - - - {")
        assert [r["u"] for r in syslog.records()] == [f"/r/{i}" for i in range(120)]
        assert [r["u"] for r in web.records] == [f"/r/{i}" for i in range(120)]
        assert web.headers[0]["X-Api-Key"] == "k1"
        assert web.headers[0]["Content-Type"] == "application/x-ndjson"
        assert len(web.headers) <= 4  # batched (50 a batch, or a second's worth)
        assert [(d["sent"], d["dropped"]) for d in status["destinations"]] == [(120, 0)] * 2
        assert status["received"] == 120
    finally:
        syslog.close()
        web.close()


def test_syslog_over_tls_is_verified_with_the_given_ca():
    authority = TestCA()
    issued = authority.issue(["localhost"])
    with open_pem(issued) as (cert_file, key_file):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        collector = SyslogCollector(context=context, host="127.0.0.1")
    try:
        with shipper([syslog_spec(collector.port, tls=True, ca=authority.root_pem)]) \
                as (_running, send):
            send({"t": 1.0, "u": "/tls"})
            wait_for(lambda: collector.messages)
        assert collector.records()[0]["u"] == "/tls"
        stranger = TestCA("another root")
        with shipper([syslog_spec(collector.port, tls=True, ca=stranger.root_pem)]) \
                as (running, send):
            send({"t": 1.0, "u": "/never"})
            wait_for(lambda: running.status()["destinations"][0]["failures"] >= 1)
            assert "CERTIFICATE_VERIFY_FAILED" in running.status()["destinations"][0]["last_error"]
        assert len(collector.messages) == 1
    finally:
        collector.close()


@contextlib.contextmanager
def open_pem(issued):
    with tempfile.TemporaryDirectory() as folder:
        cert_file, key_file = f"{folder}/cert.pem", f"{folder}/key.pem"
        with open(cert_file, "w", encoding="ascii") as handle:
            handle.write(issued.chain_pem)
        with open(key_file, "w", encoding="ascii") as handle:
            handle.write(issued.key_pem)
        yield cert_file, key_file


def test_a_dead_collector_drops_the_oldest_beyond_the_bound_and_recovers():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there: connections are refused
    with shipper([syslog_spec(port)], queue_records=100) as (running, send):
        for index in range(250):
            send({"t": 1.0, "u": f"/dead/{index}"})
        wait_for(lambda: running.status()["destinations"][0]["dropped"] == 150)
        status = running.status()["destinations"][0]
        assert status["queued"] + status["dropped"] == 250 and status["sent"] == 0
        assert status["failures"] >= 1 and "refused" in status["last_error"].lower()
        collector = SyslogCollector(port=port, host="127.0.0.1")  # back
        try:
            wait_for(lambda: len(collector.messages) == 100, timeout=40)  # within a backoff
            send({"t": 1.0, "u": "/after"})
            wait_for(lambda: len(collector.messages) == 101)
            # the newest were kept: the oldest 150 went
            assert [r["u"] for r in collector.records()][0] == "/dead/150"
            assert collector.records()[-1]["u"] == "/after"
            metrics = logship.metrics_text(running.status())
            assert 'cdnaas_logship_records_dropped_total{destination="0:syslog"} 150' in metrics
            assert 'cdnaas_logship_records_sent_total{destination="0:syslog"} 101' in metrics
        finally:
            collector.close()


def test_a_collector_refusing_a_batch_drops_it_counted():
    class Refusing(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(400)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with shipper([https_spec(server.server_address[1], batch_records=5)]) as (running, send):
            for index in range(5):
                send({"t": 1.0, "u": f"/{index}"})
            wait_for(lambda: running.status()["destinations"][0]["dropped"] == 5)
            assert "HTTP 400" in running.status()["destinations"][0]["last_error"]
    finally:
        server.shutdown()
        server.server_close()


# --- the local driver: real requests, a collector that dies ---------------------------------

@pytest.fixture(scope="module")
def state_dir(tmp_path_factory):
    """A state dir of this module's own: its VNFs carry an owner no other test shares."""
    if os.geteuid() != 0:
        pytest.skip("the local driver needs root")
    with pytest.MonkeyPatch.context() as patch:
        path = tmp_path_factory.mktemp("logstream-state")
        patch.setenv("CDNAAS_STATE_DIR", str(path))
        yield path


#: requests of one burst (one curl, one kept-alive connection, a cached 43 B object)
BURST = 300
#: how long the test's collector stays down
DOWN_SECONDS = 20
QUEUE = 2000


def burst_rate(viewer, url, count=BURST):
    """Requests per second of ``count`` GETs of ``url`` by one curl (kept alive)."""
    started = time.monotonic()
    out = viewer.run(["curl", "-s", "-w", "%{http_code}\n",
                      *["-o", "/dev/null", url] * count], timeout=60)
    elapsed = time.monotonic() - started
    assert out.split() == ["200"] * count
    return count / elapsed


def median(values):
    return sorted(values)[len(values) // 2]


def bursts(viewer, url, group, count=None, seconds=None):
    """Bursts of :data:`BURST` requests (``count`` of them, or for ``seconds``): each one's
    requests/s, and the balancer's CPU time per request over them (its CPU group's:
    nginx's and the shipper's), which other jobs on this machine do not change."""
    rates, ends = [], time.monotonic() + (seconds or 0)
    before = cgroups.cpu_usage_seconds(group)
    while len(rates) < (count or 0) or time.monotonic() < ends:
        rates.append(burst_rate(viewer, url))
    return rates, (cgroups.cpu_usage_seconds(group) - before) / (BURST * len(rates))


def test_records_of_real_requests_stream_and_a_dead_collector_costs_no_throughput(
        origin, state_dir, monkeypatch):
    monkeypatch.setenv("CDNAAS_LOG_STREAM_QUEUE_RECORDS", str(QUEUE))
    syslog, web = SyslogCollector(), HttpCollector()
    streams = logstreams.check([
        {"type": "syslog", "address": f"127.0.0.1:{syslog.port}"},
        {"type": "https", "url": f"http://127.0.0.1:{web.port}/ingest",
         "headers": {"Authorization": "Bearer t0ken"}, "batch_seconds": 1}], "log_streams")
    document = sample_sig(f"logs-{uuid.uuid4().hex[:8]}", {"north": 1})
    document["origin"] = {"scheme": "http", "host": "127.0.0.1",
                          "port": origin.server_address[1]}
    document["service"] = {"log_streams": streams}
    sig = ServiceInstanceGraph.from_dict(document)
    driver = LocalDriver()
    deployment = driver.deploy(sig)
    port = syslog.port
    try:
        [balancer] = [v for v in deployment.vnfs if v.role == "load_balancer"]
        url = f"http://{balancer.address}/objects/small"
        with clients.client(sig.vcdn_id, "north", "10.1.0.40") as viewer:
            status, _headers, _body = viewer.fetch(f"{url}?first=1")
            assert status == 200
            wait_for(lambda: any(r["u"] == "/objects/small?first=1" for r in syslog.records())
                     and any(r["u"] == "/objects/small?first=1" for r in web.records))
            record = next(r for r in syslog.records() if r["u"] == "/objects/small?first=1")
            assert record["a"] == "10.1.0.40" and record["s"] == "200"
            assert syslog.messages[0].split(b" ")[2] == balancer.name.encode()
            assert web.headers[0]["Authorization"] == "Bearer t0ken"

            group = f"{deployment.resources['owner']}_{sig.vcdn_id}_{balancer.name}"
            up, up_cpu = bursts(viewer, url, group, seconds=DOWN_SECONDS / 2)
            syslog.close()  # the syslog collector dies: its port refuses connections
            down, down_cpu = bursts(viewer, url, group, seconds=DOWN_SECONDS)
            counts = logfiles.stream_status(balancer)
            dead = counts["destinations"][0]
            # the queue, plus the batch the sender holds for its retry (logship's bound)
            assert dead["queued"] <= QUEUE + logship.SYSLOG_BATCH and dead["dropped"] > 0
            assert dead["failures"] >= 1 and dead["sent"] >= 1
            syslog = SyslogCollector(port=port)  # back on the same port
            viewer.fetch(f"{url}?after=1")
            wait_for(lambda: any(r["u"] == "/objects/small?after=1" for r in syslog.records()),
                     timeout=45)  # within the longest backoff
        total = 2 + BURST * (len(up) + len(down))

        def everything_received():  # the idle-priority shipper may still be reading
            counts = logfiles.stream_status(balancer)
            return counts["received"] + counts["kernel_dropped"] >= total
        wait_for(everything_received)
        counts = logfiles.stream_status(balancer)
        dead, alive = counts["destinations"]
        print(f"\nrequests/s with the collector up {median(up):.0f}, down "
              f"{median(down):.0f}; balancer CPU per request up {up_cpu * 1e6:.0f} us, down "
              f"{down_cpu * 1e6:.0f} us; {total} records, syslog destination dropped "
              f"{dead['dropped']} (queue {QUEUE}), https destination sent {alive['sent']} "
              f"dropped {alive['dropped']}, "
              f"kernel dropped {counts['kernel_dropped']}")
        # the dead collector did not make serving dearer: the balancer's CPU per request
        # (what it serves at, at full load) is no more than with the collector up; its
        # requests/s, which other jobs on this machine sway, are benchmarks/logstream.py's
        assert down_cpu <= 1.3 * up_cpu
        # every record reached the shipper; the live collector got every record its queue
        # did not drop (the shared bound: at thousands of records a second a slow collector
        # may fall behind too), counted; the dead one's losses are counted, and only what
        # its bounded queue could not hold was lost
        def live_done():
            live = logfiles.stream_status(balancer)["destinations"][1]
            return live["sent"] + live["dropped"] == counts["received"]
        wait_for(live_done, timeout=60)
        assert len(web.records) == logfiles.stream_status(balancer)["destinations"][1]["sent"]
        assert dead["dropped"] >= counts["received"] - dead["sent"] - QUEUE - \
            logship.SYSLOG_BATCH
        assert dead["sent"] + dead["dropped"] + dead["queued"] <= counts["received"]

        # the streams removed: the balancer's shipper stops, its counts are gone
        prefix = state_dir / "local" / deployment.resources["owner"] / sig.vcdn_id / \
            balancer.name
        pid = processes.pid_in(prefix / "logship.pid")
        plain = ServiceInstanceGraph.from_dict({**document, "service": {}})
        deployment = driver.update(deployment, plain, previous=sig)
        assert not processes.running(pid) and logfiles.stream_status(balancer) is None
    finally:
        driver.terminate(deployment)
        syslog.close()
        web.close()


# --- rendering: nginx (both VNFs that log viewers) and OpenStack's cloud-init -------------

STREAMS = [{"type": "syslog", "address": "203.0.113.9:6514", "transport": "tls"},
           {"type": "https", "url": "https://logs.example.com/in",
            "headers": {"X-Api-Key": "s3cret-key"}}]


@pytest.mark.parametrize("role", ["cache", "load_balancer"])
def test_the_usage_log_also_goes_to_the_shipper_and_nginx_takes_it(tmp_path, role):
    need("nginx")
    service = {"log_streams": logstreams.check(STREAMS, "log_streams")}
    if role == "cache":
        text = cache.cache_config(**cache_values(tmp_path, usage_log=True, service=service))
        plain = cache.cache_config(**cache_values(tmp_path, usage_log=True))
    else:
        text = lb_config(**lb_values(tmp_path, service=service))
        plain = lb_config(**lb_values(tmp_path))
    line = (f"access_log syslog:server=127.0.0.1:{logstreams.SYSLOG_PORT},facility=local0,"
            f"tag={logstreams.TAG},nohostname cdnaas_usage;")
    assert line in text and "syslog:" not in plain
    assert f"location = {logstreams.STATUS_PATH} {{" in text
    assert f"proxy_pass http://127.0.0.1:{logstreams.STATUS_PORT}/status;" in text
    assert "s3cret-key" not in text  # the collectors' details stay with the shipper
    tools.check_nginx(text, str(tmp_path))


def test_an_openstack_cache_runs_the_shipper_as_a_unit_of_its_own(monkeypatch):


    monkeypatch.setenv("CDNAAS_LOG_STREAM_QUEUE_RECORDS", "1234")
    document = sample_sig("os-logs", {"north": 1})
    document["service"] = {"log_streams": logstreams.check(STREAMS, "log_streams")}
    sig = ServiceInstanceGraph.from_dict(document)
    vnf = sig.vnfs_in("north", "cache")[0]
    cloud = yaml.safe_load(userdata.cache(sig, vnf, "10.200.1.10", "192.0.2.10"))
    files = {f["path"]: f for f in cloud["write_files"]}

    def content(path):
        entry = files[path]
        if entry.get("encoding") == "gz+b64":
            return gzip.decompress(base64.b64decode(entry["content"])).decode()
        return entry["content"]
    unit = content("/etc/systemd/system/cdnaas-logship.service")
    assert "LoadCredential=logship.json:/etc/cdnaas/logship.json" in unit
    assert f"ExecStart=/usr/bin/python3 {userdata.LOGSHIP_DIR}/logship.py " \
        "%d/logship.json" in unit
    assert "DynamicUser=yes" in unit and "Restart=always" in unit
    assert "CPUSchedulingPolicy=idle" in unit and "MemoryMax=" in unit
    assert content(f"{userdata.LOGSHIP_DIR}/logship.py") == open(logship.__file__).read()
    assert files["/etc/cdnaas/logship.json"]["permissions"] == "0600"
    config = json.loads(content("/etc/cdnaas/logship.json"))
    assert config["hostname"] == vnf.name and config["queue_records"] == 1234
    assert [(d["type"], d["connect"], d["port"], d["tls"]) for d in config["destinations"]] \
        == [("syslog", "203.0.113.9", 6514, True), ("https", "logs.example.com", 443, True)]
    assert config["destinations"][1]["headers"] == {"X-Api-Key": "s3cret-key"}
    assert ["systemctl", "enable", "--now", "cdnaas-logship.service", "cdnaas-cache.service",
            "cdnaas-usage-rotate.timer"] in cloud["runcmd"]
    nginx = content("/etc/cdnaas/nginx.conf")
    assert f"syslog:server=127.0.0.1:{logstreams.SYSLOG_PORT}" in nginx
    assert "s3cret-key" not in nginx
    # an origin shield logs no viewer: it streams nothing
    as_shield = dataclasses.replace(vnf, role="shield")
    shield = yaml.safe_load(userdata.cache(sig, as_shield, "10.200.1.10", "192.0.2.10"))
    assert "cdnaas-logship" not in json.dumps(shield) and "syslog:" not in json.dumps(shield)
    # without streams, nothing of the shipper
    plain = ServiceInstanceGraph.from_dict({**document, "service": {}})
    assert "logship" not in userdata.cache(plain, vnf, "10.200.1.10", "192.0.2.10")


# --- through the API, the SO and RO on the local driver, and the CLI ------------------------

def test_a_vcdn_streams_through_the_api_and_the_cli(stack, origin, tmp_path):  # noqa: F811
    collector = SyslogCollector()
    try:
        body = vcdn_body("streamed", origin=f"http://127.0.0.1:{origin.server_address[1]}")
        before = len(stack.acme.ok("GET", "/vcdns")["vcdns"])
        for streams, field in [
                ([{"type": "syslog", "address": "127.0.0.1"}], "log_streams[0].address"),
                ([{"type": "https", "url": "https://a.example/",
                   "headers": {"Cookie": "x"}}], "log_streams[0].headers.'Cookie'"),
                ([{"type": "syslog", "address": "a.example:1\nb"}], "log_streams[0].address")]:
            refused = stack.acme.call("POST", "/vcdns", json={**body, "log_streams": streams})
            assert refused.status_code == 400, refused.text
            assert refused.json()["error"]["field"] == field
        assert len(stack.acme.ok("GET", "/vcdns")["vcdns"]) == before  # no row written
        streams = [{"type": "syslog", "address": f"127.0.0.1:{collector.port}"},
                   {"type": "https", "url": "http://127.0.0.1:9/never",
                    "headers": {"Authorization": "Bearer hidden"}}]
        accepted = stack.acme.ok("POST", "/vcdns", 202, json={**body, "log_streams": streams})
        assert stack.acme.wait(accepted["operation"]["id"], 90)["state"] == "COMPLETED"
        vcdn_id = accepted["vcdn"]["id"]
        vcdn = stack.acme.ok("GET", f"/vcdns/{vcdn_id}")
        assert vcdn["log_streams"][1]["headers"] == {"Authorization": logstreams.MASK}
        assert "hidden" not in json.dumps(vcdn)
        bad = stack.acme.call("PATCH", f"/vcdns/{vcdn_id}",
                              json={"log_streams": [{"type": "syslog", "address": "x:99999"}]})
        assert bad.status_code == 400 and bad.json()["error"]["field"] == \
            "log_streams[0].address"

        balancer = vcdn["regions"][0]["load_balancer"]
        with clients.client(vcdn_id, "eu-west", "10.1.0.40") as viewer:
            assert viewer.fetch(f"http://{balancer}/objects/small?api=1")[0] == 200
        wait_for(lambda: any(r["u"] == "/objects/small?api=1" for r in collector.records()))
        # wide enough that the table never folds a destination's name over two lines
        env = {"CDNAAS_CONFIG": str(tmp_path / "config.yaml"),
               "CDNAAS_API_URL": stack.urls["api"], "COLUMNS": "200"}
        token = stack.acme.token
        wait_for(lambda: invoke_json(["vcdn", "log-streams", vcdn_id], env, token)
                 ["totals"]["sent"] >= 1)
        counts = invoke_json(["vcdn", "log-streams", vcdn_id], env, token)
        assert counts["totals"]["received"] >= 1 and len(counts["vnfs"]) == 1
        [syslog, https] = counts["vnfs"][0]["shipper"]["destinations"]
        assert syslog["sent"] >= 1 and https["sent"] == 0 and https["queued"] >= 1
        shown = invoke(["vcdn", "log-streams", vcdn_id], env, token)
        assert shown.exit_code == 0 and "0:syslog" in shown.output, shown.output

        empty = tmp_path / "none.yaml"
        empty.write_text("")
        invoke_json(["vcdn", "update", vcdn_id, "--log-streams", str(empty), "--wait"], env,
                    token)
        assert stack.acme.ok("GET", f"/vcdns/{vcdn_id}")["log_streams"] == []
        assert stack.acme.ok("GET", f"/vcdns/{vcdn_id}/log-streams")["vnfs"][0]["shipper"] \
            is None
        ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn_id}", 202)
        assert stack.acme.wait(ended["operation"]["id"], 60)["state"] == "COMPLETED"
    finally:
        collector.close()
