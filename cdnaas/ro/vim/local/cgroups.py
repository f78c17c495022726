"""CPU allocations: the vCPUs a SIG gives a VNF become a CPU quota of its processes.

cgroup v2 (``cpu.max``) where the unified hierarchy has the cpu controller,
otherwise cgroup v1 (``cpu.cfs_quota_us``). Every group lives under
``cdnaas/`` so strays are easy to find.

CPU time used (:func:`cpu_usage_seconds`) comes from ``cpu.stat`` on v2 and
``cpuacct.usage`` on v1. Where v1 mounts ``cpuacct`` apart from ``cpu``, a
group has a twin of the same name in the ``cpuacct`` hierarchy, which its
processes join when first read.
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


def create(name, vcpus):
    """Make group ``name`` limited to ``vcpus`` CPUs."""
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


def adopt(name, pid):
    """Move process ``pid`` and every process it has forked into group ``name``.

    A parent moves before its children are listed, so a child it forks meanwhile
    is born inside the group; a child that exits meanwhile is skipped.

    :raises VimError: ``pid`` itself is gone.
    """
    _version, base = _hierarchy()
    procs = base / name / "cgroup.procs"
    try:
        procs.write_text(str(pid))
    except ProcessLookupError:
        raise VimError(f"process {pid} exited before it could join its CPU group") from None
    pending = _children(pid)
    while pending:
        child = pending.pop()
        with contextlib.suppress(ProcessLookupError):
            procs.write_text(str(child))
            pending += _children(child)


def _children(pid):
    children = []
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                children += [int(c) for c in (task / "children").read_text().split()]
    return children


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
    for name in names if version == "v1" else ():
        twin = _accounting_twin(name)
        if twin is not None:
            _rmdir(twin, grace)  # its processes were the group's


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
    """Names of the groups that exist under ``cdnaas/``."""
    _version, base = _hierarchy()
    return sorted(p.name for p in base.iterdir() if p.is_dir()) if base.exists() else []


def _signal_all(process_ids, signum):
    for pid in process_ids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
