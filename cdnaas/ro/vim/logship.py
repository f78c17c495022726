"""The log shipper: a VNF's usage records forwarded to a vCDN's collectors, never blocking.

Runs beside nginx in the VNF that writes the usage log (its namespace and CPU group on
the local driver, a systemd unit on OpenStack); standard library only, so cloud-init can
install this one file. nginx sends each record as a UDP syslog datagram to ``listen`` on
the VNF's loopback (``access_log syslog:``: nginx never waits on it). The shipper keeps a
bounded queue per destination (``queue_records``): when a collector does not take records
the oldest are dropped and counted, so a dead collector costs at most that memory and the
one batch its sender holds for the next retry (``queued`` counts both: at most
``queue_records`` plus :data:`SYSLOG_BATCH` or ``batch_records``). A
sender per destination forwards, retrying with exponential backoff (0.5 s doubling to
:data:`MAX_BACKOFF` s, with jitter):

- syslog: RFC 5424 messages (``<134>1 TIMESTAMP HOSTNAME APP - - - MSG``, MSG the record)
  octet-counted (``LEN SP MSG``, RFC 6587 / RFC 5425) over TCP or TLS;
- https: NDJSON batches of ``batch_records`` or every ``batch_seconds``, POSTed; 2xx is
  delivered, 408/429/5xx and connection failures are retried, any other answer drops the
  batch (counted: the collector refuses it).

The shipper runs at idle CPU priority (``SCHED_IDLE``): beside nginx in a VNF's CPU quota
it gets only the CPU nginx leaves, so streaming never slows serving; a shipper starved
under full load loses datagrams in its socket buffer, counted (``kernel_dropped``).

``status`` (loopback TCP) answers ``GET /status`` with JSON counts (received, dropped by
the kernel's socket buffer, and per destination sent, dropped, queued, failures, last
error) and ``GET /metrics`` with the same as Prometheus counters. Run:
``python3 logship.py CONFIG.json [--pid-file FILE]`` (with a pid file it goes to the
background once listening). See :func:`cdnaas.delivery.logstreams.shipper_config`.
"""
import collections
import datetime as dt
import http.client
import http.server
import json
import logging
import os
import random
import re
import signal
import socket
import ssl
import sys
import threading
import time

LOG = logging.getLogger(__name__)

#: the longest wait between two attempts to reach a collector, in seconds
MAX_BACKOFF = 30.0
FIRST_BACKOFF = 0.5
#: a syslog batch: records written to the connection at once
SYSLOG_BATCH = 500
_TIMEOUT = 10.0
_SO_RXQ_OVFL = getattr(socket, "SO_RXQ_OVFL", 40)
_SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
#: the receive buffer asked for: about 20,000 records of 200 B while the shipper waits for CPU
RECEIVE_BUFFER = 8 << 20
_TIME = re.compile(rb'\{"t":([0-9]{1,12}(?:\.[0-9]{1,6})?)[,}]')
_PRI = 16 * 8 + 6  # facility local0, severity informational


