#!/usr/bin/env python3
"""A real, minimal OpenStack control plane on loopback, for the OpenStack driver's tests.

    python3 tests/openstack/minicloud.py start    # install what is missing, configure, start
    python3 tests/openstack/minicloud.py stop     # stop what start started (by PID)
    python3 tests/openstack/minicloud.py status   # which of its processes run
    python3 tests/openstack/minicloud.py destroy  # stop, then remove its data (keeps the venv)
    python3 tests/openstack/minicloud.py start --for-run RUN  # as test run RUN (below)

The tests share one cloud (:func:`claim`, :func:`release`): the run that started it
stops it when its last user leaves; a cloud started otherwise (a developer's) is left
running. ``start --for-run`` claims it for a run that has no user yet: ``scripts/test``
starts it so while the suite is being set up and collected.

keystone, glance, placement, nova (fake virt driver; four nova-compute processes
standing for two regional data centers of two compute hosts each, one availability
zone per data center), neutron (ML2, no agents, the test-only ``cdnaas_bindall`` mechanism
driver of ``plugins/``), octavia (noop drivers, throwaway CA, tenants' certificates from
Barbican), barbican (simple_crypto plugin, in-process tasks) and designate (api,
central, worker, mdns, producer; its pool is one BIND from Debian, on every address of
this machine at port ``configs.PORTS["bind"]``), each API served by gunicorn; with a MariaDB, a RabbitMQ and an epmd of its own on ports that do not clash
with the machine's (``configs.PORTS``). ``../shared/openstack/NOTES.md`` records why it is
built this way.

Everything lives under ``$CDNAAS_MINICLOUD_DIR`` (default ``/opt/cdnaas-minicloud``):
``venv/`` (the services, installed with uv from PyPI under the 2026.1 upper
constraints), ``run/`` (configs, data, logs, pid files) and ``clouds.yaml``
(clouds ``minicloud``: project ``cdnaas``, member roles and Barbican's ``creator``;
``minicloud-admin``).
Every step is idempotent: a second ``start`` does what is missing only. Debian
packages it needs (mariadb-server, rabbitmq-server, openssl, bind9) are installed with
apt-get when absent, without letting apt start their system services.

Standard library only: it runs under the system ``python3`` before any venv exists.
"""
import argparse
import base64
import concurrent.futures
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import configs

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
#: OpenStack 2026.1 upper constraints (a copy of ../shared/openstack/'s)
CONSTRAINTS = HERE / "upper-constraints-2026.1.txt"
SERVER_PACKAGES = ["keystone==29.1.0", "glance==32.0.0", "openstack-placement==15.0.0",
                   "nova==33.0.2", "neutron==28.0.2", "octavia==18.0.1", "barbican==22.0.0",
                   "designate==22.0.0", "gunicorn", "PyMySQL", "openstacksdk"]
APT_PACKAGES = {"mariadb-server": "/usr/sbin/mariadbd", "rabbitmq-server":
                "/usr/lib/rabbitmq/bin/rabbitmq-server", "openssl": "/usr/bin/openssl",
                "erlang-base": "/usr/bin/epmd", "bind9": "/usr/sbin/named"}

#: APIs served by gunicorn: name -> (wsgi module, environment naming its config)
#: (``{etc}``, ``{state}``: the run directory's)
WSGI = {
    "keystone": ("keystone.wsgi.api", {"OS_KEYSTONE_CONFIG_DIR": "{etc}/keystone"}),
    "glance": ("glance.wsgi.api", {"OS_GLANCE_CONFIG_DIR": "{etc}/glance"}),
    "placement": ("placement.wsgi.api", {"OS_PLACEMENT_CONFIG_DIR": "{etc}/placement"}),
    "nova": ("nova.wsgi.osapi_compute", {"OS_NOVA_CONFIG_DIR": "{etc}/nova"}),
    "neutron": ("neutron.wsgi.api", {"OS_NEUTRON_CONFIG_DIR": "{etc}/neutron"}),
    "octavia": ("octavia.wsgi.api", {}),
    # barbican.wsgi.api loads /etc/barbican's paste file and barbican reads its config from
    # oslo.config's default places only (~/.barbican/ first): the wrapper loads ours, HOME
    # points at a home whose .barbican/ is our config folder
    "barbican": (None, {"HOME": "{state}/barbican/home"}),
    "designate": ("designate.wsgi.api", {"OS_DESIGNATE_CONFIG_DIR": "{etc}/designate"}),
}
#: services added after the first clouds were made: a cloud initialized before one of them
#: gets its database, catalog entry and schema on its next start
LATE_SERVICES = ("barbican", "designate")
#: Designate's processes other than its API (central first: the pool is written through it)
DESIGNATE_DAEMONS = ("central", "worker", "mdns", "producer")


