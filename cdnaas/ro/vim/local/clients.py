"""Client hosts in a region: throwaway namespaces on a deployment's region bridge.

The driver uses one to prove a region serves before calling a deployment
ACTIVE; the demo and the tests use them to resolve and fetch as a viewer of
that region would. A client takes an address from a client prefix (so geo-DNS
sees where it comes from) and reaches the region's VNF subnet on-link.
"""
import contextlib
import hashlib
import http.client
import ipaddress
import itertools
import os
import resource
import threading
import time

from cdnaas.calibration import agent
from cdnaas.ro.vim import dnsprobe
from cdnaas.ro.vim.local import netns, network
from cdnaas.ro.vim.local.system import run

CLIENT_PREFIX = "cdnc_"
#: open files a load generator may hold (a socket per connection or viewer)
GENERATOR_FILES = 65536
#: seconds a load generator's host waits for its connections to close (:meth:`Client.wait_closed`)
CLOSE_SECONDS = 10.0
#: /proc/net/tcp states that hold no connection: TIME-WAIT (06) and LISTEN (0A)
_IDLE = ("06", "0A")
_counter = itertools.count()
_counter_lock = threading.Lock()


def probe_address(prefix):
    """The address the driver's own probe takes in a client prefix (its last usable one)."""
    net = ipaddress.ip_network(prefix)
    return net.broadcast_address - 1 if net.num_addresses > 2 else net.network_address


class Client:
    """A viewer host attached to one region of one deployment."""

    def __init__(self, namespace, address):
        self.namespace = namespace
        self.address = address

    def run(self, command, check=True, timeout=30):
        """Run ``command`` on the client; return its stdout."""
        return run(command, check=check, timeout=timeout, namespace=self.namespace)

    def resolve(self, server, hostname, source_port=None):
        """A addresses ``server`` gives this client for ``hostname`` (real ``dig``), asked
        from ``source_port`` (None: one the kernel picks)."""
        source = [f"-b{self.address}#{source_port}"] if source_port else []
        out = self.run(["dig", "+short", "+time=1", "+tries=2", *source, f"@{server}",
                        hostname, "A"], check=False)
        return [line for line in out.split() if _is_ipv4(line)]

    def lookup(self, server, hostname):
        """A addresses ``server`` gives this client for ``hostname``, asked from this
        process (a thread in the client's namespace; no ``dig``)."""
        with netns.entered(self.namespace):
            return dnsprobe.resolves(server, hostname, timeout=1.0)

    def status(self, hostname, address, timeout=10):
        """The HTTP status of this client's ``GET /`` of ``hostname`` at ``address`` (port
        80), asked from this process (no ``curl``); 0 when it got no answer."""
        with netns.entered(self.namespace):
            connection = http.client.HTTPConnection(address, 80, timeout=timeout)
            try:
                connection.request("GET", "/", headers={"Host": hostname})
                return connection.getresponse().status
            except (OSError, http.client.HTTPException):
                return 0
            finally:
                connection.close()

    def fetch(self, url, resolve=None, timeout=10, headers=(), cacert=None):
        """GET ``url`` with curl; return ``(status, headers, body bytes)``. An ``https``
        URL is fetched with HTTP/2 if the server offers it (the ``:protocol`` header
        holds the protocol of the status line: ``HTTP/2``, ``HTTP/1.1``).

        :param resolve: ``(hostname, address)`` to pin the name to an address,
            as a browser would after its DNS answer (on the URL's scheme's port).
        :param headers: request headers to send, as ``"Name: value"`` lines.
        :param cacert: PEM file of the CA that must have issued the server's certificate
            (None: the system's).
        """
        command = ["curl", "-s", "-D", "-", "--max-time", str(timeout), "-o", "-"]
        for header in headers:
            command += ["-H", header]
        if resolve:
            port = 443 if url.startswith("https:") else 80
            command += ["--resolve", f"{resolve[0]}:{port}:{resolve[1]}"]
        if url.startswith("https:"):
            command += ["--http2"] + (["--cacert", str(cacert)] if cacert else [])
        raw = run(command + [url], timeout=timeout + 5, check=False, binary=True,
                  namespace=self.namespace)
        head, _, body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        if not lines or not lines[0].startswith("HTTP/"):
            return 0, {}, b""
        headers = {k.strip().lower(): v.strip()
                   for k, _, v in (line.partition(":") for line in lines[1:])}
        headers[":protocol"] = lines[0].split()[0]
        return int(lines[0].split()[1]), headers, body

    def run_measured(self, command, timeout, cpus=None):
        """Run a load generator ``command`` on the client, on ``cpus`` (CPU numbers; None:
        any) with a file limit for thousands of sockets, as the OpenStack generators'
        agent runs one (:func:`cdnaas.calibration.agent.measure`, whose answer this is).
        Killed after ``timeout`` seconds (status -9)."""
        with netns.entered(self.namespace):
            return agent.measure(command, timeout, lambda: _generator_limits(cpus))

    def wait_closed(self, timeout=CLOSE_SECONDS):
        """Wait (at most ``timeout`` s) until this client holds no TCP connection.

        A generator that exits closes its connections, but the servers may still be
        sending into them: this client's kernel answers that data with a reset, which
        a namespace deleted at once would never send, leaving the server's side of every
        connection to hold its unsent data until its own timeouts (minutes, and all the
        host's TCP memory at 10,000 connections of large objects).

        :returns: the connections still held (0 once closed).
        """
        deadline = time.monotonic() + timeout
        while True:
            with netns.entered(self.namespace):
                held = _tcp_in_use()
            if held == 0 or time.monotonic() >= deadline:
                return held
            time.sleep(0.1)


