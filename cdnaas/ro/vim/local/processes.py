"""Starting, reloading and probing the VNF daemons (nginx, dnsmasq) in their namespaces.

A daemon is started from a thread that entered the VNF's namespace (no shell,
no ``nsenter``) and forks into the background; once it answers, its processes
join the VNF's CPU group (:func:`cdnaas.ro.vim.local.cgroups.adopt`). nginx is
probed on its management listener (:data:`cdnaas.vnf.endpoints.MANAGEMENT_PORT`),
which answers only the bridge gateway this (root) namespace reaches the VNFs from
(:mod:`cdnaas.ro.vim.management`).

nginx starts with the limits its configuration is sized for (:func:`start_nginx`):
its namespace's listen queue (``net.core.somaxconn``) and its process's open-file
limit (RLIMIT_NOFILE, which its workers raise further with ``worker_rlimit_nofile``).
"""
import contextlib
import functools
import logging
import os
import resource
import signal
import time

from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.local import cgroups, netns
from cdnaas.ro.vim.local.system import run
from cdnaas.vnf.sizing import host_limits

LOG = logging.getLogger(__name__)


def start_daemon(namespace, command):
    """Start ``command``, a server that forks into the background, in ``namespace``.

    :raises VimError: with the server's own words when it refuses to start (nginx
        and dnsmasq check their configuration as they start and run nothing on one
        they reject).
    """
    run(command, namespace=namespace)


def nginx_command(prefix, conf, *extra):
    return ["nginx", "-p", f"{prefix}/", "-c", conf, *extra]


def start_nginx(namespace, prefix, conf):
    """Start nginx on ``conf`` in ``namespace`` with the limits the config asks for
    (:func:`tune_for_nginx`), its process's open-file limit raised to match (``prlimit``;
    at most :func:`open_file_limit`, which stays its hard limit so that a reload planned
    for more connections can raise it further).

    :raises VimError: as :func:`start_daemon`.
    """
    files = min(tune_for_nginx(namespace, conf), open_file_limit())
    start_daemon(namespace, ["prlimit", f"--nofile={files}:{open_file_limit()}",
                             *nginx_command(prefix, conf)])


