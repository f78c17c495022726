"""The load-generator agent: an HTTP service on a load-generator host that runs one load
test at a time (wrk or :mod:`.viewers`) and answers what the generator printed.

    python3 -m cdnaas.calibration.agent --address A --port 8081 --management PREFIX... \\
        --targets PREFIX...

The OpenStack driver's load-generator servers run it on the VNF management port
(:func:`cdnaas.ro.vim.openstack.userdata.load_generator` writes this package's
``agent``, ``loads``, ``wrk`` and ``viewers`` modules and starts it); RO asks it
(:mod:`cdnaas.ro.vim.openstack.loadgen`). Standard library only.

- ``GET /health``: 200 ``{"agent", "tools": {"http", "viewers"}, "busy"}``;
- ``POST /load`` with a JSON object (a test, :func:`.loads.check`): 200 ``{"status",
  "stdout", "stderr", "cpu_seconds", "seconds", "tool"}`` once the generator ended
  (``status``: its exit status, -9 when killed at :func:`.loads.timeout`; ``cpu_seconds``:
  the CPU time the generator used; ``seconds``: how long it ran); 400 a refused test
  (``{"error"}`` naming the field), 409 a test running already, 411 no length, 413 a
  body over :data:`MAX_BODY` bytes.

It answers only connections from its management prefixes: any other gets a 403 and
the connection closed before a byte of its request is read. It loads only addresses
of its target prefixes, and runs only the argument list :func:`.loads.command` builds
from a checked test: no shell, no path or option of the caller's choosing.
"""
import argparse
import http.server
import ipaddress
import json
import logging
import os
import socket
import subprocess
import tempfile
import threading
import time

from cdnaas.calibration import loads

AGENT = "cdnaas-agent 1"
HEALTH_PATH = "/health"
LOAD_PATH = "/load"
#: the largest request body read (a test is a few hundred bytes)
MAX_BODY = 4096
#: the most generator output answered (viewers' per-window figures included), per stream
MAX_OUTPUT = 64 << 20
#: seconds a client has for each read of its request
READ_TIMEOUT = 10
_FORBIDDEN = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

LOG = logging.getLogger("cdnaas-agent")


def prefixes(values):
    """``values`` (strings) as address prefixes, refusing zones and ``/0``.

    :raises ValueError: naming the value refused.
    """
    found = []
    for value in values:
        try:
            prefix = ipaddress.ip_network(value, strict=False)
        except ValueError:
            prefix = None
        if prefix is None or prefix.prefixlen == 0 or "%" in str(value):
            raise ValueError(f"{value!r} is not an address prefix (like 10.0.0.0/24; not /0)")
        found.append(prefix)
    return found


