"""Entering a VNF's network namespace from a thread of this process.

``setns(2)`` moves only the calling thread, and a process that thread starts is
born in the thread's namespace. A worker thread can so enter a VNF's namespace,
start the VNF's tools there and come back, while the other threads stay where
they are: no ``nsenter`` or shell per command. Octavia's amphora agent enters
its namespace the same way (``NetworkNamespace``).
"""
import contextlib
import ctypes
import logging
import os

from cdnaas.ro.vim.base import VimError

LOG = logging.getLogger(__name__)
CLONE_NEWNET = 0x40000000
NETNS_DIR = "/run/netns"

_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd):
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


@contextlib.contextmanager
def entered(namespace):
    """Run the ``with`` body in network namespace ``namespace`` (this thread only).

    Sockets opened and processes started in the body belong to ``namespace``;
    the thread is back in its own namespace afterwards, also on an error.

    :raises VimError: ``namespace`` does not exist or cannot be entered.
    """
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        try:
            target = os.open(f"{NETNS_DIR}/{namespace}", os.O_RDONLY)
        except FileNotFoundError:
            raise VimError(f"network namespace {namespace} does not exist") from None
        try:
            _setns(target)
        except OSError as exc:
            raise VimError(f"cannot enter network namespace {namespace}: {exc}") from exc
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)


#: Kernel settings a VNF's namespace may tune: per network namespace (the host keeps its own).
#: ``tcp_migrate_req``: the connections a closed listener had queued or half-open move to
#: another listener of its SO_REUSEPORT group instead of being reset (Linux 5.14).
SYSCTLS = ("net.core.somaxconn", "net.ipv4.tcp_max_syn_backlog", "net.ipv4.tcp_migrate_req")


def raise_sysctls(namespace, values):
    """Raise the settings ``values`` ({name: int}, names of :data:`SYSCTLS`) of
    ``namespace`` to at least those values (a larger one stays).

    ``/proc/sys/net`` shows the opening thread's namespace, so this thread writes them
    from inside; a value the kernel refuses is logged and skipped (the VNF still runs,
    with the kernel's default).

    :raises VimError: a name is not one of :data:`SYSCTLS`, or ``namespace`` is gone.
    """
    for name in values:
        if name not in SYSCTLS:
            raise VimError(f"{name} is not a per-namespace setting this driver tunes")
    with entered(namespace):
        for name, value in values.items():
            path = "/proc/sys/" + name.replace(".", "/")
            try:
                with open(path, "r+", encoding="ascii") as handle:
                    if int(handle.read().split()[0]) < int(value):
                        handle.seek(0)
                        handle.write(str(int(value)))
            except OSError as exc:
                LOG.warning("%s cannot be set to %s in %s: %s", name, value, namespace, exc)


#: the state column of ``/proc/net/tcp`` for an established connection
TCP_ESTABLISHED = "01"


def established(namespace, ports):
    """How many TCP connections are established in ``namespace`` on a local port of
    ``ports``: the kernel's count (``/proc/net/tcp`` and ``tcp6``, which show the reading
    thread's namespace), which no process's death leaves wrong, unlike nginx's
    ``stub_status`` figures (a worker killed never takes its connections off them).

    :raises VimError: ``namespace`` is gone.
    """
    count = 0
    with entered(namespace):
        for table in ("tcp", "tcp6"):
            try:
                with open(f"/proc/thread-self/net/{table}", encoding="ascii") as handle:
                    rows = handle.read().splitlines()[1:]
            except FileNotFoundError:  # no IPv6 in this kernel
                continue
            for row in rows:
                _slot, local, _remote, state = row.split(maxsplit=4)[:4]
                count += state == TCP_ESTABLISHED and int(local.rsplit(":", 1)[1], 16) in ports
    return count
