"""Run the five services as separate local processes (``cdnaas up`` and the tests).

A :class:`Stack` migrates the databases, starts ``cdnaas-<service>`` for every
service with one environment (each binds to the host and port of its
``CDNAAS_<SERVICE>_URL``), logs each to ``<state_dir>/logs/<service>.log`` and
waits until every ``GET /healthz`` answers. With RO and the ``local`` zone
publisher, it first starts the operator zone's server (:func:`start_zone_server`,
process ``zone``), which RO publishes each vCDN's delegation to. It records the process ids in
``<state_dir>/cdnaas.pids`` so that ``cdnaas down`` from another shell can stop
them (:func:`stop_recorded`).
"""
import contextlib
import ctypes
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import requests

from cdnaas.common import config, settings
from cdnaas.common.ports import free_loopback_ports

LOG = logging.getLogger(__name__)

PID_FILE = "cdnaas.pids"
LOG_TAIL_LINES = 40


class StackError(RuntimeError):
    """The stack could not be started (the message carries the relevant log tail)."""


# -- environment ------------------------------------------------------------------------------

def child_environment(env=None):
    """``os.environ`` overlaid with ``env``; a ``None`` value removes the variable."""
    merged = dict(os.environ)
    for name, value in (env or {}).items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = str(value)
    return merged


def urls_of(env):
    """Base URL of every service as the environment ``env`` describes them."""
    return {svc: (env.get(f"CDNAAS_{svc.upper()}_URL") or
                  f"http://127.0.0.1:{config.DEFAULT_PORTS[svc]}").rstrip("/")
            for svc in config.SERVICES}


def database_url_of(env, service):
    """The database URL ``service`` uses under ``env`` (mirrors :func:`config.database_url`)."""
    shared = env.get("CDNAAS_DATABASE_URL")
    if shared:
        return shared
    state = Path(env.get("CDNAAS_STATE_DIR") or config.state_dir())
    return f"sqlite:///{state / f'{service}.db'}"


def free_port_env(state_dir):
    """Variables for a stack of its own: ``CDNAAS_STATE_DIR`` and five free loopback ports.

    Lets tests run in parallel with each other and with a user's ``cdnaas up``.
    The bind addresses are set too, so a ``CDNAAS_<SERVICE>_BIND`` inherited from
    the caller's environment cannot send a service elsewhere.
    """
    ports = free_loopback_ports(len(config.SERVICES) + 1)
    env = {"CDNAAS_STATE_DIR": str(state_dir), "CDNAAS_LOCAL_ZONE_PORT": str(ports.pop())}
    for svc, port in zip(config.SERVICES, ports):
        env[f"CDNAAS_{svc.upper()}_URL"] = f"http://127.0.0.1:{port}"
        env[f"CDNAAS_{svc.upper()}_BIND"] = f"127.0.0.1:{port}"
    return env


# -- the operator zone's local server ---------------------------------------------------------

#: the name of the zone server's process in a stack (pid file, logs)
ZONE_SERVER = "zone"


def serves_zone(env, services):
    """Whether a stack of ``services`` under ``env`` runs the operator zone's server:
    RO is among them and publishes with the ``local`` publisher."""
    return "ro" in services and settings.get("CDNAAS_ZONE_PUBLISHER", env) == "local"


def zone_address(env):
    """The zone server's address in a stack's pid file (``dns://127.0.0.1:<port>``)."""
    return f"dns://127.0.0.1:{settings.get('CDNAAS_LOCAL_ZONE_PORT', env)}"


