"""Log streams: the option checked strictly (400 naming the field), the shipper forwarding
real datagrams to real collectors (syslog over TCP and TLS, NDJSON over HTTP) with a
bounded queue that drops and counts while a collector is down, and, on the local driver
(root), records of real requests streamed from the balancer while a dead collector does
not slow the vCDN."""
import contextlib
import http.server
import json
import os
import socket
import socketserver
import ssl
import threading
import time
import uuid

import pytest

from cdnaas.common import errors
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.delivery import logstreams
from cdnaas.ro.vim import logfiles, logship
from tests.support.certs import TestCA
from tests.support.sigs import sample_sig


# --- collectors ---------------------------------------------------------------------------

class SyslogCollector:
    """A TCP (or TLS) syslog server in a thread: octet-counted frames into ``messages``."""

    def __init__(self, port=0, context=None, host="0.0.0.0"):
        self.messages = []
        collector = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                stream = self.rfile
                while True:
                    length = b""
                    while not length.endswith(b" "):
                        byte = stream.read(1)
                        if not byte:
                            return
                        length += byte
                    collector.messages.append(stream.read(int(length)))

        class Server(socketserver.ThreadingTCPServer):
            allow_reuse_address = True
            daemon_threads = True

            def get_request(self):
                sock, peer = super().get_request()
                return (context.wrap_socket(sock, server_side=True) if context else sock), peer

        self.server = Server((host, port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def records(self):
        """The MSG (a usage record) of each message received."""
        return [json.loads(m.split(b" - - - ", 1)[1]) for m in list(self.messages)]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class HttpCollector:
    """An HTTP server in a thread taking NDJSON POSTs into ``records`` and ``headers``."""

    def __init__(self, host="0.0.0.0"):
        self.records, self.headers = [], []
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                collector.headers.append(dict(self.headers))
                collector.records += [json.loads(line) for line in body.splitlines()]
                self.send_response(204)
                self.end_headers()

            def log_message(self, *_args):
                pass
        self.server = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def wait_for(check, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.fixture
def allowed(monkeypatch):
    monkeypatch.setenv("CDNAAS_ORIGIN_ALLOW", "127.0.0.1")


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
        sender.send(b"<190>Nov 27 12:00:00 cdnaas: " + json.dumps(record).encode())
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
    import tempfile  # pylint: disable=import-outside-toplevel
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