def measure(argv, seconds, preexec_fn=None):
    """Run a generator's ``argv`` (``preexec_fn`` in its child first); kill it after
    ``seconds``. Return ``(exit status, stdout, stderr, CPU seconds it used, seconds it
    ran)``, each stream at most :data:`MAX_OUTPUT` bytes; status -9: killed."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(argv, stdout=out, stderr=err,  # pylint: disable=consider-using-with
                                   stdin=subprocess.DEVNULL, preexec_fn=preexec_fn)
        timer = threading.Timer(seconds, process.kill)
        timer.start()
        try:
            _pid, status, usage = os.wait4(process.pid, 0)
        finally:
            timer.cancel()
        process.returncode = os.waitstatus_to_exitcode(status)
        streams = []
        for stream in (out, err):
            stream.seek(0)
            streams.append(stream.read(MAX_OUTPUT).decode(errors="replace"))
    return (process.returncode, *streams, usage.ru_utime + usage.ru_stime,
            time.monotonic() - started)


class Agent(http.server.ThreadingHTTPServer):
    """The service: ``management`` and ``targets`` are :func:`prefixes`."""

    daemon_threads = True

    def __init__(self, address, port, management, targets):
        self.management, self.targets = management, targets
        self.busy = threading.Lock()
        self.address_family = socket.AF_INET6 if ":" in address else socket.AF_INET
        super().__init__((address, port), _Handler)

    def verify_request(self, request, client_address):
        """Only the management side is answered (403, nothing read, for anyone else)."""
        try:
            source = ipaddress.ip_address(client_address[0])
        except ValueError:
            source = None
        if source is not None and any(source in prefix for prefix in self.management):
            return True
        try:
            request.sendall(_FORBIDDEN)
        except OSError:
            pass
        return False

    def run(self, test):
        """Run the checked ``test``; return the answer of ``POST /load`` (None: busy)."""
        argv = loads.command(test)
        if not self.busy.acquire(blocking=False):
            return None
        try:
            status, out, err, cpu, seconds = measure(argv, loads.timeout(test))
        except OSError as exc:  # the generator is not installed, say
            status, out, err, cpu, seconds = 127, "", f"cannot run {argv[0]}: {exc}", 0.0, 0.0
        finally:
            self.busy.release()
        return {"status": status, "stdout": out, "stderr": err, "cpu_seconds": round(cpu, 3),
                "seconds": round(seconds, 3), "tool": loads.tool(test["kind"])}


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = AGENT
    protocol_version = "HTTP/1.1"
    timeout = READ_TIMEOUT

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path != HEALTH_PATH:
            self._answer(404, {"error": f"GET {HEALTH_PATH} or POST {LOAD_PATH}"})
            return
        self._answer(200, {"agent": AGENT, "busy": self.server.busy.locked(),
                           "tools": {kind: loads.tool(kind) for kind in loads.KINDS}})

    def do_POST(self):  # noqa: N802
        if self.path != LOAD_PATH:
            self._answer(404, {"error": f"POST {LOAD_PATH}"})
            return
        body = self._body()
        if body is None:
            return
        try:
            test = loads.check(json.loads(body.decode("utf-8")), self.server.targets)
        except (ValueError, RecursionError) as exc:  # UnicodeError and JSON errors are ValueErrors
            self._answer(400, {"error": str(exc)[:300] if not isinstance(exc, RecursionError)
                               else "the body nests too deep"})
            return
        LOG.info("load test from %s: %s", self.client_address[0], test)
        answer = self.server.run(test)
        if answer is None:
            self._answer(409, {"error": "a load test is running already"})
            return
        LOG.info("%s ended with status %s after %.1f s", answer["tool"], answer["status"],
                 answer["seconds"])
        self._answer(200, answer)

    def _body(self):
        """The request body, or None once refused (the connection then closes)."""
        if self.headers.get("Transfer-Encoding"):
            self._answer(411, {"error": "send a Content-Length, not a transfer encoding"})
            return None
        length = self.headers.get("Content-Length", "")
        if not length.isdigit():
            self._answer(411, {"error": "a Content-Length is required"})
            return None
        if int(length) > MAX_BODY:
            self._answer(413, {"error": f"a load test is at most {MAX_BODY} bytes"})
            return None
        body = self.rfile.read(int(length))
        if len(body) != int(length):
            self.close_connection = True
            return None
        return body

    def _answer(self, status, document):
        data = json.dumps(document, separators=(",", ":")).encode()
        if status >= 400:
            self.close_connection = True
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        text = (format % args).encode("ascii", "backslashreplace").decode("ascii")
        LOG.info("%s %s", self.client_address[0], text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--address", required=True, help="the address to listen on")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--management", nargs="+", required=True,
                        help="prefixes whose connections are answered")
    parser.add_argument("--targets", nargs="+", required=True,
                        help="prefixes of the addresses a test may load")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        management, targets = prefixes(args.management), prefixes(args.targets)
    except ValueError as exc:
        parser.error(str(exc))
    agent = Agent(args.address, args.port, management, targets)
    LOG.info("%s on %s:%d, answering %s, loading %s", AGENT, args.address, args.port,
             ", ".join(map(str, management)), ", ".join(map(str, targets)))
    agent.serve_forever()


if __name__ == "__main__":
    main()
