"""CPU allocations: the vCPUs a SIG gives a VNF become a CPU quota of its processes.

cgroup v2 (``cpu.max``) where the unified hierarchy has the cpu controller,
otherwise cgroup v1 (``cpu.cfs_quota_us``). Every group lives under
``cdnaas/`` so strays are easy to find.

CPU time used (:func:`cpu_usage_seconds`) comes from ``cpu.stat`` on v2 and
``cpuacct.usage`` on v1. Where v1 mounts ``cpuacct`` apart from ``cpu``, a
group has a twin of the same name in the ``cpuacct`` hierarchy, which its
processes join when first read.

Placement: where the operator maps hosts to CPU sets of this machine
(:func:`host_cpus`, ``CDNAAS_LOCAL_HOST_CPUS``), a VNF's group is also pinned to its
planned host's CPUs: v2 ``cpuset.cpus`` of the group itself (the ``cpuset``
controller enabled in the parents' ``cgroup.subtree_control``), v1 a twin of the
same name in the ``cpuset`` hierarchy with ``cpuset.cpus`` and ``cpuset.mems``
(a new v1 cpuset starts empty and takes no process until both are set). A VNF whose
host maps to no CPU set runs unpinned, as every VNF did before.
"""
import contextlib
import os
import signal
import time
from pathlib import Path

from cdnaas.ro.vim.base import PrerequisitesMissing, VimError

ROOT_V2 = Path("/sys/fs/cgroup")
ROOT_V1 = Path("/sys/fs/cgroup/cpu")
ROOT_V1_ACCOUNTING = Path("/sys/fs/cgroup/cpuacct")
ROOT_V1_CPUSET = Path("/sys/fs/cgroup/cpuset")
PERIOD_US = 100_000


def _hierarchy():
    controllers = ROOT_V2 / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        return "v2", ROOT_V2 / "cdnaas"
    if (ROOT_V1 / "cpu.cfs_quota_us").exists():
        return "v1", ROOT_V1 / "cdnaas"
    raise PrerequisitesMissing("no cgroup cpu controller (v2 cpu.max or v1 cpu.cfs_quota_us) "
                               "is mounted under /sys/fs/cgroup")


def check():
    """Raise :class:`PrerequisitesMissing` unless CPU groups can be made here."""
    version, base = _hierarchy()
    try:
        _ensure_base(version, base)
    except OSError as exc:
        raise PrerequisitesMissing(f"cannot create cgroups under {base}: {exc}") from exc
    if not Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists():
        raise PrerequisitesMissing("this kernel does not list a process's children "
                                   "(/proc/<pid>/task/<tid>/children, CONFIG_PROC_CHILDREN), "
                                   "which VNF processes need to join their CPU group")


def _ensure_base(version, base):
    base.mkdir(exist_ok=True)
    if version == "v2":
        subtree = base.parent / "cgroup.subtree_control"
        if "cpu" not in subtree.read_text().split():
            subtree.write_text("+cpu")
        own = base / "cgroup.subtree_control"
        if "cpu" not in own.read_text().split():
            own.write_text("+cpu")


def create(name, vcpus, cpus=None):
    """Make group ``name`` limited to ``vcpus`` CPUs, pinned to the CPU list ``cpus``
    (kernel syntax, ``0-1,4``; None: unpinned).

    :raises VimError: ``cpus`` cannot be pinned here (no cpuset controller, CPUs this
        machine does not have or has offline).
    """
    version, base = _hierarchy()
    _ensure_base(version, base)
    group = base / name
    group.mkdir(exist_ok=True)
    quota = vcpus * PERIOD_US
    if version == "v2":
        (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
    else:
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(quota))
    if cpus:
        _pin(version, base, name, cpus)


def host_cpus(host):
    """The CPU list (kernel syntax) of this machine that ``host`` stands for, or None.

    ``CDNAAS_LOCAL_HOST_CPUS`` (``eu-1=0;eu-2=1-3,6``), else the hosts of the ``local``
    power driver (``CDNAAS_POWER_LOCAL_CPUS``, ``eu-1=0,eu-2=1-3,6``): with either set,
    the CPUs a power action takes offline are the ones the host's VNFs run on.

    :raises VimError: the setting is not ``host=CPUs`` items.
    """
    if host is None:
        return None
    return cpu_map().get(host)


