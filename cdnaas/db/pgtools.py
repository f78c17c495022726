"""PostgreSQL's own tools for backups: ``pg_dump``, ``pg_restore`` and ``psql``.

PostgreSQL's documented way to copy a database: a dump in the custom format of the
services' tables (those named ``<service>_*`` and ``alembic_version_<service>``), taken
in one exported snapshot that the revisions recorded in the manifest are read in too,
and restored in one transaction. ``pg_dump`` must be at least as new as the server, and
``pg_restore`` as the ``pg_dump`` that wrote the dump: the newest installed client
(``/usr/lib/postgresql/<major>/bin``, then ``PATH``) is used, and one too old is refused
with the package to install.
"""
import os
import re
import shutil
import subprocess
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from cdnaas.common import config
from cdnaas.db.archive import BackupError

TOOL_TIMEOUT = 3600  # seconds: a dump or restore of a large database may take long


def conninfo(url):
    """``(libpq URI, environment)`` of the SQLAlchemy ``url``: the password goes in
    ``PGPASSWORD``, never on a command line."""
    parsed = make_url(url)
    env = {"PGPASSWORD": parsed.password} if parsed.password else {}
    bare = parsed.set(drivername="postgresql")
    return bare._replace(password=None).render_as_string(hide_password=False), env


def patterns():
    """``pg_dump`` table patterns of every service's tables."""
    return [p for svc in config.SERVICES for p in (f"{svc}_*", f"alembic_version_{svc}")]


def tables(cursor):
    """Names of the services' tables in the connection's schema."""
    names = "|".join(config.SERVICES)
    cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                   "AND tablename ~ %s ORDER BY tablename",
                   (f"^(alembic_version_)?({names})(_.*)?$",))
    return [row[0] for row in cursor.fetchall()]


def server_major(url):
    uri, env = conninfo(url)
    with psycopg.connect(uri, password=env.get("PGPASSWORD"), connect_timeout=10) as conn:
        return int(conn.info.server_version) // 10000


def other_sessions(url):
    """How many other clients are connected to ``url``'s database (running services)."""
    uri, env = conninfo(url)
    with psycopg.connect(uri, password=env.get("PGPASSWORD"), connect_timeout=10) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend'").fetchone()[0]


def tool(name, at_least):
    """``(path, major version)`` of the newest installed ``name`` of major ``at_least`` or more.

    :raises BackupError: none is installed, or only older ones.
    """
    found = {}
    candidates = [str(p) for p in Path("/usr/lib/postgresql").glob(f"*/bin/{name}")]
    candidates.append(shutil.which(name))
    for path in filter(None, candidates):
        major = _major(path)
        if major is not None:
            found.setdefault(major, path)
    if not found:
        raise BackupError(f"PostgreSQL's {name} is not installed: install postgresql-client-"
                          f"{at_least} (scripts/setup installs the machine's)")
    best = max(found)
    if best < at_least:
        raise BackupError(f"{name} {best} is older than PostgreSQL {at_least} needs: install "
                          f"postgresql-client-{at_least}")
    return found[best], best


def dump(url, target, read):
    """Dump the services' tables of ``url`` to ``target`` in one snapshot, in which
    ``read(cursor)`` runs first (the revisions); return ``(what read returned, tool)``.

    :raises BackupError: the tools are missing or too old, or pg_dump failed.
    """
    uri, env = conninfo(url)
    path, major = tool("pg_dump", server_major(url))
    with psycopg.connect(uri, password=env.get("PGPASSWORD"), connect_timeout=10,
                         autocommit=True) as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        snapshot = conn.execute("SELECT pg_export_snapshot()").fetchone()[0]
        with conn.cursor() as cursor:
            found = read(cursor)
        command = [path, "--format=custom", "--no-owner", "--no-privileges",
                   f"--snapshot={snapshot}", f"--file={target}"]
        command += [f"--table={p}" for p in patterns()] + [uri]
        _run(command, env, "pg_dump")
        conn.execute("ROLLBACK")
    return found, f"pg_dump {major}"


def check(dump_file, dumped_by):
    """:raises BackupError: ``dump_file`` is not a dump this machine's pg_restore can read."""
    path, _major = tool("pg_restore", _major_of(dumped_by))
    _run([path, "--list", str(dump_file)], {}, "pg_restore --list")


def load(url, dump_file, dumped_by, workdir):
    """Replace the services' tables of ``url`` by those of ``dump_file``, in one transaction:
    the tables there now (of any revision) are dropped and the dump's created and filled;
    any error leaves the database as it was.

    :raises BackupError: the tools are missing or too old, or the restore failed.
    """
    uri, env = conninfo(url)
    pg_restore, _major = tool("pg_restore", _major_of(dumped_by))
    psql, _major = tool("psql", 0)
    script = Path(workdir) / "restore.sql"
    _run([pg_restore, "--no-owner", "--no-privileges", f"--file={script}", str(dump_file)],
         env, "pg_restore")
    with psycopg.connect(uri, password=env.get("PGPASSWORD"), connect_timeout=10) as conn:
        present = tables(conn.cursor())
    quoted = ", ".join('"' + name.replace('"', '""') + '"' for name in present)
    drops = f"DROP TABLE IF EXISTS {quoted} CASCADE" if present else "SELECT 1"
    _run([psql, "--no-psqlrc", "--quiet", "--set=ON_ERROR_STOP=1", "--single-transaction",
          f"--command={drops}", f"--file={script}", f"--dbname={uri}"], env, "psql")


def _major(path):
    try:
        text = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10,
                              check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return _major_of(text)


def _major_of(text):
    found = re.search(r"(\d+)(?:\.\d+)?", text or "")
    return int(found.group(1)) if found else 0


def _run(command, env, what):
    try:
        subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, check=True,
                       timeout=TOOL_TIMEOUT)
    except subprocess.CalledProcessError as exc:
        lines = (exc.stderr or exc.stdout or "").strip().splitlines()
        raise BackupError(f"{what} failed (exit {exc.returncode}): "
                          f"{' / '.join(lines[-3:]) or 'no message'}") from None
    except subprocess.TimeoutExpired:
        raise BackupError(f"{what} did not finish within {TOOL_TIMEOUT} s") from None
