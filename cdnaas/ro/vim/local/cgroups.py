"""CPU allocations: the vCPUs a SIG gives a VNF become a CPU quota of its processes.

cgroup v2 (``cpu.max``) where the unified hierarchy has the cpu controller,
otherwise cgroup v1 (``cpu.cfs_quota_us``). Every group lives under
``cdnaas/`` so strays are easy to find.
"""
import contextlib
import os
import signal
import time
from pathlib import Path

from cdnaas.ro.vim.base import PrerequisitesMissing

ROOT_V2 = Path("/sys/fs/cgroup")
ROOT_V1 = Path("/sys/fs/cgroup/cpu")
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
    """Make group ``name`` limited to ``vcpus`` CPUs; return its ``cgroup.procs`` path."""
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
    return str(group / "cgroup.procs")


def pids(name):
    """Process ids in group ``name`` (none if it is gone)."""
    _version, base = _hierarchy()
    with contextlib.suppress(FileNotFoundError):
        return [int(p) for p in (base / name / "cgroup.procs").read_text().split()]
    return []


def remove(name, grace=2.0):
    """Stop every process of group ``name`` (TERM, then KILL) and remove it. Gone is fine."""
    _version, base = _hierarchy()
    group = base / name
    if not group.exists():
        return
    _signal_all(pids(name), signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pids(name) and time.monotonic() < deadline:
        time.sleep(0.02)
    _signal_all(pids(name), signal.SIGKILL)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # processes still exiting
            time.sleep(0.02)
    group.rmdir()


def names():
    """Names of the groups that exist under ``cdnaas/``."""
    _version, base = _hierarchy()
    return sorted(p.name for p in base.iterdir() if p.is_dir()) if base.exists() else []


def _signal_all(process_ids, signum):
    for pid in process_ids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