def _apt_get(arguments, attempts=30):
    """``apt-get arguments``, waiting (up to ~5 minutes) while another apt holds its locks
    (``scripts/setup`` on a fresh machine may still be installing)."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    command = ["apt-get", "-o", "DPkg::Lock::Timeout=300", *arguments]
    for attempt in range(attempts):
        done = subprocess.run(command, env=env, check=attempt == attempts - 1)
        if done.returncode == 0:
            return
        time.sleep(10)


def log(message):
    print(f"[minicloud {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Cloud:
    def __init__(self, base=None):
        self.base = Path(base or os.environ.get("CDNAAS_MINICLOUD_DIR") or "/opt/cdnaas-minicloud")
        self.venv = self.base / "venv"
        self.run = self.base / "run"
        self.etc = self.run / "etc"
        self.logs = self.run / "logs"
        self.pids = self.run / "pids"
        #: where tests ask a service's test plugin to fail (``plugins/``)
        self.faults = self.run / "state/faults"
        self.clouds_yaml = self.base / "clouds.yaml"
        #: processes this object started (a failed start stops these, and only these)
        self.spawned = []

    # -- install -------------------------------------------------------------

    def install(self):
        self._apt()
        self._venv()

    def _apt(self):
        missing = [p for p, path in APT_PACKAGES.items() if not os.path.exists(path)]
        if not missing:
            return
        log(f"apt-get install {' '.join(missing)}")
        policy = Path("/usr/sbin/policy-rc.d")
        created = not policy.exists()
        if created:  # keep apt from starting the system MariaDB/RabbitMQ on all interfaces
            policy.write_text("#!/bin/sh\nexit 101\n")
            policy.chmod(0o755)
        try:
            for command in (["update", "-q"],
                            ["install", "-y", "-q", "--no-install-recommends", *missing]):
                _apt_get(command)
        finally:
            if created:
                policy.unlink()

    def _venv(self):
        constraints = CONSTRAINTS
        stamp = self.venv / ".minicloud-installed"
        digest = hashlib.sha256()
        for item in [constraints.read_bytes(), " ".join(SERVER_PACKAGES).encode()] + \
                [p.read_bytes() for p in sorted((HERE / "plugins").rglob("*.py"))] + \
                [(HERE / "plugins/pyproject.toml").read_bytes()]:
            digest.update(item)
        if stamp.exists() and stamp.read_text() == digest.hexdigest():
            return
        started = time.monotonic()
        if not (self.venv / "bin/python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(self.venv)], check=True)
        python = str(self.venv / "bin/python")
        if not (self.venv / "bin/uv").exists():
            subprocess.run([python, "-m", "pip", "install", "-q", "uv"], check=True)
        uv = [str(self.venv / "bin/uv"), "pip", "install", "--python", python, "-q"]
        log("installing the OpenStack services into " + str(self.venv))
        subprocess.run(uv + ["-c", str(constraints), *SERVER_PACKAGES], check=True)
        # the test-only plugins, built from a copy so the repository is left as it is
        build = self.base / "build/plugins"
        shutil.rmtree(build, ignore_errors=True)
        shutil.copytree(HERE / "plugins", build)
        subprocess.run(uv + ["--reinstall-package", "cdnaas-minicloud-plugins", str(build)],
                       check=True)
        stamp.write_text(digest.hexdigest())
        log(f"installed in {time.monotonic() - started:.0f} s")

    # -- processes -----------------------------------------------------------

    def _spawn(self, name, argv, env=None, cwd=None):
        """Start ``argv`` in its own session, output to logs/<name>.log, pid to pids/<name>."""
        if self.alive(name):
            return
        self.logs.mkdir(parents=True, exist_ok=True)
        self.pids.mkdir(parents=True, exist_ok=True)
        with open(self.logs / f"{name}.log", "ab") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    env=dict(os.environ, **(env or {})), cwd=cwd)
        (self.pids / name).write_text(str(proc.pid))
        self.spawned.append(name)

    def _pid(self, name):
        try:
            pid = int((self.pids / name).read_text())
        except (FileNotFoundError, ValueError):
            return None
        try:  # the pid is ours only while its process still runs in our session
            if os.getsid(pid) != pid:
                return None
        except ProcessLookupError:
            return None
        return pid

    def alive(self, name):
        return self._pid(name) is not None

    def _stop(self, name, grace=10):
        pid = self._pid(name)
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and _group_alive(pid):
                time.sleep(0.1)
            if _group_alive(pid):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        (self.pids / name).unlink(missing_ok=True)

    def names(self):
        """Process names in start order (stop goes the other way)."""
        computes = [f"nova-compute-{host}" for host, _zone in configs.COMPUTE_HOSTS]
        return ["epmd", "rabbitmq", "mariadb", "keystone", "glance", "placement", "neutron",
                "nova-conductor", "nova-scheduler", "nova", *computes, "barbican",
                "octavia-worker", "octavia", "bind",
                *(f"designate-{daemon}" for daemon in DESIGNATE_DAEMONS), "designate"]

    # -- start ---------------------------------------------------------------

    def start(self):
        started = time.monotonic()
        self.install()
        self._write_configs()
        fresh = not (self.run / "state/.initialized").exists()
        late = [name for name in LATE_SERVICES
                if not (self.run / f"state/{name}/.initialized").exists()]
        self._start_backends(fresh)
        if fresh or late:
            self._init_databases(keystone=fresh)
        self._start_wsgi("keystone")
        self._wait_http("keystone", "/v3")
        if fresh or late:
            self._bootstrap("catalog")
            self._sync_schemas(None if fresh else late)
        for name in ("glance", "placement", "neutron", "barbican"):
            self._start_wsgi(name)
        self._start_nova()
        self._start_octavia()
        self._start_designate(pools=fresh or "designate" in late)
        for name in ("glance", "placement", "neutron", "nova", "barbican", "octavia",
                     "designate"):
            self._wait_http(name, "/")
        self._bootstrap("resources")
        dead = [name for name in self.names() if not self.alive(name)]
        if dead:
            raise SystemExit(f"exited: {', '.join(dead)}; see their logs in {self.logs}")
        (self.run / "state/.initialized").touch()
        for name in LATE_SERVICES:
            (self.run / f"state/{name}/.initialized").touch()
        self._write_clouds_yaml()
        log(f"every API answers ({time.monotonic() - started:.0f} s); "
            f"OS_CLIENT_CONFIG_FILE={self.clouds_yaml} OS_CLOUD=minicloud")

    def _write_configs(self):
        run_state = self.run / "state"
        for relative, text in configs.render(
                str(self.run), str(self.venv),
                self._kept_secret("barbican/kek", base64.urlsafe_b64encode),
                self._kept_secret("bind/rndc-secret", base64.b64encode)).items():
            path = self.etc / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        shutil.copy(self.venv / "etc/nova/api-paste.ini", self.etc / "nova/api-paste.ini")
        shutil.copy(self.venv / "etc/glance/glance-api-paste.ini",
                    self.etc / "glance/glance-api-paste.ini")
        shutil.copy(self.venv / "etc/barbican/barbican-api-paste.ini",
                    self.etc / "barbican/barbican-api-paste.ini")
        shutil.copy(self.venv / "etc/designate/api-paste.ini", self.etc / "designate/api-paste.ini")
        for service in ("keystone", "glance", "nova", "neutron", "octavia", "placement",
                        "barbican", "designate", "bind"):
            for sub in ("", "/locks"):
                (run_state / f"{service}{sub}").mkdir(parents=True, exist_ok=True)
        (run_state / "barbican/home").mkdir(exist_ok=True)
        home_config = run_state / "barbican/home/.barbican"
        if not home_config.is_symlink():
            home_config.symlink_to(self.etc / "barbican")
        for host, _zone in configs.COMPUTE_HOSTS:
            state = self.run / f"state/nova-{host}"
            (state / "instances").mkdir(parents=True, exist_ok=True)
            # nova-compute refuses to start a second time without its node identity
            # file, which it writes for the libvirt driver only
            if not (state / "compute_id").exists():
                (state / "compute_id").write_text(str(uuid.uuid5(uuid.NAMESPACE_DNS, host)))
        wsgi = self.run / "wsgi"
        wsgi.mkdir(parents=True, exist_ok=True)
        for name, (module, _env) in WSGI.items():
            argv = [name] if name != "octavia" else \
                [name, "--config-file", str(self.etc / "octavia/octavia.conf")]
            # The services parse the process's command line as their own options.
            if module:
                load = f"from {module} import application  # noqa\n"
            else:  # its paste pipeline, from our copy
                paste = f"config:{self.etc}/{name}/{name}-api-paste.ini"
                load = f"from paste import deploy\napplication = deploy.loadapp({paste!r})\n"
            (wsgi / f"wsgi_{name}.py").write_text(f"import sys\nsys.argv = {argv!r}\n{load}")
        self._octavia_certificates()

    def _kept_secret(self, relative, encode):
        """32 random bytes, ``encode``d to text: made once, kept under the state at
        ``relative``. Barbican's key-encryption key (``barbican/kek``: the secrets in its
        database are encrypted with it, a Fernet key: URL-safe base64) and the key of BIND's
        control channel (``bind/rndc-secret``: designate's worker adds and deletes zones
        with it, base64)."""
        path = self.run / "state" / relative
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(encode(os.urandom(32)).decode("ascii"))
            path.chmod(0o600)
        return path.read_text().strip()

    def _octavia_certificates(self):
        """A throwaway CA and client certificate: octavia reads them even with noop drivers."""
        state = self.run / "state/octavia"
        if (state / "client.pem").exists():
            return
        def openssl(*args):
            subprocess.run(["openssl", *args], check=True, cwd=state, capture_output=True)
        openssl("req", "-x509", "-newkey", "rsa:2048", "-days", "3650", "-subj", "/CN=minicloud-ca",
                "-keyout", "ca.key", "-out", "ca.pem", "-passout", "pass:minicloud")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=minicloud-client",
                "-keyout", "client.key", "-out", "client.csr")
        openssl("x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-passin", "pass:minicloud", "-CAcreateserial", "-days", "3650",
                "-out", "client.crt")
        (state / "client.pem").write_text((state / "client.crt").read_text()
                                          + (state / "client.key").read_text())

    def _start_backends(self, fresh):
        ports = configs.PORTS
        rabbit = self.run / "state/rabbitmq"
        (rabbit / "home").mkdir(parents=True, exist_ok=True)
        erlang_env = {"ERL_EPMD_PORT": str(ports["epmd"]), "ERL_EPMD_ADDRESS": configs.HOST,
                      "HOME": str(rabbit / "home")}
        self._spawn("epmd", ["epmd", "-port", str(ports["epmd"]), "-address", configs.HOST],
                    env=erlang_env)
        self._spawn("rabbitmq", ["/usr/lib/rabbitmq/bin/rabbitmq-server"], env=dict(
            erlang_env,
            RABBITMQ_NODENAME="minicloud@localhost", RABBITMQ_NODE_IP_ADDRESS=configs.HOST,
            RABBITMQ_NODE_PORT=str(ports["rabbitmq"]),
            RABBITMQ_DIST_PORT=str(ports["rabbitmq_dist"]),
            RABBITMQ_CONF_ENV_FILE=str(self.etc / "rabbitmq/rabbitmq-env.conf"),
            RABBITMQ_CONFIG_FILE=str(self.etc / "rabbitmq/rabbitmq.conf"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(self.etc / "rabbitmq/enabled_plugins"),
            RABBITMQ_MNESIA_BASE=str(rabbit / "mnesia"), RABBITMQ_LOG_BASE=str(self.logs),
            RABBITMQ_PID_FILE=str(rabbit / "rabbit.pid"),
            RABBITMQ_SERVER_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="+S 1:1 +A 4"))
        data = self.run / "state/mariadb"
        if not (data / "mysql").exists():
            data.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={data}",
                            "--user=root", "--auth-root-authentication-method=socket",
                            "--skip-test-db"], check=True, capture_output=True)
        self._spawn("mariadb", [
            "mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={data}/mysqld.sock",
            f"--port={ports['mariadb']}", f"--bind-address={configs.HOST}", "--user=root",
            f"--pid-file={data}/mariadbd.pid", "--skip-name-resolve", "--skip-log-bin",
            "--innodb-buffer-pool-size=256M", "--innodb-flush-log-at-trx-commit=0",
            "--innodb-doublewrite=0", "--sync-binlog=0", "--max-connections=2000",
            "--character-set-server=utf8mb4", f"--log-error={self.logs}/mariadb-error.log"])
        _wait_port(ports["mariadb"], "MariaDB", 60)
        _wait_port(ports["rabbitmq"], "RabbitMQ", 90)

    def sql(self, statement):
        subprocess.run(["mariadb", "--no-defaults", "-uroot",
                        f"--socket={self.run}/state/mariadb/mysqld.sock", "-e", statement],
                       check=True)

    def _init_databases(self, keystone=True):
        """Every service's database (those missing), then keystone's schema and bootstrap."""
        statements = [f"CREATE DATABASE IF NOT EXISTS {db} CHARACTER SET utf8mb3;"
                      for db in configs.DATABASES]
        statements.append(f"CREATE USER IF NOT EXISTS 'openstack'@'{configs.HOST}' "
                          f"IDENTIFIED BY '{configs.PASSWORD}';")
        statements.append(f"GRANT ALL PRIVILEGES ON *.* TO 'openstack'@'{configs.HOST}';")
        self.sql(" ".join(statements))
        if not keystone:
            return
        manage = [str(self.venv / "bin/keystone-manage"),
                  "--config-file", str(self.etc / "keystone/keystone.conf")]
        self._run(manage + ["db_sync"], "keystone-db")
        for sub in ("fernet_setup", "credential_setup"):
            self._run(manage + [sub, "--keystone-user", "root", "--keystone-group", "root"],
                      "keystone-db")
        self._run(manage + ["bootstrap", "--bootstrap-password", configs.PASSWORD,
                            "--bootstrap-admin-url", configs.url("keystone") + "/v3",
                            "--bootstrap-internal-url", configs.url("keystone") + "/v3",
                            "--bootstrap-public-url", configs.url("keystone") + "/v3",
                            "--bootstrap-region-id", configs.REGION], "keystone-db")

    def _sync_schemas(self, only=None):
        """Schema migrations of every other service (or of those named in ``only``), side by
        side (they share no table)."""
        bin_, etc = self.venv / "bin", self.etc
        nova = [str(bin_ / "nova-manage"), "--config-file", str(etc / "nova/nova.conf")]
        jobs = {
            "glance": [[str(bin_ / "glance-manage"), "--config-dir", str(etc / "glance"),
                        "db_sync"]],
            "placement": [[str(bin_ / "placement-manage"), "--config-dir", str(etc / "placement"),
                           "db", "sync"]],
            "nova": [nova + ["api_db", "sync"], nova + ["cell_v2", "map_cell0"],
                     nova + ["cell_v2", "create_cell", "--name", "cell1"], nova + ["db", "sync"]],
            "neutron": [[str(bin_ / "neutron-db-manage"), "--config-file",
                         str(etc / "neutron/neutron.conf"), "--config-file",
                         str(etc / "neutron/plugins/ml2/ml2_conf.ini"), "upgrade", "heads"]],
            "octavia": [[str(bin_ / "octavia-db-manage"), "--config-file",
                         str(etc / "octavia/octavia.conf"), "upgrade", "head"]],
            "designate": [[str(bin_ / "designate-manage"), "--config-file",
                           str(etc / "designate/designate.conf"), "database", "sync"]],
            # its "upgrade" takes the database from the URL only (else: sqlite in the cwd)
            "barbican": [[str(bin_ / "barbican-manage"), "--config-file",
                          str(etc / "barbican/barbican.conf"), "db", "upgrade",
                          "--db-url", configs.db_url("barbican")]],
        }
        jobs = {name: commands for name, commands in jobs.items()
                if only is None or name in only}

        def sync(item):
            name, commands = item
            for command in commands:  # create_cell: 2 is "it exists already"
                self._run(command, f"{name}-db", ok=(0, 2) if "create_cell" in command else (0,))
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
            list(pool.map(sync, jobs.items()))

    def _run(self, argv, log_name, ok=(0,)):
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.logs / f"{log_name}.log", "ab") as out:
            result = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False)
        if result.returncode not in ok:
            raise SystemExit(f"{' '.join(argv)} failed (exit {result.returncode}); "
                             f"see {self.logs / f'{log_name}.log'}")

    def _start_wsgi(self, name):
        module_env = {k: v.format(etc=self.etc, state=self.run / "state")
                      for k, v in WSGI[name][1].items()}
        self._spawn(name, [
            str(self.venv / "bin/gunicorn"), "--no-control-socket", "-k", "gthread",
            "--workers", "1", "--threads", "8", "--bind", f"{configs.HOST}:{configs.PORTS[name]}",
            "--timeout", "300", "--graceful-timeout", "2", "--chdir", str(self.run / "wsgi"),
            f"wsgi_{name}:application"], env=module_env)

    def _start_nova(self):
        nova_conf = ["--config-file", str(self.etc / "nova/nova.conf")]
        self._spawn("nova-conductor", [str(self.venv / "bin/nova-conductor"), *nova_conf])
        self._spawn("nova-scheduler", [str(self.venv / "bin/nova-scheduler"), *nova_conf])
        self._start_wsgi("nova")
        for host, _zone in configs.COMPUTE_HOSTS:
            self._spawn(f"nova-compute-{host}", [
                str(self.venv / "bin/cdnaas-minicloud-nova-compute"), *nova_conf,
                "--config-file", str(self.etc / f"nova/compute-{host}.conf")])

    def _start_octavia(self):
        self._spawn("octavia-worker", [str(self.venv / "bin/octavia-worker"), "--config-file",
                                       str(self.etc / "octavia/octavia.conf")],
                    env={"CDNAAS_MINICLOUD_FAULTS": str(self.faults)})
        self._start_wsgi("octavia")

    def _start_designate(self, pools):
        """BIND, then designate's central; its pool (``pools.yaml``, written through central:
        on a new cloud, ``pools``); then its worker, mini-DNS, producer and API."""
        self._spawn("bind", ["/usr/sbin/named", "-g", "-c", str(self.etc / "bind/named.conf")])
        conf = ["--config-file", str(self.etc / "designate/designate.conf")]
        self._spawn("designate-central", [str(self.venv / "bin/designate-central"), *conf])
        if pools:
            self._pool_update(conf)
        for daemon in DESIGNATE_DAEMONS[1:]:
            self._spawn(f"designate-{daemon}", [str(self.venv / f"bin/designate-{daemon}"), *conf])
        self._start_wsgi("designate")
        _wait_port(configs.PORTS["bind"], "BIND", 30)

    def _pool_update(self, conf, timeout=120):
        """``designate-manage pool update``, retried until central answers: a call sent
        before central listens is lost (its queue does not exist yet), so each try waits
        a few seconds only (``designate/manage.conf``)."""
        argv = [str(self.venv / "bin/designate-manage"), *conf, "--config-file",
                str(self.etc / "designate/manage.conf"), "pool", "update",
                "--file", str(self.etc / "designate/pools.yaml")]
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._run(argv, "designate-pools")
                return
            except SystemExit:
                if time.monotonic() > deadline or not self.alive("designate-central"):
                    raise

    def _wait_http(self, name, path, timeout=180):
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(configs.url(name) + path, timeout=10):
                    return
            except urllib.error.HTTPError:
                return  # it answers (maybe 300 Multiple Choices or 401)
            except OSError:
                pass
            if not self.alive(name):
                raise SystemExit(f"{name} exited; see {self.logs}/{name}.log")
            if time.monotonic() > deadline:
                raise SystemExit(f"{name} did not answer within {timeout} s; see {self.logs}")
            time.sleep(0.3)

    def _bootstrap(self, stage):
        env = {"MINICLOUD_STAGE": stage, "MINICLOUD_NOVA_MANAGE": str(self.venv / "bin/nova-manage"),
               "MINICLOUD_NOVA_CONF": str(self.etc / "nova/nova.conf")}
        result = subprocess.run([str(self.venv / "bin/python"), str(HERE / "bootstrap.py")],
                                env=dict(os.environ, **env), check=False)
        if result.returncode != 0:
            raise SystemExit(f"bootstrap of the {stage} failed")

    def _write_clouds_yaml(self):
        def cloud(name, user, project):
            return (f"  {name}:\n    region_name: {configs.REGION}\n    interface: public\n"
                    f"    identity_api_version: 3\n    auth:\n"
                    f"      auth_url: {configs.url('keystone')}/v3\n"
                    f"      username: {user}\n      password: {configs.PASSWORD}\n"
                    f"      project_name: {project}\n      user_domain_name: Default\n"
                    f"      project_domain_name: Default\n")
        self.clouds_yaml.write_text("clouds:\n" + cloud("minicloud", "cdnaas", "cdnaas")
                                    + cloud("minicloud-admin", "admin", "admin"))

    # -- stop ----------------------------------------------------------------

    def stop(self, only=None):
        """Stop every process (or those named in ``only``), the services before their
        backends."""
        for name in reversed(self.names()):
            if name in ("rabbitmq", "mariadb", "epmd") or (only is not None and name not in only):
                continue
            self._stop(name, grace=5)
        for name, grace in (("rabbitmq", 20), ("mariadb", 30), ("epmd", 5)):
            if only is None or name in only:
                self._stop(name, grace=grace)
        log("stopped" if only is None else f"stopped {', '.join(only) or 'nothing'}")

    def status(self):
        return {name: self._pid(name) for name in self.names()}

    def stop_api(self, name):
        """Stop the API ``name`` (of :data:`WSGI`) alone: a test's outage of one service."""
        self._stop(name, grace=5)

    def start_api(self, name):
        """Start the API ``name`` again (if it is not running); return once it answers."""
        self._start_wsgi(name)
        self._wait_http(name, "/")

    def fault_vip_deallocation(self, lb_id, fault):
        """What the next deletions of balancer ``lb_id`` meet in octavia's worker, at its
        network driver's VIP deallocation (``plugins/.../octavia_network.py``): a count
        ``n`` fails ``n`` of them, each leaving the balancer in ERROR; ``"hold"`` stops the
        next one until another fault replaces it (the balancer stays in PENDING_DELETE);
        None: nothing."""
        path = self.faults / "deallocate_vip" / lb_id
        if fault is None:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        written = path.with_suffix(".new")
        written.write_text(str(fault))
        written.replace(path)  # the worker never reads half of it


