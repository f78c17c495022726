"""The DNS servers of a vCDN on the mini cloud, run on this machine as their servers would.

The mini cloud's servers boot no guest. :class:`DnsHere` runs each DNS VNF of a
deployment here instead, in a network namespace of its own (its nftables steering is
the machine's), at its address, with what its user-data writes (as Nova keeps it): one
dnsmasq per region and the steering rules sending port 53 to the client's region's
(the default region's for a client of no region, as this machine is). This machine
reaches each at its address (a host route). :meth:`DnsHere.stop` and
:meth:`DnsHere.start` take one down and up again, as a rebuild does to its guest, up
with the user-data Nova has for it then.
"""
import ipaddress
import shutil
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path

from tests.openstack.caches_here import cache_files as written_files, ip
from cdnaas.ro.vim import dnsprobe
from cdnaas.ro.vim.local.processes import wait_until
from cdnaas.ro.vim.openstack import userdata


class DnsHere:
    """The DNS VNFs of ``deployment``, run here until the context ends."""

    def __init__(self, admin_conn, deployment):
        self.admin_conn, self.deployment = admin_conn, deployment
        self.servers = {v.name: v for v in deployment.vnfs if v.role == "dns"}
        tag = uuid.uuid4().hex[:6]
        self.namespaces = {name: (f"cdnaas-dh-{tag}-{i}", f"dh{tag}{i}h", f"dh{tag}{i}n")
                           for i, name in enumerate(self.servers)}
        self.processes = {name: [] for name in self.servers}
        self.prefix = Path(tempfile.mkdtemp(prefix="cdnaas-dns-here-"))
        self.lock = threading.Lock()

    def __enter__(self):
        try:
            for name, vnf in self.servers.items():
                self._network(name, vnf)
                self.start(name)
        except BaseException:
            self.__exit__(None, None, None)  # nothing left of a start that failed
            raise
        return self

    def _network(self, name, vnf):
        namespace, host_link, link = self.namespaces[name]
        prefixlen = ipaddress.ip_network(
            self.deployment.resources["regions"][vnf.region]["cidr"]).prefixlen
        ip("netns", "add", namespace)
        ip("link", "add", host_link, "type", "veth", "peer", "name", link, "netns", namespace)
        ip("link", "set", host_link, "up")
        ip("route", "add", f"{vnf.address}/32", "dev", host_link)
        ip("-n", namespace, "addr", "add", f"{vnf.address}/{prefixlen}", "dev", link)
        ip("-n", namespace, "link", "set", link, "up")
        ip("-n", namespace, "link", "set", "lo", "up")
        ip("-n", namespace, "route", "add", "default", "dev", link)  # back to this machine

    def start(self, name):
        """Run DNS VNF ``name`` as its user-data says now: steering rules, then a dnsmasq
        per region; return once it answers the vCDN's name."""
        namespace = self.namespaces[name][0]
        server = self.admin_conn.compute.get_server(
            self.deployment.resources["servers"][name]["server_id"])
        root = self.prefix / name
        shutil.rmtree(root, ignore_errors=True)
        files = {}
        for path, text in written_files(server).items():
            if path.startswith(userdata.CONF_DIR):
                target = root / Path(path).name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text.replace(userdata.PREFIX, str(root)))
                files[Path(path).name] = target
        subprocess.run(["ip", "netns", "exec", namespace, "nft", "-f", str(files["steering.nft"])],
                       check=True, capture_output=True)
        with self.lock:
            for conf in sorted(n for n in files if n.startswith("dnsmasq-")):
                (root / conf.removeprefix("dnsmasq-").removesuffix(".conf")).mkdir()
                self.processes[name].append(subprocess.Popen(  # pylint: disable=consider-using-with
                    ["ip", "netns", "exec", namespace, "dnsmasq", "--keep-in-foreground",
                     f"--conf-file={files[conf]}"], stderr=subprocess.DEVNULL))
        address = self.servers[name].address
        wait_until(lambda: dnsprobe.resolves(address, self.deployment.entry_point.hostname),
                   f"{name} at {address} to answer")

    def stop(self, name):
        """Stop DNS VNF ``name``'s dnsmasqs (its steering rules stay, as a dead guest's)."""
        with self.lock:
            for process in self.processes[name]:
                process.terminate()
                process.wait(10)
            self.processes[name] = []

    def __exit__(self, *exc):
        for name in self.servers:
            self.stop(name)
        for namespace, host_link, _link in self.namespaces.values():
            subprocess.run(["ip", "netns", "del", namespace], check=False, capture_output=True)
            subprocess.run(["ip", "link", "del", host_link], check=False, capture_output=True)
        shutil.rmtree(self.prefix, ignore_errors=True)
