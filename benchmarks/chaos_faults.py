"""The faults of the chaos soak (``benchmarks/chaos.py``) and how long each takes to heal.

Kinds, dealt from a shuffled deck so that a long run strikes each as often (and a short
one strikes different ones each time):

- ``kill api`` ... ``kill im``: ``kill -9`` of the service's process (the stack's pid
  file names it), then ``cdnaas up --detach``, which starts the services that are down;
  healed when it returns (every service answers ``/healthz``);
- ``kill cache master``, ``kill cache worker``, ``kill balancer master``, ``kill dnsmasq``:
  ``kill -9`` of that process of a VNF of one of the viewers' vCDNs (its pid file, or a
  worker among the master's children); healed when RO's health of the vCDN says every
  VNF healthy again (the process tree whole) and no process of what was killed runs;
- ``restart database`` (PostgreSQL only): ``pg_ctl restart -m immediate`` (a crash, no
  checkpoint); healed when the API reads the vCDNs again.

Each fault is a :class:`Fault`; :meth:`Faults.strike` returns at once for a VNF fault (a
thread watches for the heal, bounded by ``heal_bound`` seconds) and once the services
answer again for the others.
"""
import dataclasses
import datetime as dt
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import requests

from cdnaas.cli import stack as stacks
from cdnaas.common import config, errors, timeutil
from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.local import cgroups, processes

SERVICE_KINDS = tuple(f"kill {svc}" for svc in config.SERVICES)
VNF_KINDS = ("kill cache master", "kill cache worker", "kill balancer master", "kill dnsmasq")
DATABASE_KIND = "restart database"
#: seconds between two looks at whether a fault healed
POLL = 0.5


@dataclasses.dataclass
class Fault:
    """One fault: what, where, when (monotonic ``at``, wall-clock ``wall``), and when it
    healed (``healed``: seconds after it, None while not or never), with the IM's heal
    decision's delay (``decided``) where there was one; ``error`` if it could not strike
    or the services did not come back."""

    kind: str
    target: str
    at: float
    wall: dt.datetime
    healed: float = None
    decided: float = None
    error: str = None