def cpu_map():
    """``{host: CPU list}`` of the operator's host to CPU set mapping (see :func:`host_cpus`),
    the one map both the pinning and the ``local`` power driver read. Hosts are separated
    by ``;`` or ``,``; a part without ``=`` adds to the host before it, so
    ``eu-1=0-1,4,eu-2=5`` and ``eu-1=0-1,4;eu-2=5`` say the same.

    :raises VimError: the setting is not ``host=CPUs`` items.
    """
    from cdnaas.common import config
    name, raw = "CDNAAS_LOCAL_HOST_CPUS", config.setting("CDNAAS_LOCAL_HOST_CPUS")
    if not raw:
        name = "CDNAAS_POWER_LOCAL_CPUS"
        raw = ",".join(config.setting("CDNAAS_POWER_LOCAL_CPUS"))
    parts, host = {}, None
    for token in filter(None, (t.strip() for t in raw.replace(";", ",").split(","))):
        if "=" in token:
            host, _, cpus = (part.strip() for part in token.partition("="))
            parts[host] = [cpus]
        elif host is None:
            raise VimError(f"{name} item {token!r} is not host=CPUs (like eu-1=0-1,4)")
        else:
            parts[host].append(token)
    found = {}
    for host, cpus in parts.items():
        text = ",".join(cpus).replace(" ", "")
        if not host or parse_cpu_list(text) is None:
            raise VimError(f"{name} item {host}={text!r} is not host=CPUs (like eu-1=0-1,4)")
        found[host] = text
    return found


def parse_cpu_list(text):
    """CPUs of a kernel CPU list (``0-1,4``) as a set, or None if ``text`` is not one."""
    cpus = set()
    for part in text.replace(" ", "").split(","):
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()) or int(last or first) < int(first):
            return None
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus or None


def _cpuset_base(version, base, create=True):
    """Where the CPU sets of groups live (v2: the groups themselves; v1: ``cdnaas/`` of
    the cpuset hierarchy), or None when no cpuset controller is there."""
    if version == "v2":
        if "cpuset" not in (ROOT_V2 / "cgroup.controllers").read_text().split():
            return None
        if create:
            for subtree in (base.parent / "cgroup.subtree_control",
                            base / "cgroup.subtree_control"):
                if "cpuset" not in subtree.read_text().split():
                    subtree.write_text("+cpuset")
        return base
    if not (ROOT_V1_CPUSET / "cpuset.cpus").exists():
        return None
    twin = ROOT_V1_CPUSET / "cdnaas"
    if create:
        twin.mkdir(exist_ok=True)
        _inherit_cpuset(twin)
    return twin


def _inherit_cpuset(group):
    """A new v1 cpuset is empty: give it its parent's CPUs and memory nodes."""
    for item in ("cpuset.mems", "cpuset.cpus"):
        if not (group / item).read_text().strip():
            (group / item).write_text((group.parent / item).read_text().strip())


def _pin(version, base, name, cpus):
    cpuset = _cpuset_base(version, base)
    if cpuset is None:
        raise VimError(f"cannot pin {name} to CPUs {cpus}: no cpuset controller under "
                       f"{ROOT_V2 if version == 'v2' else ROOT_V1_CPUSET}")
    group = cpuset / name
    group.mkdir(exist_ok=True)
    try:
        if version == "v1":
            _inherit_cpuset(group)
        (group / "cpuset.cpus").write_text(cpus)
    except OSError as exc:
        usable = next((f.read_text().strip() for f in (cpuset / "cpuset.effective_cpus",
                                                       cpuset / "cpuset.cpus.effective")
                       if f.exists()), "?")
        raise VimError(f"cannot pin {name} to CPUs {cpus} (VNFs may use CPUs {usable} of "
                       f"this machine; an offline CPU takes no process): {exc}") from None


def pinned_cpus(name):
    """CPUs (a set) group ``name`` is pinned to, or None when it runs unpinned."""
    version, base = _hierarchy()
    cpuset = _cpuset_base(version, base, create=False)
    if cpuset is None:
        return None
    with contextlib.suppress(FileNotFoundError):
        text = (cpuset / name / "cpuset.cpus").read_text().strip()
        if version == "v1" and text == (cpuset / "cpuset.cpus").read_text().strip():
            return None  # a twin with all its parent's CPUs: not pinned
        return parse_cpu_list(text) if text else None
    return None