@functools.cache
def open_file_limit():
    """The most open files a VNF process started here may have: the kernel's ceiling
    (``fs.nr_open``) when this process may raise its hard limit (CAP_SYS_RESOURCE, as
    root on a host), else its own hard limit (a container's root often may not). Read
    once: neither changes while this process runs."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        with open("/proc/sys/fs/nr_open", encoding="ascii") as handle:
            ceiling = int(handle.read())
    except (OSError, ValueError):
        ceiling = 1 << 20
    if hard == resource.RLIM_INFINITY or _may_raise_limits():
        return ceiling
    return min(hard, ceiling)


def _may_raise_limits():
    cap_sys_resource = 24
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> cap_sys_resource & 1)
    except (OSError, ValueError):
        pass
    return False


def tune_for_nginx(namespace, conf):
    """Raise ``namespace``'s listen queue limits to the largest ``backlog=`` of ``conf``
    (never lowering them), let a closing listener hand its queued and half-open
    connections to another of its reuseport group (a master started beside the workers of
    a killed one, which then end); return
    the open-file limit its ``worker_rlimit_nofile`` asks."""
    with open(conf, encoding="utf-8") as handle:
        wanted = host_limits(handle.read())
    backlog = wanted["somaxconn"]
    netns.raise_sysctls(namespace, {"net.core.somaxconn": backlog,
                                  "net.ipv4.tcp_max_syn_backlog": backlog,
                                  "net.ipv4.tcp_migrate_req": 1})
    return wanted["nofile"]


def reload_nginx(namespace, prefix, conf, group, timeout=10.0, settle=False):
    """Put the nginx VNF under ``prefix``, whose processes are in CPU group ``group``, on
    ``conf`` (its limits applied first, as when it started) losing no connection.

    Its master reloads gracefully: old workers finish their connections, new ones use the
    new config. Where its master is gone (killed: its workers serve on alone), a new one
    starts beside them (:func:`_start_beside`). Either way nginx processes of ``group``
    outside the master's tree (workers of a master gone, orphans) then end gracefully
    (:func:`quit_gracefully`): each closes its listeners, answers what it has begun and
    closes its idle kept-alive connections, and what the kernel had queued on their
    listeners moves to the new workers' (``net.ipv4.tcp_migrate_req``,
    :func:`tune_for_nginx`).

    Returns once the master has started workers on the new config and any orphans have
    ended; with ``settle``, once the old workers of a reload have also ended (at most
    ``timeout`` s more: one still sending a long response is left to finish), so no
    request is served on the old config afterwards, not even on a kept-alive connection
    an old worker held.

    :raises VimError: the master started no new worker within ``timeout`` s (it kept
        the old config: its error log says why), or a new master did not come up.
    """
    tune_for_nginx(namespace, conf)
    master = live_master(prefix)
    workers = set(cgroups.children(master)) if master else set()
    orphans = [pid for pid in cgroups.pids(group) if pid != master and pid not in workers
               and program(pid) == "nginx"]
    if master is None:
        _start_beside(namespace, prefix, conf, group, timeout)
    else:
        if master not in cgroups.pids(group):
            cgroups.adopt(group, master)
        run(nginx_command(prefix, conf, "-s", "reload"), namespace=namespace)
        wait_until(lambda: bool(set(cgroups.children(master)) - workers),
                   f"nginx in {namespace} on its new configuration", timeout)
    if orphans:
        killed = quit_gracefully(orphans, timeout)
        LOG.info("nginx in %s: %d processes outside its master's tree ended, %d of them "
                 "killed for not ending gracefully", namespace, len(orphans), killed)
    if settle and master is not None:
        try:
            wait_until(lambda: not set(cgroups.children(master)) & workers,
                       f"the end of nginx's old workers in {namespace}", timeout)
        except VimError:
            LOG.info("old nginx workers in %s still serve after %.0f s", namespace, timeout)


def live_master(prefix):
    """The running nginx master named by ``prefix``'s ``nginx.pid``, or None: the file
    names none, or a process that is gone (a killed master's id may be another
    program's by now)."""
    try:
        pid = pid_in(f"{prefix}/nginx.pid")
    except VimError:
        return None
    return pid if running(pid) and program(pid) == "nginx" else None


def _start_beside(namespace, prefix, conf, group, timeout):
    """Start a new nginx master on ``conf`` beside the workers of the one gone (its
    listeners take SO_REUSEPORT, so both accept); return once it has workers, in
    ``group``."""
    LOG.info("nginx in %s has no master: starting one beside its workers", namespace)
    with contextlib.suppress(FileNotFoundError):  # the gone master's: its id may come again
        os.unlink(f"{prefix}/nginx.pid")
    start_nginx(namespace, prefix, conf)

    def new_master():
        """The new master once it has its workers, else None."""
        pid = live_master(prefix)
        return pid if pid is not None and cgroups.children(pid) else None
    wait_until(new_master, f"the new nginx master in {namespace}", timeout)
    cgroups.adopt(group, new_master())


def quit_gracefully(pids, timeout=10.0):
    """Ask the nginx processes ``pids`` to end gracefully (SIGQUIT: a worker stops
    accepting, closes its idle connections and ends once its requests are answered); kill
    those still running after ``timeout`` seconds. Returns how many had to be killed."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGQUIT)
    try:
        wait_until(lambda: not any(running(pid) for pid in pids), "graceful ends", timeout)
        return 0
    except VimError:
        left = [pid for pid in pids if running(pid)]
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(left)


def stop(pid, timeout=5.0):
    """Stop the daemon ``pid`` (SIGTERM) and wait until it has exited; one already gone is
    stopped. :raises VimError: it still runs after ``timeout`` seconds."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    wait_until(lambda: not running(pid), f"the exit of process {pid}", timeout)


def running(pid):
    """Whether ``pid`` runs (a zombie nobody reaped yet has exited)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def program(pid):
    """The program name of process ``pid`` (``/proc/<pid>/comm``), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def pid_in(pid_file):
    """The process id a daemon wrote to ``pid_file``.

    :raises VimError: the file is missing or holds no process id.
    """
    try:
        return int(open(pid_file, encoding="ascii").read().split()[0])
    except (OSError, ValueError, IndexError) as exc:
        raise VimError(f"no process id in {pid_file}: {exc}") from exc


def wait_until(check, what, timeout=10.0):
    """Poll ``check()`` until true; raise :class:`VimError` naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while not check():
        if time.monotonic() > deadline:
            raise VimError(f"{what} did not come up within {timeout:.0f} s")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