class Faults:
    """Strikes faults on ``stack`` (a :class:`chaos.ChaosStack`) at the vCDNs ``targets``
    (``{label: vcdn id}``, the viewers' ones), in the order of a deck shuffled by ``rng``."""

    def __init__(self, stack, targets, rng, heal_bound, cluster=None):
        self.stack, self.targets, self.rng = stack, targets, rng
        self.heal_bound, self.cluster = heal_bound, cluster
        self.kinds = SERVICE_KINDS + VNF_KINDS + ((DATABASE_KIND,) if cluster else ())
        self.deck = []
        self.struck = []
        self.watchers = []

    def strike(self):
        """Strike the next fault of the deck; return its :class:`Fault`."""
        if not self.deck:
            self.deck = self.rng.sample(self.kinds, len(self.kinds))
        kind = self.deck.pop()
        if kind in SERVICE_KINDS:
            fault = self._service(kind, kind.split()[1])
        elif kind == DATABASE_KIND:
            fault = self._database(kind)
        else:
            fault = self._vnf(kind)
        self.struck.append(fault)
        return fault

    def join(self, timeout):
        """Wait (at most ``timeout`` s in all) for the heal watchers to end."""
        deadline = time.monotonic() + timeout
        for watcher in self.watchers:
            watcher.join(max(0.0, deadline - time.monotonic()))

    # -- the services ---------------------------------------------------------------------

    def _service(self, kind, service):
        record = stacks.read_pid_file(self.stack.state_dir) or {}
        pid = record.get("services", {}).get(service, {}).get("pid")
        fault = _fault(kind, f"pid {pid}")
        if pid is None or not stacks._alive(pid):  # pylint: disable=protected-access
            fault.error = f"{service} was not running"
        else:
            os.kill(pid, signal.SIGKILL)
            _wait_gone([pid], 10)
        fault.error = fault.error or self.stack.up()
        if fault.error is None:
            fault.healed = time.monotonic() - fault.at
        return fault

    def _database(self, kind):
        fault = _fault(kind, self.cluster.url.rsplit("@", 1)[1])
        try:
            self.cluster.restart("immediate")
        except subprocess.SubprocessError as exc:
            fault.error = f"pg_ctl restart failed: {exc}"
            return fault
        deadline = fault.at + self.heal_bound
        while time.monotonic() < deadline:
            try:
                if self.stack.api.call("GET", "/vcdns").status_code == 200:
                    fault.healed = time.monotonic() - fault.at
                    return fault
            except requests.RequestException:
                pass
            time.sleep(POLL)
        return fault

    # -- the VNFs -------------------------------------------------------------------------

    def _vnf(self, kind):
        labels = self.rng.sample(sorted(self.targets), len(self.targets))
        for label in labels:  # the other vCDN if this one has no such process now
            vcdn_id = self.targets[label]
            found = self._victim(kind, vcdn_id)
            if found:
                vnf, pid, tree = found
                fault = _fault(kind, f"{label} {vnf} (pid {pid})")
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    fault.error = "it ended before the signal"
                    return fault
                watcher = threading.Thread(target=self._watch, args=(fault, vcdn_id, tree),
                                           name=f"heal {kind}", daemon=True)
                self.watchers.append(watcher)
                watcher.start()
                return fault
        fault = _fault(kind, "-")
        fault.error = "no such process in the viewers' vCDNs"
        return fault

    def _victim(self, kind, vcdn_id):
        """``(vnf name, pid to kill, pids of its tree)`` for ``kind`` in ``vcdn_id``, or None."""
        folders = sorted(self.stack.vnf_root(vcdn_id).glob("*/"))
        if kind == "kill dnsmasq":
            pid_files = [p for f in folders for p in f.glob("*.pid") if p.name != "nginx.pid"]
        else:
            role = "-lb" if kind == "kill balancer master" else "-cache-"
            pid_files = [f / "nginx.pid" for f in folders if role in f.name]
        self.rng.shuffle(pid_files)
        for pid_file in pid_files:
            try:
                master = processes.pid_in(pid_file)
            except VimError:
                continue
            if not processes.running(master):
                continue
            tree = [master, *cgroups.children(master)]
            if kind == "kill cache worker":
                workers = [pid for pid in tree[1:] if _cmdline(pid).startswith("nginx: worker")]
                if not workers:
                    continue
                return pid_file.parent.name, self.rng.choice(workers), tree
            return pid_file.parent.name, master, tree
        return None

    def _watch(self, fault, vcdn_id, tree):
        """Until RO's health of ``vcdn_id`` is whole and nothing of ``tree`` but a respawned
        worker's master runs (bounded by ``heal_bound``): then ``fault.healed``."""
        killed_master = tree[0] if fault.kind != "kill cache worker" else None
        deadline = fault.at + self.heal_bound
        while time.monotonic() < deadline:
            time.sleep(POLL)
            try:
                health = self.stack.ro.health(vcdn_id)
            except errors.CdnaasError:
                continue  # RO down, the vCDN changing, or gone
            old = [pid for pid in tree if pid != killed_master and processes.running(pid)]
            whole = killed_master is None or not old
            if health.healthy and whole:
                fault.healed = time.monotonic() - fault.at
                break
        fault.decided = self._decision_delay(fault, vcdn_id)

    def _decision_delay(self, fault, vcdn_id):
        """Seconds from ``fault`` to the IM's first heal decision on ``vcdn_id`` after it."""
        try:
            answer = self.stack.api.call("GET", f"/vcdns/{vcdn_id}/decisions",
                                         params={"kind": "heal"})
            times = [timeutil.parse(d["created_at"]) for d in answer.json()["decisions"]]
        except (requests.RequestException, ValueError, KeyError):
            return None
        after = [t for t in times if t >= fault.wall]
        return (min(after) - fault.wall).total_seconds() if after else None


def _fault(kind, target):
    return Fault(kind, target, time.monotonic(), dt.datetime.now(dt.timezone.utc))


def _wait_gone(pids, timeout):
    deadline = time.monotonic() + timeout
    while any(processes.running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)


def _cmdline(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def run_faults(faults, stop, every, failures):
    """Strike a fault every ``every`` s until ``stop``; what went wrong in this loop itself
    goes to ``failures``."""
    due = time.monotonic() + every
    while not stop.wait(max(0.0, due - time.monotonic())):
        due += every
        try:
            faults.strike()
        except Exception as exc:  # pylint: disable=broad-except  # the soak goes on
            failures.append(f"faults: {type(exc).__name__}: {exc}")
