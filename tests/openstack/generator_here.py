"""A calibration's load generators on the mini cloud, run on this machine as their servers would.

The mini cloud's servers boot no guest. When a load test of the ``openstack`` driver boots
a load-generator server (:mod:`cdnaas.ro.vim.openstack.loadgen`), :class:`AgentHere` runs
what that server's user-data starts: the files it writes, under a folder of their own,
and the command line of its ``cdnaas-loadgen`` unit (the agent), in a network namespace
holding the server's address: what the VNF image's systemd would run.
:class:`GeneratorsHere` does so for each region of a deployment whose caches run here
(``tests/openstack/caches_here.py``), in the caches' namespace, where the agent's wrk and
viewers reach the caches' real nginx.
"""
import base64
import gzip
import ipaddress
import shlex
import subprocess
import threading
import time

import yaml

from cdnaas.ro.vim.openstack import plan, userdata
from tests.openstack.caches_here import ip

#: the unit of the agent in a load generator's user-data
UNIT = "/etc/systemd/system/cdnaas-loadgen.service"
#: the MTU of a Neutron network (VXLAN), given the loopback of the caches' namespace, through
#: which the agent's load reaches them: at the loopback's 64 KB a 73 KB answer waits for a
#: delayed ACK (40 ms) that no network shows
NETWORK_MTU = 1450


def generator_files(server):
    """``{path: text}`` of what a load generator's user-data (Nova server ``server``) writes."""
    files = {}
    for entry in yaml.safe_load(base64.b64decode(server.user_data).decode())["write_files"]:
        content = entry["content"]
        if entry.get("encoding") == "gz+b64":
            content = gzip.decompress(base64.b64decode(content)).decode()
        files[entry["path"]] = content
    return files


def exec_start(unit):
    """The command line of a systemd unit's ``ExecStart`` (continuation lines joined)."""
    text = unit.replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    return shlex.split(line[len("ExecStart="):])


class AgentHere:
    """The agent of load-generator server ``name``, run in network namespace ``namespace``
    (which holds the server's address) once the driver has created the server, with the
    files its user-data writes under ``root`` (a folder)."""

    def __init__(self, admin_conn, name, namespace, root):
        self.admin_conn, self.name, self.namespace, self.root = admin_conn, name, namespace, root
        self.process, self.failure = None, None
        self._stop = threading.Event()
        self._thread = None

    def start(self, seconds=60):
        """Wait (in a thread, ``seconds`` at most) for the server, then run its agent."""
        self._thread = threading.Thread(target=self._run, args=(seconds,), daemon=True,
                                        name=f"agent-here-{self.name}")
        self._thread.start()
        return self

    def started(self):
        """Wait for the start. :raises AssertionError: the agent was not started, saying why."""
        self._thread.join()
        if self.process is None:
            raise AssertionError(f"the agent of {self.name} was not started: "
                                 f"{self.failure or 'stopped first'}")

    def _run(self, seconds):
        try:
            server = self._server(seconds)
            if server is None:
                return
            files = generator_files(server)
            for path, text in files.items():
                target = self.root / path.lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
            self.process = subprocess.Popen(  # pylint: disable=consider-using-with
                ["ip", "netns", "exec", self.namespace, "env",
                 f"PYTHONPATH={self.root}{userdata.LOADGEN_DIR}", *exec_start(files[UNIT])])
        except Exception as exc:  # pylint: disable=broad-except  (the test reports it)
            self.failure = exc

    def _server(self, seconds):
        """The server ``name`` once Nova has it (None: stopped first).

        :raises AssertionError: none within ``seconds``.
        """
        deadline = time.monotonic() + seconds
        while not self._stop.wait(0.5):
            found = list(self.admin_conn.compute.servers(all_projects=True,
                                                         name=f"^{self.name}$"))
            if found:
                return self.admin_conn.compute.get_server(found[0].id)
            if time.monotonic() > deadline:
                raise AssertionError(f"no server {self.name} within {seconds} s")
        return None

    def stop(self):
        """Stop waiting for the server, and the agent if it runs."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.process is not None:
            self.process.kill()
            self.process.wait()


class GeneratorsHere:
    """The load generators of a deployment whose caches run here (``caches``, a running
    :class:`~tests.openstack.caches_here.CachesHere`), in the caches' namespace: each
    region's generator address (the subnet's last but one, as the driver gives it) on its
    link and, given a folder ``root``, the agent of each (:class:`AgentHere`, under
    ``root``) once the driver creates its server; without ``root``, nothing answers there.
    """

    def __init__(self, caches, root=None):
        self.caches, self.root, self.agents = caches, root, []

    def __enter__(self):
        try:
            ip("-n", self.caches.namespace, "link", "set", "lo", "mtu", str(NETWORK_MTU))
            for region, info in self.caches.deployment.resources["regions"].items():
                self._start(region, ipaddress.ip_network(info["cidr"]))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self, region, network):
        ip("-n", self.caches.namespace, "addr", "add",
           f"{network.broadcast_address - 1}/{network.prefixlen}", "dev", self.caches.link)
        if self.root is not None:
            name = plan.resource_name(self.caches.deployment.deployment_id, f"loadgen-{region}")
            self.agents.append(AgentHere(self.caches.admin_conn, name, self.caches.namespace,
                                         self.root / name).start())

    def started(self):
        """Wait for each agent's start. :raises AssertionError: one was not started (why)."""
        for agent in self.agents:
            agent.started()

    def __exit__(self, *exc):
        for agent in self.agents:
            agent.stop()