def start_zone_server(env, log_path, timeout=15.0, detach=False):
    """Start the operator zone's Knot DNS server (:mod:`cdnaas.ro.zones.knot`) under
    ``env`` (a whole environment: its state dir and settings), logging to
    ``log_path``; return its :class:`subprocess.Popen` once it answers for the zone.

    :raises StackError: it exited or did not answer within ``timeout`` (it is stopped).
    """
    from cdnaas.ro.zones import knot  # pylint: disable=import-outside-toplevel

    if _port_open(zone_address(env)):
        raise StackError(f"something already listens on {zone_address(env)}, where the "
                         "operator zone's server goes: stop it or choose another "
                         "CDNAAS_LOCAL_ZONE_PORT")
    with open(log_path, "ab") as log:
        process = subprocess.Popen(  # pylint: disable=consider-using-with
            [sys.executable, "-m", "cdnaas.ro.zones.knot"], env=env, stdout=log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=None if detach else _die_with_parent)
    port = settings.get("CDNAAS_LOCAL_ZONE_PORT", env)
    zone = settings.get("CDNAAS_DNS_DOMAIN", env)
    deadline = time.monotonic() + timeout
    while not knot.answers(port, zone):
        if process.poll() is not None or time.monotonic() >= deadline:
            _terminate({ZONE_SERVER: process.pid}, 5, {ZONE_SERVER: process})
            raise StackError(f"the operator zone's server (knotd) did not answer for {zone} "
                             f"at 127.0.0.1:{port} within {timeout}s; last lines of "
                             f"{log_path}:\n{tail(log_path)}")
        time.sleep(0.05)
    return process


# -- commands ---------------------------------------------------------------------------------

def _bin_dir():
    # not resolved: a venv's python is a symlink, its scripts sit next to the link
    return Path(sys.executable).parent


def cli_command(*args):
    """Command line running ``cdnaas <args>`` with this interpreter's installation."""
    script = _bin_dir() / "cdnaas"
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-m", "cdnaas.cli.main", *args]


def service_command(service):
    """Command line running ``cdnaas-<service>`` with this interpreter's installation."""
    script = _bin_dir() / f"cdnaas-{service}"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", f"from cdnaas.common.serve import main_{service}; main_{service}()"]


def _die_with_parent():
    # preexec_fn of attached stacks: the child gets SIGTERM if the process that started it dies
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


# -- processes --------------------------------------------------------------------------------

def _alive(pid):
    """Whether ``pid`` runs (a zombie does not count)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _is_cdnaas(pid):
    """Whether ``pid`` still looks like one of our services (guards against reused pids)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return _alive(pid)
    return b"cdnaas" in cmdline


def _port_open(url):
    parts = urlsplit(url)
    with contextlib.suppress(OSError), socket.create_connection(
            (parts.hostname, parts.port or 80), timeout=0.5):
        return True
    return False


def healthy(url, timeout=1.0):
    """Whether ``GET <url>/healthz`` answers 200 (proxies from the environment ignored)."""
    return healthy_url(f"{url}/healthz", timeout)


def healthy_url(url, timeout=1.0):
    """Whether ``GET <url>`` answers 200 (proxies from the environment ignored)."""
    session = requests.Session()
    session.trust_env = False
    try:
        return session.get(url, timeout=timeout).status_code == 200
    except requests.RequestException:
        return False
    finally:
        session.close()


def tail(path, lines=LOG_TAIL_LINES):
    """The last ``lines`` lines of the file at ``path`` (empty if it does not exist)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _terminate(pids, timeout, waiters=None):
    """SIGTERM ``pids`` (a ``{service: pid}`` map), then SIGKILL what is left after ``timeout``."""
    waiters = waiters or {}
    for svc, pid in pids.items():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            LOG.debug("sent SIGTERM to %s (pid %s)", svc, pid)
    deadline = time.monotonic() + timeout
    left = dict(pids)
    while left and time.monotonic() < deadline:
        for svc, pid in list(left.items()):
            proc = waiters.get(svc)
            done = proc.poll() is not None if proc is not None else not _alive(pid)
            if done:
                del left[svc]
        if left:
            time.sleep(0.05)
    for svc, pid in left.items():
        LOG.warning("%s (pid %s) ignored SIGTERM for %ss; killing it", svc, pid, timeout)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        proc = waiters.get(svc)
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
    return list(pids)


def pid_file(state_dir=None):
    """Path of the pid file of the stack whose state lives in ``state_dir``."""
    return Path(state_dir or config.state_dir()) / PID_FILE


def read_pid_file(state_dir=None):
    """The recorded stack (``{"services": {svc: {"pid", "url"}}, ...}``) or None."""
    path = pid_file(state_dir)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def running_pids(state_dir=None):
    """``{service: pid}`` of the recorded stack's processes that still run."""
    record = read_pid_file(state_dir) or {}
    return {svc: entry["pid"] for svc, entry in record.get("services", {}).items()
            if _alive(entry["pid"]) and _is_cdnaas(entry["pid"])}


