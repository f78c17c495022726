"""What the benchmarks read of this machine's processes from /proc: CPU time, parent,
memory."""
import os
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid):
    """The fields of ``/proc/<pid>/stat`` after the command name (state first); None once
    the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def cpu_seconds(pid, children=False):
    """CPU seconds (user + system) process ``pid`` used so far, with ``children`` also its
    reaped children's (a PostgreSQL server's ended backends); None once it is gone."""
    fields = _stat(pid)
    if fields is None:
        return None
    used = int(fields[11]) + int(fields[12])
    if children:
        used += int(fields[13]) + int(fields[14])
    return used / TICKS


def parent(pid):
    """The parent of process ``pid`` (None once it is gone)."""
    fields = _stat(pid)
    return None if fields is None else int(fields[1])


def memory_bytes(pid, field="VmRSS"):
    """Process ``pid``'s ``field`` of ``/proc/<pid>/status`` (``VmRSS``: resident,
    ``VmHWM``: its peak) in bytes; 0 when it has none."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    return 0
