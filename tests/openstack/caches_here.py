"""The caches of a vCDN on the mini cloud, run on this machine as their servers would.

The mini cloud's servers boot no guest. :class:`CachesHere` runs each cache (and the
origin shield, at each of its legs) of a deployment here instead: the ``nginx.conf`` its
user-data writes (as Nova keeps it),
moved from the image's prefix to a folder of its own, at the cache's address in a
network namespace standing in for the vCDN's networks, with the origin of the SIG at
its address there and this machine at ``.1`` of each region's subnet (RO's side of the
management network). Viewers' requests go straight to a cache with the
``X-Forwarded-For`` header an Octavia listener adds. The vCDN's networks must come from a
pool this machine routes nowhere else (:func:`unrouted_pool`): a route of the machine's own
to the same prefix would take the requests meant for the caches.
"""
import base64
import http.client
import ipaddress
import json
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import yaml

from cdnaas.origin.server import serve_in_thread
from cdnaas.ro.vim.local import netns
from cdnaas.ro.vim.openstack import userdata
from cdnaas.vnf import subnet


def ip(*args):
    """Run ``ip`` with ``args`` (this machine's networks: root)."""
    subprocess.run(["ip", *args], check=True, capture_output=True)


def unrouted_pool():
    """A ``/16`` of ``10.0.0.0/8`` that no route of this machine overlaps (the default
    route aside), for ``CDNAAS_OS_POOL``."""
    routes = json.loads(subprocess.run(["ip", "-j", "route", "show"], check=True,
                                       capture_output=True, text=True).stdout)
    routed = [ipaddress.ip_network(r["dst"], strict=False) for r in routes
              if r["dst"] != "default"]
    for second in range(200, 256):
        pool = ipaddress.ip_network(f"10.{second}.0.0/16")
        if not any(pool.overlaps(network) for network in routed):
            return str(pool)
    raise AssertionError(f"every /16 of 10.200.0.0-10.255.0.0 is routed here: {routed}")


def cache_files(server):
    """``{path: content}`` the user-data of Nova server ``server`` writes."""
    document = yaml.safe_load(base64.b64decode(server.user_data).decode())
    return {f["path"]: f["content"] for f in document["write_files"]}


