"""The transport between services (:class:`cdnaas.common.http.ServiceTransport`) under
:class:`~cdnaas.common.http.JsonClient`, against a real HTTP server on loopback: what it
sends, how answers and failures come back, and that a thread keeps its connection."""
import contextlib
import json
import threading
import time
from http import server as http_server

import pytest

from cdnaas.common import errors, http
from cdnaas.common.ports import free_loopback_ports


class Handler(http_server.BaseHTTPRequestHandler):
    """Echoes each request as JSON (``/echo``), answers an error (``/missing``), a body
    that is not JSON (``/text``), a streamed body (``/stream``), or nothing for a while
    (``/slow``)."""

    protocol_version = "HTTP/1.1"
    seen_ports = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.answer()

    def do_POST(self):  # noqa: N802
        self.answer()

    def answer(self):
        Handler.seen_ports.append(self.client_address[1])
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path.startswith("/slow"):
            time.sleep(1)
        if self.path.startswith("/missing"):
            self.send(404, json.dumps({"error": {"message": "no such thing", "field": "x"}}).encode())
        elif self.path.startswith("/text"):
            self.send(500, b"<html>broken</html>")
        elif self.path.startswith("/stream"):
            self.send(200, b"x" * 200_000)
        else:
            self.send(200, json.dumps({
                "method": self.command, "path": self.path, "body": body.decode(),
                "type": self.headers.get("Content-Type"),
                "auth": self.headers.get("Authorization")}).encode())

    def send(self, status, payload):
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError):  # a client that timed out left
            self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    port = free_loopback_ports(1)[0]
    served = http_server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=served.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{port}"
    served.shutdown()
    served.server_close()


class Peer(http.JsonClient):
    service = "so"  # an internal service: signed, through the thread's transport


def test_a_request_sends_its_query_body_and_service_token(server):
    client = Peer(base_url=server)
    assert isinstance(client.session, http.ServiceTransport)
    got = client.get("/echo", params={"a": ["1", "2"], "b": None, "c": "x y"})
    assert got["path"] == "/echo?a=1&a=2&c=x+y" and got["method"] == "GET"
    assert got["auth"].startswith("Bearer svc1.cdnaas.")
    posted = client.post("/echo?d=1", json={"n": 1}, params={"e": 2})
    assert posted["path"] == "/echo?d=1&e=2" and json.loads(posted["body"]) == {"n": 1}
    assert posted["type"] == "application/json"
    raw = client.post("/echo", data=b"name: x", headers={"Content-Type": "application/yaml"})
    assert (raw["body"], raw["type"]) == ("name: x", "application/yaml")


def test_a_thread_keeps_its_connection(server):
    client = Peer(base_url=server)
    Handler.seen_ports.clear()
    for _ in range(3):
        client.get("/echo")
    assert len(set(Handler.seen_ports)) == 1


def test_errors_come_back_as_the_peer_said_or_as_unreachable(server):
    client = Peer(base_url=server)
    with pytest.raises(errors.NotFound, match="no such thing") as found:
        client.get("/missing")
    assert found.value.field == "x"
    with pytest.raises(errors.UpstreamError, match="broken") as found:
        client.get("/text")
    assert found.value.status == 502
    with pytest.raises(errors.UpstreamError, match="unreachable"):
        Peer(base_url=f"http://127.0.0.1:{free_loopback_ports(1)[0]}").get("/echo")
    with pytest.raises(errors.UpstreamError, match="unreachable"):
        Peer(base_url=server, timeout=0.2).get("/slow")
    assert client.get("/echo")["path"] == "/echo"  # the thread's connection still serves


def test_a_stream_comes_in_chunks_and_its_errors_before_the_first(server):
    client = Peer(base_url=server)
    chunks = list(client.stream("/stream", chunk_bytes=65536))
    assert b"".join(chunks) == b"x" * 200_000 and len(chunks) >= 3
    with pytest.raises(errors.NotFound):
        client.stream("/missing")
    assert client.get("/echo")["path"] == "/echo"
