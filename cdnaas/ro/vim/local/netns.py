"""Entering a VNF's network namespace from a thread of this process.

``setns(2)`` moves only the calling thread, and a process that thread starts is
born in the thread's namespace. A worker thread can so enter a VNF's namespace,
start the VNF's tools there and come back, while the other threads stay where
they are: no ``nsenter`` or shell per command. Octavia's amphora agent enters
its namespace the same way (``NetworkNamespace``).
"""
import contextlib
import ctypes
import os

from cdnaas.ro.vim.base import VimError

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
