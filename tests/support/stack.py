"""The five services as real processes on free ports, for end-to-end tests.

    with running_stack(database_url, tmp_path) as stack:
        requests.get(stack.urls["api"] + "/api/v1/flavors",
                     headers={"Authorization": f"Bearer {stack.operator_token}"})

    with replicated_stack(database_url, tmp_path) as stack:   # two of each, one URL each
        stack.replicas[0].kill("so")
"""
import contextlib
import dataclasses
import itertools
import signal
import socket
import threading
import time
from pathlib import Path

from cdnaas.cli.stack import Stack, database_url_of, free_port_env, healthy
from cdnaas.common import config, service_auth
from cdnaas.common.ports import free_loopback_ports


@dataclasses.dataclass
class RunningStack:
    """What a test needs of a started stack."""

    env: dict            # the full environment of the services (use it for CLI subprocesses)
    urls: dict           # {service: base URL}
    state_dir: Path      # logs/<service>.log, the pid file, the embedded SQLite files
    operator_token: str  # a token of tenant "admin" with the operator role
    stack: Stack

    def log(self, service):
        """The log of ``service`` so far (handy in assertion messages)."""
        return self.stack.log_path(service).read_text(errors="replace")

    @property
    def key_file(self):
        """The service key the stack made (``cdnaas db upgrade``) in its state dir, or
        the one its environment names."""
        return Path(self.env.get("CDNAAS_SERVICE_KEY_FILE") or self.state_dir / "service.key")

    def service_headers(self, caller="test"):
        """Headers of a request to an internal service, signed with the stack's key."""
        return service_auth.headers(caller, self.key_file)

    def client(self, client_class):
        """A :class:`~cdnaas.common.http.JsonClient` subclass instance for this stack's
        service, signing with the stack's key: ``stack.client(RoClient).get_deployment(id)``."""
        return client_class(base_url=self.urls[client_class.service], key_file=self.key_file)

    def kill(self, service):
        """``kill -9`` one service (as a crash would) and reap it."""
        process = self.stack.processes[service]
        process.send_signal(signal.SIGKILL)
        process.wait(10)

    def restart(self, service, timeout=60):
        """Start ``service`` again (after :meth:`kill`) and wait until it answers /healthz."""
        self.stack._spawn(service, detach=False)  # pylint: disable=protected-access
        deadline = time.monotonic() + timeout
        while not healthy(self.urls[service]):
            assert self.stack.processes[service].poll() is None, self.log(service)[-3000:]
            assert time.monotonic() < deadline, f"{service} did not come back: " \
                f"{self.log(service)[-3000:]}"
            time.sleep(0.05)


@contextlib.contextmanager
def running_stack(database_url, tmp_path, extra_env=None, services=None, timeout=60):
    """Start a stack on ``database_url``; yield a :class:`RunningStack`; stop it.

    :param database_url: ``CDNAAS_DATABASE_URL`` shared by all services, or None for
        the embedded default (one SQLite file per service in the state dir).
    :param tmp_path: the test's temporary directory; the state dir goes under it.
    :param extra_env: more variables (they win over the defaults here:
        ``CDNAAS_VIM_DRIVER=noop``, ``CDNAAS_IM_INTERVAL=0.5``); None unsets one.
    :param services: run only these services (all five by default).

    On the local driver, the VNFs of every vCDN the test left behind (it failed before
    deleting them) are removed once the stack has stopped (:meth:`Stack.remove_local_vnfs`).
    """
    state_dir = Path(tmp_path) / "state"
    state_dir.mkdir(parents=True, exist_ok=True)
    env = free_port_env(state_dir)
    env.update({
        "CDNAAS_DATABASE_URL": database_url,  # None: embedded default
        "CDNAAS_VIM_DRIVER": "noop",
        "CDNAAS_IM_INTERVAL": "0.5",
        "CDNAAS_ORIGIN_ALLOW": "127.0.0.1",  # the sample origin (conftest) on this machine
        "CDNAAS_CONFIG": str(state_dir / "cli-config.yaml"),  # never the user's settings
        "CDNAAS_TOKEN": None,
        "CDNAAS_SERVICE_KEY_FILE": None,  # the stack makes its own key in its state dir
        "CDNAAS_SECRET_KEY_FILE": None,  # and RO its secret key
        "CDNAAS_WEBHOOK_KEY_FILE": None,  # and SO its webhook key
        "CDNAAS_LOG_LEVEL": "INFO",
    })
    env.update(extra_env or {})
    kwargs = {"services": tuple(services)} if services else {}
    stack = Stack(env=env, state_dir=state_dir, **kwargs)
    stack.start(timeout=timeout)
    try:
        yield RunningStack(env=stack.env, urls=stack.urls, state_dir=state_dir,
                           operator_token=_operator_token(stack.env) if "api" in stack.services
                           else None, stack=stack)
    finally:
        stack.stop()
        stack.remove_local_vnfs()


def _operator_token(env):
    from cdnaas.api.tokens import bootstrap_token  # pylint: disable=import-outside-toplevel
    from cdnaas.db.engine import Database  # pylint: disable=import-outside-toplevel

    database = Database(database_url_of(env, "api"))
    try:
        return bootstrap_token(database, "admin")
    finally:
        database.dispose()


