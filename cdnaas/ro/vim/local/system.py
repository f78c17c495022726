"""Running the system tools the local driver is made of (ip, nginx, dnsmasq, nft)."""
import contextlib
import logging
import subprocess

from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.local import netns

LOG = logging.getLogger(__name__)


def run(command, input_text=None, check=True, timeout=30, binary=False, namespace=None):
    """Run ``command``; return its stdout (bytes when ``binary``).

    :param namespace: network namespace to run it in (the calling thread enters
        it to start the command, see :mod:`~cdnaas.ro.vim.local.netns`).
    :raises VimError: the command failed (with its stderr) while ``check`` is set.
    """
    inside = netns.entered(namespace) if namespace else contextlib.nullcontext()
    try:
        with inside:
            done = subprocess.run(command, input=input_text, capture_output=True,
                                  text=not binary, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise VimError(f"{command[0]} could not run: {exc}") from exc
    if check and done.returncode != 0:
        stderr = done.stderr if isinstance(done.stderr, str) else done.stderr.decode(errors="replace")
        raise VimError(f"{' '.join(command[:6])} failed: {stderr.strip()}")
    return done.stdout


def ip_batch(lines, namespace=None, check=True):
    """Run many ``ip`` commands in one process (``ip [-n NS] -batch -``).

    :param check: stop at the first command that fails and raise; when false,
        run every command (``-force``) and ignore failures.
    """
    if not lines:
        return
    command = (["ip"] + (["-n", namespace] if namespace else []) + ([] if check else ["-force"])
               + ["-batch", "-"])
    run(command, input_text="\n".join(lines) + "\n", check=check)