class Destination:
    """One collector: its bounded queue, its counts and its sender thread."""

    def __init__(self, spec, app, hostname, queue_records):
        self.spec = spec
        self.app, self.hostname = app, hostname
        self.queue = collections.deque()
        self.limit = queue_records
        self.ready = threading.Condition()
        self.counts = {"sent": 0, "dropped": 0, "failures": 0}
        self.last_error = None
        self.connection = None
        #: the batch taken from the queue and not yet delivered (it counts as queued)
        self.batch = []

    def offer(self, record):
        """Queue ``record`` (bytes); the oldest queued one is dropped when full. The sender
        is woken when the queue stops being empty or holds a batch."""
        with self.ready:
            if len(self.queue) >= self.limit:
                self.queue.popleft()
                self.counts["dropped"] += 1
            self.queue.append(record)
            if len(self.queue) in (1, self.spec.get("batch_records", SYSLOG_BATCH)):
                self.ready.notify()

    def status(self):
        with self.ready:
            return {"name": self.spec["name"], "type": self.spec["type"],
                    "target": f"{self.spec['host']}:{self.spec['port']}",
                    "queued": len(self.queue) + len(self.batch), "last_error": self.last_error,
                    **self.counts}

    def run(self, stopping):
        """Send until ``stopping`` is set: take a batch, deliver it, back off on failure."""
        backoff = FIRST_BACKOFF
        while not stopping.is_set():
            batch = self.batch or self._take(stopping)
            if not batch:
                continue
            try:
                self._deliver(batch)
            except (OSError, http.client.HTTPException, RetryLater) as exc:
                self._close()
                with self.ready:
                    self.counts["failures"] += 1
                    self.last_error = f"{type(exc).__name__}: {exc}"[:300]
                    # what waits in the batch counts against the bound too
                    excess = len(batch) + len(self.queue) - self.limit
                    if excess > 0:
                        del batch[:excess]
                        self.counts["dropped"] += excess
                LOG.info("collector %s: %s; retrying in %.1f s", self.spec["name"],
                         self.last_error, backoff)
                stopping.wait(backoff * random.uniform(0.8, 1.2))
                backoff = min(backoff * 2, MAX_BACKOFF)
                continue
            except Refused as exc:
                with self.ready:
                    self.counts["dropped"] += len(batch)
                    self.last_error = str(exc)[:300]
            else:
                with self.ready:
                    self.counts["sent"] += len(batch)
            with self.ready:
                self.batch = []
            backoff = FIRST_BACKOFF

    def _take(self, stopping):
        """The next batch, held in :attr:`batch` until delivered: up to ``batch_records``
        (https: waiting up to ``batch_seconds`` for a full one), or [] after a second with
        nothing queued."""
        https = self.spec["type"] == "https"
        most = self.spec["batch_records"] if https else SYSLOG_BATCH
        deadline = time.monotonic() + (self.spec["batch_seconds"] if https else 0)
        with self.ready:
            if not self.queue:
                self.ready.wait(1.0)
            while https and 0 < len(self.queue) < most and not stopping.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.ready.wait(min(left, 1.0))
            self.batch = [self.queue.popleft() for _ in range(min(most, len(self.queue)))]
            return self.batch

    def _deliver(self, batch):
        if self.spec["type"] == "syslog":
            if self.connection is None:
                self.connection = self._connect()
            self.connection.sendall(b"".join(self._syslog_frame(r) for r in batch))
        else:
            self._post(b"".join(_json_line(r) for r in batch))

    def _connect(self):
        raw = socket.create_connection((self.spec["connect"], self.spec["port"]), _TIMEOUT)
        if not self.spec["tls"]:
            return raw
        return self._tls_context().wrap_socket(raw, server_hostname=self.spec["host"])

    def _tls_context(self):
        """Verifying the collector with its ``ca_certificate``, else the system's."""
        return ssl.create_default_context(cadata=self.spec.get("ca_certificate") or None)

    def _syslog_frame(self, record):
        stamp = _timestamp(record)
        message = (f"<{_PRI}>1 {stamp} {self.hostname} {self.app} - - - ".encode("ascii")
                   + record)
        return str(len(message)).encode("ascii") + b" " + message

    def _post(self, body):
        spec = self.spec
        if self.connection is None:
            if spec["tls"]:
                self.connection = _PinnedHTTPS(spec["connect"], spec["host"], spec["port"],
                                               self._tls_context())
            else:
                self.connection = http.client.HTTPConnection(spec["connect"], spec["port"],
                                                             timeout=_TIMEOUT)
        headers = {**spec["headers"], "Content-Type": "application/x-ndjson",
                   "Host": spec["host"] if spec["port"] in (80, 443)
                   else f"{spec['host']}:{spec['port']}"}
        self.connection.request("POST", spec["path"], body=body, headers=headers)
        response = self.connection.getresponse()
        response.read()
        if response.status == 408 or response.status == 429 or response.status >= 500:
            raise RetryLater(f"HTTP {response.status}")
        if not 200 <= response.status < 300:
            raise Refused(f"the collector refused a batch: HTTP {response.status}")

    def _close(self):
        if self.connection is not None:
            try:
                self.connection.close()
            except OSError:
                pass
        self.connection = None


class RetryLater(Exception):
    """The collector answered that it cannot take the batch now."""