def _procs_files(version, base, name):
    """The ``cgroup.procs`` a process of group ``name`` joins (v1: its cpuset twin's too)."""
    files = [base / name / "cgroup.procs"]
    if version == "v1":
        twin = _cpuset_base(version, base, create=False)
        if twin is not None and (twin / name).is_dir():
            files.append(twin / name / "cgroup.procs")
    return files


def adopt(name, pid):
    """Move process ``pid`` and every process it has forked into group ``name``.

    A parent moves before its children are listed, so a child it forks meanwhile
    is born inside the group; a child that exits meanwhile is skipped.

    :raises VimError: ``pid`` itself is gone.
    """
    version, base = _hierarchy()
    files = _procs_files(version, base, name)
    try:
        for procs in files:
            procs.write_text(str(pid))
    except ProcessLookupError:
        raise VimError(f"process {pid} exited before it could join its CPU group") from None
    pending = children(pid)
    while pending:
        child = pending.pop()
        with contextlib.suppress(ProcessLookupError):
            for procs in files:
                procs.write_text(str(child))
            pending += children(child)


def children(pid):
    """Process ids of ``pid``'s children, from every thread of it (none once it is gone)."""
    found = []
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                found += [int(c) for c in (task / "children").read_text().split()]
    return found


def pids(name):
    """Process ids in group ``name`` (none if it is gone)."""
    _version, base = _hierarchy()
    with contextlib.suppress(FileNotFoundError):
        return [int(p) for p in (base / name / "cgroup.procs").read_text().split()]
    return []


def cpu_usage_seconds(name):
    """CPU time the processes of group ``name`` have used, in seconds; None if it is gone.

    Where ``cpuacct`` is a hierarchy of its own, the group's processes are first
    moved into its accounting twin (children they fork later follow), so time
    used before the first reading is not counted: read once early, then
    take differences.
    """
    version, base = _hierarchy()
    group = base / name
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        if version == "v2":
            fields = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
            return int(fields["usage_usec"]) / 1e6
        if (group / "cpuacct.usage").exists():  # cpu and cpuacct mounted together
            return int((group / "cpuacct.usage").read_text()) / 1e9
        twin = _accounting_twin(name)
        if twin is None or not group.exists():
            return None
        twin.mkdir(parents=True, exist_ok=True)
        joined = set((twin / "cgroup.procs").read_text().split())
        for pid in (group / "cgroup.procs").read_text().split():
            if pid not in joined:
                with contextlib.suppress(ProcessLookupError):
                    (twin / "cgroup.procs").write_text(pid)
        return int((twin / "cpuacct.usage").read_text()) / 1e9
    return None


def _accounting_twin(name):
    """The group's twin in a separate v1 ``cpuacct`` hierarchy, or None when there is none."""
    if not (ROOT_V1_ACCOUNTING / "cpuacct.usage").exists():
        return None
    return ROOT_V1_ACCOUNTING / "cdnaas" / name


def remove(*names, grace=2.0):
    """Stop every process of the groups ``names`` (TERM, then KILL after ``grace`` s)
    and remove the groups. They stop together, not one after another. Gone is fine."""
    version, base = _hierarchy()
    present = [name for name in names if (base / name).exists()]
    for name in present:
        _signal_all(pids(name), signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(pids(name) for name in present) and time.monotonic() < deadline:
        time.sleep(0.02)
    for name in present:
        _signal_all(pids(name), signal.SIGKILL)
    for name in present:
        _rmdir(base / name, grace)
    cpuset = _cpuset_base(version, base, create=False) if version == "v1" else None
    for name in names if version == "v1" else ():
        twin = _accounting_twin(name)
        if twin is not None:
            _rmdir(twin, grace)  # its processes were the group's
        if cpuset is not None:
            _rmdir(cpuset / name, grace)


def _rmdir(group, grace):
    """Remove an empty group, waiting up to ``grace`` s for exiting processes to leave it."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # processes still exiting
            time.sleep(0.02)
    with contextlib.suppress(FileNotFoundError):
        group.rmdir()


def names():
    """Names of the groups that exist under ``cdnaas/`` (v1: or of its cpuset twins)."""
    version, base = _hierarchy()
    found = {p.name for p in base.iterdir() if p.is_dir()} if base.exists() else set()
    cpuset = _cpuset_base(version, base, create=False) if version == "v1" else None
    if cpuset is not None and cpuset.exists():
        found |= {p.name for p in cpuset.iterdir() if p.is_dir()}
    return sorted(found)


def _signal_all(process_ids, signum):
    for pid in process_ids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