class CachesHere:
    """The caches of ``deployment`` (its ``origin``: ``(address, port)``), run here."""

    def __init__(self, admin_conn, deployment, origin):
        self.admin_conn, self.deployment, self.origin_at = admin_conn, deployment, origin
        tag = uuid.uuid4().hex[:6]
        self.namespace, self.host_link, self.link = f"cdnaas-ch-{tag}", f"ch{tag}h", f"ch{tag}n"
        self.caches = [v for v in deployment.vnfs if v.role == "cache"]
        self.shields = [v for v in deployment.vnfs if v.role == "shield"]
        self.prefixes = {}
        self.processes, self.origin = [], None

    def __enter__(self):
        try:
            self._run()
        except BaseException:
            self.__exit__(None, None, None)  # nothing left of a start that failed
            raise
        return self

    def _run(self):
        ip("netns", "add", self.namespace)
        ip("link", "add", self.host_link, "type", "veth", "peer", "name", self.link, "netns",
            self.namespace)
        for info in self.deployment.resources["regions"].values():
            network = ipaddress.ip_network(info["cidr"])
            ip("addr", "add", f"{network[1]}/{network.prefixlen}", "dev", self.host_link)
        ip("link", "set", self.host_link, "up")
        for address, prefixlen in self._addresses():
            ip("-n", self.namespace, "addr", "add", f"{address}/{prefixlen}", "dev", self.link)
        ip("-n", self.namespace, "addr", "add", f"{self.origin_at[0]}/32", "dev", "lo")
        ip("-n", self.namespace, "link", "set", self.link, "up")
        ip("-n", self.namespace, "link", "set", "lo", "up")
        with netns.entered(self.namespace):  # its socket is the namespace's
            self.origin, _thread = serve_in_thread(*self.origin_at)
        for vnf in self.shields + self.caches:
            self._start(vnf)
        for vnf in self.shields + self.caches:
            self._wait_listening(vnf)

    def _addresses(self):
        """``(address, prefix length)`` of each cache, and of the shield on each network."""
        regions = self.deployment.resources["regions"]
        found = [(c.address, ipaddress.ip_network(regions[c.region]["cidr"]).prefixlen)
                 for c in self.caches]
        if self.shields:  # one, with a leg on every network
            found += [(str(network[subnet.SHIELD_HOST]), network.prefixlen) for network in
                      (ipaddress.ip_network(info["cidr"]) for info in regions.values())]
        return found

    def _start(self, cache):
        """Run ``cache``'s nginx as its unit would, in a folder of its own."""
        server = self.admin_conn.compute.get_server(
            self.deployment.resources["servers"][cache.name]["server_id"])
        prefix = Path(tempfile.mkdtemp(prefix=f"cdnaas-{cache.name}-"))
        prefix.chmod(0o755)  # nginx's workers (www-data) reach its cache and temp folders
        for folder in ("logs", "temp"):
            (prefix / folder).mkdir()
        conf = cache_files(server)[f"{userdata.CONF_DIR}/nginx.conf"]
        (prefix / "nginx.conf").write_text(conf.replace(userdata.PREFIX, str(prefix)))
        self.prefixes[cache.name] = prefix
        with open(prefix / "logs" / "stderr", "wb") as stderr:
            self.processes.append(subprocess.Popen(  # pylint: disable=consider-using-with
                ["ip", "netns", "exec", self.namespace, "nginx", "-p", f"{prefix}/", "-c",
                 str(prefix / "nginx.conf")], stderr=stderr))

    def _wait_listening(self, cache, seconds=20):
        """Until ``cache``'s nginx accepts connections (a first SYN may be lost while the
        namespace's link comes up: a connection timing out is tried again too)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                socket.create_connection((cache.address, 80), timeout=2).close()
                return
            except (ConnectionRefusedError, TimeoutError):
                time.sleep(0.1)
        raise AssertionError(f"{cache.name} at {cache.address} never answered: {self._why(cache)}")

    def fetch(self, cache, path, viewer):
        """GET ``path`` from ``cache`` for ``viewer`` (the address Octavia adds):
        ``(status, bytes received: status line, headers and body)``."""
        response, body = self.get(cache, path, viewer)
        head = f"HTTP/1.1 {response.status} {response.reason}\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in response.getheaders()) + "\r\n"
        return response.status, len(head.encode("latin-1")) + len(body)

    @staticmethod
    def get(cache, path, viewer):
        """``(response, body)`` of GET ``path`` from ``cache`` for ``viewer``."""
        connection = http.client.HTTPConnection(cache.address, 80, timeout=10)
        try:
            connection.request("GET", path, headers={"X-Forwarded-For": viewer})
            response = connection.getresponse()
            return response, response.read()
        finally:
            connection.close()

    def _why(self, cache):
        """What an operator on call would look at: nginx's state and words, the route."""
        process = self.processes[(self.shields + self.caches).index(cache)]
        logs = self.prefixes[cache.name] / "logs"
        said = {name: (logs / name).read_text(errors="replace")[-2000:]
                for name in ("stderr", "error.log") if (logs / name).exists()}
        route = subprocess.run(["ip", "route", "get", cache.address], capture_output=True,
                               text=True, check=False).stdout.strip()
        return f"nginx exit code {process.poll()}, said {said}, route {route!r}"

    def __exit__(self, *exc):
        for process in self.processes:
            process.terminate()
            process.wait(10)
        if self.origin is not None:
            self.origin.shutdown()
            self.origin.server_close()
        subprocess.run(["ip", "netns", "del", self.namespace], check=False)
        subprocess.run(["ip", "link", "del", self.host_link], check=False, capture_output=True)
        for prefix in self.prefixes.values():
            shutil.rmtree(prefix, ignore_errors=True)