class Refused(Exception):
    """The collector will never take the batch (a 4xx other than 408 and 429)."""


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to ``address`` (where the VNF reaches the collector) verified as ``host``."""

    def __init__(self, address, host, port, context):
        super().__init__(host, port, timeout=_TIMEOUT, context=context)
        self.address = address

    def connect(self):
        raw = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.host)


def _timestamp(record):
    """The RFC 5424 TIMESTAMP of a usage record: its ``t`` (epoch seconds, the JSON line's
    first field as nginx writes it), else now."""
    found = _TIME.match(record)
    seconds = float(found.group(1)) if found else time.time()
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def _json_line(record):
    """``record`` as one NDJSON line: itself when it is a JSON object (nginx's
    ``escape=json`` lines are), else ``{"line": ...}``."""
    if record.startswith(b"{") and record.endswith(b"}") and b"\n" not in record:
        return record + b"\n"
    return json.dumps({"line": record.decode("utf-8", "replace")}).encode() + b"\n"


def syslog_message(datagram):
    """The MSG of a datagram nginx's ``access_log syslog:`` sent (``<PRI>TIMESTAMP TAG:
    MSG``, RFC 3164, without hostname), or None when it is not one."""
    header, colon, message = datagram.partition(b": ")
    if not colon or not header.startswith(b"<"):
        return None
    return message.rstrip(b"\n")


class Shipper:
    """The receiving socket, the destinations and their senders, and the status server."""

    def __init__(self, config):
        self.config = config
        self.destinations = [Destination(d, config["app"], config["hostname"],
                                         config["queue_records"])
                             for d in config["destinations"]]
        self.received = 0
        self.kernel_dropped = 0
        self.stopping = threading.Event()
        host, port = _address(config["listen"])
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:  # beyond net.core.rmem_max where allowed (root in a local VNF's namespace)
            self.socket.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, RECEIVE_BUFFER)
        except OSError:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        self.socket.setsockopt(socket.SOL_SOCKET, _SO_RXQ_OVFL, 1)
        self.socket.bind((host, port))
        self.socket.settimeout(1.0)
        self.status_server = http.server.ThreadingHTTPServer(_address(config["status"]),
                                                             _status_handler(self))

    def status(self):
        """The counts as ``GET /status`` shows them."""
        return {"received": self.received, "kernel_dropped": self.kernel_dropped,
                "queue_records": self.config["queue_records"],
                "destinations": [d.status() for d in self.destinations]}

    def serve(self):
        """Receive, forward and answer status until :meth:`stop`."""
        threads = [threading.Thread(target=d.run, args=(self.stopping,), daemon=True)
                   for d in self.destinations]
        threads.append(threading.Thread(target=self.status_server.serve_forever, daemon=True))
        for thread in threads:
            thread.start()
        while not self.stopping.is_set():
            try:
                data, ancillary, _flags, _peer = self.socket.recvmsg(
                    65535, socket.CMSG_SPACE(4))
            except socket.timeout:
                continue
            except OSError:
                if self.stopping.is_set():
                    break
                raise
            for level, kind, value in ancillary:
                if (level, kind) == (socket.SOL_SOCKET, _SO_RXQ_OVFL) and len(value) >= 4:
                    self.kernel_dropped = int.from_bytes(value[:4], sys.byteorder)
            record = syslog_message(data)
            if record is None:
                continue
            self.received += 1
            for destination in self.destinations:
                destination.offer(record)

    def stop(self, *_args):
        self.stopping.set()
        threading.Thread(target=self.status_server.shutdown, daemon=True).start()


def _status_handler(shipper):
    class Status(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path == "/status":
                body, kind = json.dumps(shipper.status()).encode(), "application/json"
            elif self.path == "/metrics":
                body, kind = metrics_text(shipper.status()).encode(), "text/plain; version=0.0.4"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args):
            pass
    return Status


def metrics_text(status):
    """``status`` as Prometheus counters (text exposition format)."""
    lines = ["# TYPE cdnaas_logship_records_received_total counter",
             f"cdnaas_logship_records_received_total {status['received']}",
             "# TYPE cdnaas_logship_records_kernel_dropped_total counter",
             f"cdnaas_logship_records_kernel_dropped_total {status['kernel_dropped']}"]
    for count in ("sent", "dropped"):
        lines.append(f"# TYPE cdnaas_logship_records_{count}_total counter")
        lines += [f'cdnaas_logship_records_{count}_total{{destination="{d["name"]}"}} '
                  f'{d[count]}' for d in status["destinations"]]
    return "\n".join(lines) + "\n"


def _address(text):
    host, _colon, port = text.rpartition(":")
    return host, int(port)


def _idle_priority():
    """Run only on the CPU time nothing else of the VNF wants (``SCHED_IDLE``; else nice 19)."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)


def _daemonize(pid_file):
    """Go to the background (the caller's ``wait`` returns) and write ``pid_file``."""
    if os.fork():
        os._exit(0)  # pylint: disable=protected-access
    os.setsid()
    if os.fork():
        os._exit(0)  # pylint: disable=protected-access
    null = os.open(os.devnull, os.O_RDWR)
    for descriptor in (0, 1, 2):
        os.dup2(null, descriptor)
    with open(pid_file, "w", encoding="ascii") as handle:
        handle.write(f"{os.getpid()}\n")


def main(argv=None):
    """``logship.py CONFIG [--pid-file FILE]``: run the shipper on ``CONFIG`` (JSON)."""
    args = list(sys.argv[1:] if argv is None else argv)
    pid_file = None
    if "--pid-file" in args:
        at = args.index("--pid-file")
        pid_file = args[at + 1]
        del args[at:at + 2]
    with open(args[0], encoding="utf-8") as handle:
        shipper = Shipper(json.load(handle))
    logging.basicConfig(level=logging.INFO, format="logship %(levelname)s %(message)s")
    _idle_priority()
    if pid_file:
        _daemonize(pid_file)
    signal.signal(signal.SIGTERM, shipper.stop)
    signal.signal(signal.SIGINT, shipper.stop)
    shipper.serve()


if __name__ == "__main__":
    main()