def _group_alive(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # zombies of our own children count as gone
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


def _wait_port(port, what, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(1)
            if sock.connect_ex((configs.HOST, port)) == 0:
                return
        time.sleep(0.3)
    raise SystemExit(f"{what} did not listen on {configs.HOST}:{port} within {timeout} s")


#: where test runs sharing the cloud keep their lock, who started it and its users
TESTS_STATE = Path("/tmp/cdnaas-minicloud-tests")


def _in_own_process(command, check=True):
    """This script's ``command`` in a process of its own (the start's daemons leave it)."""
    return subprocess.run([sys.executable, str(Path(__file__).resolve()), command], check=check)


def _running():
    return all(Cloud().status().values())


def _pid_alive(pid):
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def claim(run_id, user=None):
    """Under the tests' lock, start the cloud unless it runs, recording test run ``run_id``
    as the one that started it, and ``user`` (a name ending in ``-<pid>`` of a live
    process) as one of the run's users. A second claim waits for the first's start."""
    users = TESTS_STATE / "users"
    users.mkdir(parents=True, exist_ok=True)
    with open(TESTS_STATE / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _running():
            _in_own_process("start")
            (TESTS_STATE / "started-by").write_text(run_id)
        if user:
            (users / user).touch()


def release(run_id, user):
    """``user`` leaves; the cloud stops if ``run_id`` started it and none of the users of
    the cloud still runs."""
    users = TESTS_STATE / "users"
    with open(TESTS_STATE / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        (users / user).unlink(missing_ok=True)
        started_by = TESTS_STATE / "started-by"
        starter = started_by.read_text() if started_by.exists() else ""
        still_used = [u for u in users.iterdir() if _pid_alive(u.name.rsplit("-", 1)[-1])]
        if starter == run_id and not still_used:
            _in_own_process("stop", check=False)
            started_by.unlink(missing_ok=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["install", "start", "stop", "status", "destroy"])
    parser.add_argument("--for-run", metavar="RUN",
                        help="start: claim the cloud for test run RUN (see claim())")
    args = parser.parse_args(argv)
    cloud = Cloud()
    if args.command == "install":
        cloud.install()
    elif args.command == "start" and args.for_run:
        claim(args.for_run)
    elif args.command == "start":
        try:
            cloud.start()
        except BaseException:
            # a cloud that ran before (others' tests use it) keeps running: only what this
            # start added stops
            log("start failed; stopping what it started")
            cloud.stop(only=cloud.spawned)
            raise
    elif args.command == "stop":
        cloud.stop()
    elif args.command == "destroy":
        cloud.stop()
        shutil.rmtree(cloud.run, ignore_errors=True)
        cloud.clouds_yaml.unlink(missing_ok=True)
    else:
        for name, pid in cloud.status().items():
            print(f"{name:28} {'running, pid ' + str(pid) if pid else 'stopped'}")


if __name__ == "__main__":
    main()