# -- replicas -----------------------------------------------------------------------------------

class TcpProxy:
    """One address for the replicas of a service, as compose's DNS round robin or a
    balancer gives: each connection goes to a backend that accepts it, tried in order
    (``failover``: the first one alive takes everything) or in turn (``round-robin``).

    :param backends: ``[(host, port)]`` of the replicas.
    """

    def __init__(self, backends, mode="failover"):
        self.backends = list(backends)
        self.mode = mode
        self._turn = itertools.count()
        self._open = set()  # the sockets of connections being served
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, name=f"proxy-{self.port}", daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def close(self):
        with contextlib.suppress(OSError):
            self._server.close()

    def reset(self):
        """Close every connection being served (their clients connect again)."""
        for sock in list(self._open):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _order(self):
        if self.mode == "round-robin":
            first = next(self._turn) % len(self.backends)
            return self.backends[first:] + self.backends[:first]
        return list(self.backends)

    def _accept(self):
        while True:
            try:
                client, _address = self._server.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        for address in self._order():
            try:
                upstream = socket.create_connection(address, timeout=2)
            except OSError:  # this replica is down: the next one
                continue
            upstream.settimeout(None)
            self._open.update((client, upstream))
            threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()
            _pump(client, upstream)
            self._open.difference_update((client, upstream))
            return
        client.close()


def _pump(source, target):
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class ReplicaStack(Stack):
    """A :class:`Stack` whose services listen on their ``CDNAAS_<SVC>_BIND`` while peers
    reach every replica of a service by one ``CDNAAS_<SVC>_URL``: it is checked, and its
    ``urls`` are, where it listens."""

    @property
    def urls(self):
        return {svc: f"http://{self.env[f'CDNAAS_{svc.upper()}_BIND']}" for svc in self.services}


@contextlib.contextmanager
def replicated_stack(database_url, tmp_path, extra_env=None, services=config.SERVICES,
                     replicas=2, mode="failover", timeout=60):
    """Start ``replicas`` copies of each of ``services`` on one database (PostgreSQL),
    each service's copies behind one :class:`TcpProxy` whose address is the service's
    ``CDNAAS_<SVC>_URL`` for every peer; yield a :class:`RunningStack` whose ``urls`` are
    the proxies', with ``replicas`` (a :class:`RunningStack` per copy, ``urls`` its own
    addresses, ``kill``/``restart`` per service) and ``proxies`` (``{service: TcpProxy}``).

    Copies differ only in their bind addresses and state dirs (logs, pid file); they
    share the first copy's service key. ``extra_env`` is as for :func:`running_stack`.
    """
    ports = iter(free_loopback_ports(len(services) * replicas))
    binds = [{svc: next(ports) for svc in services} for _ in range(replicas)]
    proxies = {svc: TcpProxy([("127.0.0.1", b[svc]) for b in binds], mode) for svc in services}
    first_dir = Path(tmp_path) / "state"
    started = []
    try:
        for index, bind in enumerate(binds):
            state_dir = first_dir if index == 0 else Path(tmp_path) / f"state-{index}"
            state_dir.mkdir(parents=True, exist_ok=True)
            env = {"CDNAAS_STATE_DIR": str(state_dir), "CDNAAS_DATABASE_URL": database_url,
                   "CDNAAS_VIM_DRIVER": "noop", "CDNAAS_IM_INTERVAL": "0.5",
                   "CDNAAS_ORIGIN_ALLOW": "127.0.0.1",
                   "CDNAAS_CONFIG": str(state_dir / "cli-config.yaml"), "CDNAAS_TOKEN": None,
                   "CDNAAS_SERVICE_KEY_FILE": str(first_dir / "service.key"),
                   # SO replicas sign with secrets any of them may have sealed
                   "CDNAAS_WEBHOOK_KEY_FILE": str(first_dir / "webhooks.key"),
                   "CDNAAS_LOG_LEVEL": "INFO", "CDNAAS_REPLICA_NAME": None}
            for svc in config.SERVICES:  # every peer by its one address
                proxy = proxies.get(svc)
                env[f"CDNAAS_{svc.upper()}_URL"] = proxy.url if proxy else "http://127.0.0.1:9"
            for svc, port in bind.items():
                env[f"CDNAAS_{svc.upper()}_BIND"] = f"127.0.0.1:{port}"
            env.update(extra_env or {})
            stack = ReplicaStack(env=env, state_dir=state_dir, services=services)
            stack.start(timeout=timeout)
            started.append(RunningStack(env=stack.env, urls=stack.urls, state_dir=state_dir,
                                        operator_token=None, stack=stack))
        first = started[0]
        running = RunningStack(env=first.env, urls={s: p.url for s, p in proxies.items()},
                               state_dir=first_dir, operator_token=_operator_token(first.env)
                               if "api" in services else None, stack=first.stack)
        running.replicas, running.proxies = started, proxies
        yield running
    finally:
        for replica in reversed(started):
            replica.stack.stop()
        for proxy in proxies.values():
            proxy.close()