def down_services(state_dir=None):
    """Services of the recorded stack whose process no longer runs, in start order; empty
    when every service runs, None when none does (no stack to complete)."""
    alive = running_pids(state_dir)
    if not any(svc in alive for svc in config.SERVICES):
        return None
    return [svc for svc in config.SERVICES if svc not in alive]


def record_process(name, pid, url, state_dir=None):
    """Add a helper process (e.g. the demo's origin) to the recorded stack, so
    ``cdnaas down`` stops it with the services."""
    record = read_pid_file(state_dir) or {"state_dir": str(state_dir or config.state_dir()),
                                          "started_at": time.time(), "services": {}}
    record["services"][name] = {"pid": pid, "url": url}
    path = pid_file(state_dir)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2))
    tmp.replace(path)


def stop_recorded(state_dir=None, timeout=10):
    """Stop the stack recorded in ``state_dir``'s pid file; return the services stopped."""
    pids = running_pids(state_dir)
    stopped = _terminate(pids, timeout) if pids else []
    with contextlib.suppress(FileNotFoundError):
        pid_file(state_dir).unlink()
    return stopped


class Stack:
    """The five services as local processes sharing one environment.

    :param env: variables overlaid on ``os.environ`` for every process (``None``
        values remove a variable), e.g. from :func:`free_port_env`.
    :param state_dir: where logs and the pid file go, and the embedded SQLite
        files; ``CDNAAS_STATE_DIR`` of ``env``, or the configured state dir.
    :param services: the services to run (all five by default).
    """

    def __init__(self, env=None, state_dir=None, services=config.SERVICES):
        overlay = dict(env or {})
        if state_dir is None:
            state_dir = overlay.get("CDNAAS_STATE_DIR") or os.environ.get("CDNAAS_STATE_DIR") \
                or config.state_dir()
        self.state_dir = Path(state_dir)
        overlay["CDNAAS_STATE_DIR"] = str(self.state_dir)
        self.env = child_environment(overlay)
        self.services = tuple(services)
        self.processes = {}
        self.log_dir = self.state_dir / "logs"

    @property
    def urls(self):
        """``{service: base URL}`` of the services this stack runs."""
        every = urls_of(self.env)
        return {svc: every[svc] for svc in self.services}

    @property
    def pid_file(self):
        return pid_file(self.state_dir)

    def log_path(self, service):
        return self.log_dir / f"{service}.log"

    # -- start ----------------------------------------------------------------------------

    def start(self, timeout=30, detach=False):
        """Migrate, start every service and wait until each answers ``/healthz``.

        :param timeout: seconds allowed for all services to answer.
        :param detach: leave the processes running when this process exits
            (``cdnaas up --detach``); otherwise they get SIGTERM when it dies.
        :raises StackError: a port is taken, the migrations failed, or a service
            exited or did not answer in time; what was started is stopped again.
        """
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._check_ports()
        self.migrate()
        try:
            if serves_zone(self.env, self.services) \
                    and ZONE_SERVER not in running_pids(self.state_dir):  # a restart of some
                self.processes[ZONE_SERVER] = start_zone_server(
                    self.env, self.log_path(ZONE_SERVER), detach=detach)
            for svc in self.services:
                self._spawn(svc, detach)
            self._write_pid_file()
            self._wait_healthy(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _check_ports(self):
        taken = [f"{svc} ({url})" for svc, url in self.urls.items() if _port_open(url)]
        if taken:
            raise StackError(f"something already listens on the address of {', '.join(taken)}; "
                             "stop it (cdnaas down, if it is a stack) or choose other "
                             "CDNAAS_<SERVICE>_URL ports")

    def migrate(self):
        """Run ``cdnaas db upgrade`` in a subprocess with this stack's environment."""
        log = self.log_path("migrate")
        with open(log, "wb") as out:
            result = subprocess.run(cli_command("db", "upgrade"), env=self.env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    check=False)
        if result.returncode != 0:
            raise StackError(f"the migrations failed (exit {result.returncode}); "
                             f"last lines of {log}:\n{tail(log)}")

    def _spawn(self, service, detach):
        log = open(self.log_path(service), "ab")  # pylint: disable=consider-using-with
        try:
            self.processes[service] = subprocess.Popen(  # pylint: disable=consider-using-with
                service_command(service), env=self.env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, cwd=self.state_dir,
                start_new_session=True,  # a Ctrl-C in the terminal is ours to handle, not theirs
                preexec_fn=None if detach else _die_with_parent)
        finally:
            log.close()
        LOG.debug("started %s (pid %s)", service, self.processes[service].pid)

    def _write_pid_file(self):
        """Record this stack's processes, keeping those of the recorded stack that still
        run (a restart of the services that were down joins the survivors)."""
        alive = running_pids(self.state_dir)
        survivors = {svc: entry for svc, entry in
                     (read_pid_file(self.state_dir) or {}).get("services", {}).items()
                     if svc in alive and svc not in self.processes}
        addresses = {**self.urls, ZONE_SERVER: zone_address(self.env)}
        record = {"state_dir": str(self.state_dir), "started_at": time.time(),
                  "services": {**survivors, **{svc: {"pid": proc.pid, "url": addresses[svc]}
                                               for svc, proc in self.processes.items()}}}
        tmp = self.pid_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=2))
        tmp.replace(self.pid_file)

    def _wait_healthy(self, timeout):
        deadline = time.monotonic() + timeout
        waiting = dict(self.urls)
        while waiting:
            for svc, url in list(waiting.items()):
                code = self.processes[svc].poll()
                if code is not None:
                    raise StackError(f"{svc} exited with status {code} while starting; "
                                     f"last lines of {self.log_path(svc)}:\n"
                                     f"{tail(self.log_path(svc))}")
                if healthy(url, timeout=min(1.0, max(0.1, deadline - time.monotonic()))):
                    del waiting[svc]
            if not waiting:
                return
            if time.monotonic() >= deadline:
                svc = next(iter(waiting))
                raise StackError(f"{', '.join(waiting)} did not answer GET /healthz within "
                                 f"{timeout}s; last lines of {self.log_path(svc)}:\n"
                                 f"{tail(self.log_path(svc))}")
            time.sleep(0.1)

    # -- run and stop ---------------------------------------------------------------------

    def alive(self):
        """Services whose process still runs."""
        return [svc for svc, proc in self.processes.items() if proc.poll() is None]

    def exited(self):
        """``{service: exit status}`` of the services whose process has ended."""
        return {svc: proc.returncode for svc, proc in self.processes.items()
                if proc.poll() is not None}

    def stop(self, timeout=10):
        """SIGTERM every service, SIGKILL those still running after ``timeout`` seconds."""
        pids = {svc: proc.pid for svc, proc in self.processes.items() if proc.poll() is None}
        _terminate(pids, timeout, waiters=self.processes)
        for proc in self.processes.values():  # reap
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(1)
        record = read_pid_file(self.state_dir)
        ours = {proc.pid for proc in self.processes.values()}
        if record and {e["pid"] for e in record.get("services", {}).values()} <= ours:
            with contextlib.suppress(FileNotFoundError):
                self.pid_file.unlink()
        self.processes = {}

    def remove_local_vnfs(self):
        """Remove every VNF the local driver runs for this stack's RO, known to it or not
        (``cdnaas local cleanup --all``): what a throwaway stack (a test's, a benchmark's)
        leaves once stopped. A user's stack keeps its vCDNs across restarts: never called
        by :meth:`stop`."""
        if self.env.get("CDNAAS_VIM_DRIVER") == "local":
            subprocess.run([str(Path(sys.executable).with_name("cdnaas")), "local", "cleanup",
                            "--all"], env=self.env, check=True, capture_output=True, timeout=120)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()
