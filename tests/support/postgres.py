"""A real PostgreSQL for the tests: the machine's own, or a throwaway cluster.

Order: ``CDNAAS_TEST_POSTGRES_URL`` if set; else a server answering on
127.0.0.1:5432; else ``initdb`` + ``pg_ctl`` a private cluster on a free port
in a temporary directory (as the ``postgres`` user when running as root),
stopped again at the end of the session.
"""
import contextlib
import dataclasses
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import psycopg

LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def _answers(url):
    try:
        with psycopg.connect(url, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


def _pg_bin(tool):
    found = shutil.which(tool)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{tool}"))
    if not candidates:
        raise RuntimeError(f"PostgreSQL's {tool} is not installed (scripts/setup installs it)")
    return str(candidates[-1])


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclasses.dataclass
class Cluster:
    """A private PostgreSQL cluster: its admin ``url``, data folder and log."""

    url: str
    data: Path
    log: Path
    run_as: list

    def pg_ctl(self, *args):
        """Run ``pg_ctl`` on the cluster (as the ``postgres`` user when running as root)."""
        subprocess.run(self.run_as + [_pg_bin("pg_ctl"), "-D", str(self.data), *args],
                       check=True, capture_output=True, timeout=120)

    def restart(self, mode="immediate"):
        """Stop the server (``immediate``: as a crash, no checkpoint) and start it again,
        with the options it ran with; return once it accepts connections."""
        self.pg_ctl("-w", "-l", str(self.log), "-m", mode, "restart")


@contextlib.contextmanager
def cluster():
    """Start a private PostgreSQL cluster; yield its :class:`Cluster`; stop and remove it."""
    workdir = Path(tempfile.mkdtemp(prefix="cdnaas-pg-"))
    data, port = workdir / "data", _free_port()
    run_as = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        user = pwd.getpwnam("postgres")
        os.chown(workdir, user.pw_uid, user.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    subprocess.run(run_as + [_pg_bin("initdb"), "-D", str(data), "-U", "postgres",
                             "--auth=trust", "-E", "UTF8"], check=True, capture_output=True)
    started = Cluster(f"postgresql://postgres@127.0.0.1:{port}/postgres", data,
                      workdir / "log", run_as)
    started.pg_ctl("-w", "-l", str(started.log), "-o",
                   f"-p {port} -k {workdir} -c listen_addresses=127.0.0.1", "start")
    try:
        yield started
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            started.pg_ctl("-m", "fast", "stop")
        shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def throwaway_cluster():
    """Start a private PostgreSQL cluster; yield its admin URL; stop and remove it."""
    with cluster() as started:
        yield started.url


@contextlib.contextmanager
def server():
    """Yield the admin URL of a PostgreSQL server the tests may create databases on."""
    explicit = os.environ.get("CDNAAS_TEST_POSTGRES_URL")
    if explicit:
        yield explicit
    elif _answers(LOCAL_URL):
        yield LOCAL_URL
    else:
        with throwaway_cluster() as url:
            yield url


@contextlib.contextmanager
def fresh_database(admin_url):
    """Create an empty database for one test; yield its SQLAlchemy URL; drop it."""
    name = f"cdnaas_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = admin_url.rsplit("/", 1)[0]
    try:
        yield f"{base.replace('postgresql://', 'postgresql+psycopg://', 1)}/{name}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
