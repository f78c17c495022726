"""``local``: a host is a set of this machine's CPUs, taken offline where the kernel allows.

Hosts map to CPUs as the local driver pins them (:func:`cdnaas.ro.vim.local.cgroups.cpu_map`:
``CDNAAS_LOCAL_HOST_CPUS``, else ``CDNAAS_POWER_LOCAL_CPUS``, ``eu-1=2-3,6,eu-2=4``); a
host not listed, or a CPU that cannot go offline, is *recorded* only (``applied`` false):

- ``cpu0`` never goes offline (the boot CPU; many kernels refuse it anyway);
- a CPU without ``/sys/devices/system/cpu/cpuN/online`` (no hotplug), or whose file
  the kernel refuses to write (a container's read-only sysfs), stays as it is;
- a CPU in use stays online: one a VNF's CPU group is pinned to
  (:func:`cdnaas.ro.vim.local.cgroups.pinned_cpus`, v2 or v1), or the last CPU online.

RO calls it only for a host that carries no VNF of any deployment. Powering on
writes ``1`` back to every CPU it took offline (and to every CPU of the host that
is offline, so a restart of RO loses nothing).
"""
import logging
import threading
from pathlib import Path

from cdnaas.ro.power.base import OFF, ON, UNKNOWN, HostPowerDriver, PowerResult
from cdnaas.ro.vim.local import cgroups

LOG = logging.getLogger(__name__)
SYSFS = Path("/sys/devices/system/cpu")


class LocalPowerDriver(HostPowerDriver):
    """CPU hotplug of this machine (see the module docstring)."""

    name = "local"

    def __init__(self, sysfs=SYSFS, in_use=None):
        """:param in_use: CPUs VNFs are pinned to now (default: read from their CPU groups)."""
        self.sysfs = Path(sysfs)
        self._in_use = in_use or _pinned_by_vnfs
        self._states = {}
        self._lock = threading.Lock()

    @staticmethod
    def _cpus(host):
        """CPUs of ``host`` (:func:`cdnaas.ro.vim.local.cgroups.host_cpus`), in order."""
        return sorted(cgroups.parse_cpu_list(cgroups.host_cpus(host) or "") or ())

    def _online(self, cpu):
        path = self.sysfs / f"cpu{cpu}" / "online"
        return path.read_text().strip() == "1" if path.exists() else True  # no hotplug

    def _all_cpus(self):
        return sorted(int(p.name[3:]) for p in self.sysfs.glob("cpu[0-9]*") if p.name[3:].isdigit())

    def _write(self, cpu, value):
        path = self.sysfs / f"cpu{cpu}" / "online"
        try:
            path.write_text(value)
            return True
        except OSError as exc:
            LOG.info("cpu%d: the kernel refused online=%s (%s)", cpu, value, exc)
            return False

    def power_off(self, host, reason=""):
        cpus, steps, changed = self._cpus(host), [], 0
        if not cpus:
            steps.append(f"{host} maps to no CPU of this machine "
                         "(CDNAAS_LOCAL_HOST_CPUS or CDNAAS_POWER_LOCAL_CPUS): recorded")
        used = self._in_use()
        online = [c for c in self._all_cpus() if self._online(c)]
        for cpu in cpus:
            path = self.sysfs / f"cpu{cpu}" / "online"
            if cpu == 0:
                steps.append("cpu0 stays online (the boot CPU)")
            elif not path.exists():
                steps.append(f"cpu{cpu} cannot go offline here (no hotplug): recorded")
            elif not self._online(cpu):
                steps.append(f"cpu{cpu} already offline")
                changed += 1
            elif cpu in used:
                steps.append(f"cpu{cpu} is in a VNF's CPU set: stays online")
            elif len(online) <= 1:
                steps.append(f"cpu{cpu} is the last CPU online: stays online")
            elif self._write(cpu, "0"):
                online.remove(cpu)
                steps.append(f"cpu{cpu} taken offline")
                changed += 1
            else:
                steps.append(f"cpu{cpu}: the kernel refused to take it offline: recorded")
        with self._lock:
            self._states[host] = OFF
        return PowerResult(host=host, state=OFF, applied=bool(changed), steps=steps)

    def power_on(self, host, reason=""):
        cpus, steps, refused = self._cpus(host), [], False
        for cpu in cpus:
            path = self.sysfs / f"cpu{cpu}" / "online"
            if cpu == 0 or not path.exists() or self._online(cpu):
                continue
            if self._write(cpu, "1"):
                steps.append(f"cpu{cpu} back online")
            else:
                refused = True
                steps.append(f"cpu{cpu}: the kernel refused to bring it online")
        with self._lock:
            self._states[host] = ON
        if not cpus:
            steps.append(f"{host} maps to no CPU of this machine: recorded")
        return PowerResult(host=host, state=ON, applied=bool(cpus) and not refused,
                           steps=steps or [f"every CPU of {host} is online"])

    def state(self, host):
        cpus = [c for c in self._cpus(host) if (self.sysfs / f"cpu{c}" / "online").exists()]
        if cpus:
            return ON if any(self._online(c) for c in cpus) else OFF
        with self._lock:
            return self._states.get(host, UNKNOWN)


def _pinned_by_vnfs():
    """CPUs some VNF's CPU group is pinned to (cgroup v2 or v1)."""
    return set().union(*(cgroups.pinned_cpus(name) or set() for name in cgroups.names()))