@contextlib.contextmanager
def client(deployment_id, region, address, prefix_len=None, owner_id=None):
    """A client host with ``address`` on ``region``'s bridge of ``deployment_id``; removed after.

    :param prefix_len: prefix length of the client's subnet (default: /32 plus routes).
    :param owner_id: the RO whose deployment it is (:func:`.network.find_bridge`).
    """
    bridge, subnet = network.find_bridge(deployment_id, region, owner_id)
    namespace = _namespace(deployment_id, region, address)
    own = f"{address}/{prefix_len or 32}"
    network.create_namespace(namespace, [(bridge, own, [str(subnet)])])
    try:
        yield Client(namespace, str(address))
    finally:
        network.delete_namespace(namespace)


def viewers(deployment_id, places):
    """Client hosts made at once (one ``ip`` run plugs them all): ``places`` is
    ``{key: (bridge, subnet, address)}``; returns ``{key: Client}``. Remove them with
    :func:`remove`."""
    made = {key: (_namespace(deployment_id, key, address),
                  [(bridge, f"{address}/32", [str(subnet)])])
            for key, (bridge, subnet, address) in places.items()}
    network.create_namespaces(list(made.values()))
    try:
        for namespace, links in made.values():
            network.configure_namespace(namespace, links)
    except Exception:
        network.delete_namespaces([namespace for namespace, _links in made.values()])
        raise
    return {key: Client(namespace, str(places[key][2])) for key, (namespace, _l) in made.items()}


def remove(hosts):
    """Remove the client ``hosts`` (:class:`Client`) in one ``ip`` run."""
    network.delete_namespaces([host.namespace for host in hosts])


def _namespace(deployment_id, key, address):
    """A new client namespace's name: the deployment's client prefix and a unique tag."""
    with _counter_lock:
        serial = next(_counter)
    tag = hashlib.sha1(f"{key}/{address}/{serial}/{os.getpid()}".encode()).hexdigest()[:10]
    return f"{CLIENT_PREFIX}{deployment_id}_{tag}"


def remove_clients(deployment_id):
    """Remove the client hosts of ``deployment_id`` (left by a crash); return how many."""
    stale = [ns for ns in network.list_namespaces()
             if ns.startswith(f"{CLIENT_PREFIX}{deployment_id}_")]
    network.delete_namespaces(stale)
    return len(stale)


def _tcp_in_use():
    """TCP connections of this thread's network namespace (not listening, not in TIME-WAIT)."""
    held = 0
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/thread-self/net/{table}", encoding="ascii") as handle:
                next(handle, None)  # the header
                held += sum(1 for line in handle if line.split(None, 4)[3] not in _IDLE)
        except FileNotFoundError:  # no IPv6 here
            continue
    return held


def _is_ipv4(text):
    try:
        return isinstance(ipaddress.ip_address(text), ipaddress.IPv4Address)
    except ValueError:
        return False


def _generator_limits(cpus):
    """In a load generator's child process before it runs: its CPUs and file limit."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    files = GENERATOR_FILES if hard == resource.RLIM_INFINITY else min(GENERATOR_FILES, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, hard))
