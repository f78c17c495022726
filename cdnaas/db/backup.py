"""Backup and restore of every service's database (``cdnaas db backup`` / ``restore``).

A backup is one archive (:mod:`cdnaas.db.archive`) of the five services' databases as
they were at one moment, with their Alembic revisions:

- **SQLite** (the embedded default, a file per service): a read transaction is opened
  on every file first, one after the other within microseconds, then each file is
  copied from its snapshot with SQLite's online backup API; services may keep running.
  Snapshots are taken in :data:`ORDER`, each service before those it waits on (SO
  before RO): a service is never behind one it asked for something, which is the state
  a crash of every service at once leaves, and which their start-up already resumes
  (an SO operation still open is carried on from what RO reports).
- **PostgreSQL** (``CDNAAS_DATABASE_URL``, one database): one ``pg_dump`` of the
  services' tables in one snapshot (:mod:`cdnaas.db.pgtools`).

A restore refuses (:class:`~cdnaas.db.archive.BackupError`, saying what to fix) when
the archive is damaged, incomplete, of the other backend, or of a schema revision
newer than this code knows, and when something still uses the databases (a running
service). Otherwise it first backs up the current databases
(``<state dir>/backups/cdnaas-before-restore-<time>.tar.gz``: the restore can be
undone by restoring that), then replaces every database or none: SQLite files are
loaded, migrated to this code's revision and prepared in a staging folder, then
swapped in (a failed swap puts the previous files back); on PostgreSQL the tables are
replaced in one transaction, then migrated and prepared, and on any failure the
previous databases are loaded back.
"""
import contextlib
import datetime as dt
import importlib.metadata
import os
import sqlite3
import tempfile
from pathlib import Path

from alembic.script import ScriptDirectory
from alembic.script.revision import RevisionError
from alembic.util import CommandError
from sqlalchemy.engine import make_url

from cdnaas.common import config
from cdnaas.common.timeutil import isoformat
from cdnaas.db import archive, migrate, pgtools
from cdnaas.db.archive import ArchiveError, BackupError

#: snapshot order: each service before those it waits on (api -> so, im -> so and ro,
#: so -> sidr and ro)
ORDER = ("api", "im", "so", "sidr", "ro")
PREFIX = "cdnaas-backup-"
BEFORE_RESTORE_PREFIX = "cdnaas-before-restore-"
SUFFIX = ".tar.gz"
PG_MEMBER = "postgresql/cdnaas.dump"


class NothingToBackUp(BackupError):
    """A database is missing or has no schema yet."""


def no_progress(_step, _done, _total):
    """A progress callback that shows nothing (``progress(step, done, total)``)."""


def backups_dir():
    """Where backups go by default and restores keep the databases they replace."""
    return config.state_dir() / "backups"


def backend():
    """``sqlite`` or ``postgresql``: the backend of the configured databases."""
    return _backend_of(config.database_url("ro"))


# -- backup -----------------------------------------------------------------------------------

def take(destination=None, progress=no_progress, prefix=PREFIX):
    """Back up every service's database into one archive; return ``(path, manifest)``.

    :param destination: the archive's path, or a folder to write
        ``cdnaas-backup-<UTC time>.tar.gz`` in (default :func:`backups_dir`).
    :param progress: called ``progress(step, done, total)`` as the work goes.
    :raises NothingToBackUp: a database is missing or was never migrated.
    :raises BackupError: the archive exists already, or a tool failed.
    """
    target = _target(Path(destination) if destination else backups_dir(), prefix)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".cdnaas-backup-") as work:
        started = dt.datetime.now(dt.timezone.utc)
        if backend() == "sqlite":
            services, files, tool = _snapshot_sqlite(Path(work), progress)
        else:
            services, files, tool = _dump_postgresql(Path(work), progress)
        manifest = archive.Manifest(
            created_at=isoformat(started), backend=backend(),
            services=services, tool=tool, cdnaas_version=_version())
        progress("write archive", 0, 1)
        archive.write(target, manifest, files)
        progress("write archive", 1, 1)
    return target, manifest


def _target(destination, prefix):
    if destination.is_dir() or not destination.suffix:
        destination.mkdir(parents=True, exist_ok=True)
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        candidates = (destination / f"{prefix}{stamp}{f'-{n}' if n else ''}{SUFFIX}"
                      for n in range(1000))
        return next(c for c in candidates if not c.exists())
    if destination.exists():
        raise BackupError(f"{destination} exists already: name another file, or a folder")
    destination.parent.mkdir(parents=True, exist_ok=True)
    return destination


def _snapshot_sqlite(work, progress):
    """Copy every SQLite file from snapshots taken at one moment (see the module's notes)."""
    databases = _sqlite_files()
    services, files, connections = {}, {}, {}
    try:
        for path, names in databases.items():
            if not path.exists():
                raise NothingToBackUp(f"there is no database of {', '.join(names)} at {path}: "
                                      "run `cdnaas db upgrade` (or `cdnaas up`) first")
            connection = sqlite3.connect(path, isolation_level=None, timeout=30)
            connections[path] = connection
            connection.execute("BEGIN")
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()  # snapshot now
        for done, (path, names) in enumerate(databases.items(), 1):
            member = f"sqlite/{path.name}"
            copy = work / member
            copy.parent.mkdir(exist_ok=True)
            with contextlib.closing(sqlite3.connect(copy)) as out:
                connections[path].backup(out)
                out.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
                present = {row[0] for row in out.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'")}
                for name in names:
                    services[name] = {"revision": _revision(out.cursor(), name, present),
                                      "file": member}
            files[member] = copy
            progress("snapshot databases", done, len(databases))
    finally:
        for connection in connections.values():
            connection.close()
    return services, files, f"sqlite {sqlite3.sqlite_version}"


def _dump_postgresql(work, progress):
    progress("dump databases", 0, 1)
    target = work / PG_MEMBER
    target.parent.mkdir()

    def revisions(cursor):
        present = set(pgtools.tables(cursor))
        return {name: _revision(cursor, name, present) for name in ORDER}

    found, tool = pgtools.dump(config.database_url("ro"), target, revisions)
    progress("dump databases", 1, 1)
    return ({name: {"revision": revision, "file": PG_MEMBER} for name, revision in found.items()},
            {PG_MEMBER: target}, tool)


def _revision(cursor, service, present):
    table = f"alembic_version_{service}"
    if table not in present:
        raise NothingToBackUp(f"{service}'s database has no schema (no table {table}): run "
                              "`cdnaas db upgrade` (or `cdnaas up`) first")
    cursor.execute(f"SELECT version_num FROM {table}")  # our own fixed table name
    return cursor.fetchone()[0]


# -- restore ----------------------------------------------------------------------------------

def restore(source, prepare=None, progress=no_progress):
    """Replace every service's database by those of the archive ``source``, or none.

    :param source: an archive, or a folder: its newest ``cdnaas-backup-*.tar.gz``.
    :param prepare: called with ``{service: database URL}`` and the archive's
        :class:`~cdnaas.db.archive.Manifest` once the restored databases are at this code's
        revision, before they go live (SQLite: staged copies); an exception undoes the
        restore.
    :returns: ``{"archive": path, "manifest": Manifest, "before": path of the previous
        databases' archive, or None when there were none}``.
    :raises ArchiveError: the archive is damaged or incomplete.
    :raises BackupError: it does not fit this installation or code, something uses the
        databases, or the restore failed (then nothing changed).
    """
    path = newest(source)
    home = config.state_dir()
    with tempfile.TemporaryDirectory(dir=home, prefix=".cdnaas-restore-") as work:
        work = Path(work)
        progress("check archive", 0, 1)
        manifest = archive.read(path, work / "archive")
        check_fits(manifest)
        check_unused()
        if manifest.backend == "sqlite":
            for member in {e["file"] for e in manifest.services.values()}:
                _check_integrity(work / "archive" / member)
        else:
            pgtools.check(work / "archive" / PG_MEMBER, manifest.tool)
        progress("check archive", 1, 1)
        progress("back up current databases", 0, 1)
        try:
            before, _manifest = take(backups_dir(), prefix=BEFORE_RESTORE_PREFIX)
        except NothingToBackUp:
            before = None
        progress("back up current databases", 1, 1)
        progress("restore databases", 0, 1)
        if manifest.backend == "sqlite":
            _restore_sqlite(manifest, work, prepare or _nothing)
        else:
            _restore_postgresql(manifest, work, prepare or _nothing, before)
        progress("restore databases", 1, 1)
    return {"archive": path, "manifest": manifest, "before": before}


def newest(source):
    """``source`` if it is a file, else the newest ``cdnaas-backup-*.tar.gz`` in it.

    :raises BackupError: there is none.
    """
    source = Path(source)
    if source.is_file():
        return source
    found = sorted(source.glob(f"{PREFIX}*{SUFFIX}")) if source.is_dir() else []
    if not found:
        raise BackupError(f"{source} is neither an archive nor a folder holding "
                          f"{PREFIX}*{SUFFIX} archives")
    return found[-1]


def check_fits(manifest):
    """:raises ArchiveError: a service is missing from ``manifest``.
    :raises BackupError: it is of the other backend, or of a revision this code lacks."""
    missing = [name for name in config.SERVICES if name not in manifest.services]
    if missing:
        raise ArchiveError(f"the archive lacks the database of {', '.join(missing)}")
    if manifest.backend != backend():
        raise BackupError(f"the archive holds {manifest.backend} databases and this "
                          f"installation uses {backend()} (CDNAAS_DATABASE_URL): restore it "
                          f"where it was taken, or set CDNAAS_DATABASE_URL to match")
    for name in config.SERVICES:
        revision = manifest.services[name]["revision"]
        script = ScriptDirectory.from_config(migrate.alembic_config(name, url="sqlite://"))
        try:
            known = script.get_revision(revision) is not None
        except (CommandError, RevisionError):
            known = False
        if not known:
            raise BackupError(
                f"{name}'s database in the archive is at revision {revision}, newer than this "
                f"code knows (cdnaas {_version()}, latest {script.get_current_head()}): "
                f"restore it with cdnaas {manifest.cdnaas_version} or later")


def check_unused():
    """:raises BackupError: a process has a SQLite database open, or another client is
    connected to the PostgreSQL database (services still run)."""
    if backend() == "postgresql":
        sessions = pgtools.other_sessions(config.database_url("ro"))
        if sessions:
            raise BackupError(f"{sessions} other client(s) are connected to the database: "
                              "stop every service (`cdnaas down`, or each replica) first")
        return
    users = _sqlite_users(list(_sqlite_files()))
    if users:
        raise BackupError(f"processes {', '.join(map(str, sorted(users)))} have the databases "
                          "open: stop the services (`cdnaas down`) first")


def _restore_sqlite(manifest, work, prepare):
    """Stage every file, migrate and prepare it, then swap them all in."""
    staged = {}
    for path, names in _sqlite_files().items():
        members = {manifest.services[name]["file"] for name in names}
        if len(members) != 1:
            raise BackupError(f"the archive keeps {', '.join(names)} in {len(members)} files and "
                              f"this installation in one ({path}): restore it with the "
                              "CDNAAS_DATABASE_URL it was taken with")
        staged[path] = work / "archive" / members.pop()
    urls = {name: f"sqlite:///{staged[path]}" for path, names in _sqlite_files().items()
            for name in names}
    for name in config.SERVICES:
        migrate.upgrade(name, urls[name])
    prepare(urls, manifest)
    _swap(staged, work / "previous")


def _swap(staged, aside):
    """Move each ``{target: staged file}`` into place, the targets' files (with their
    ``-wal`` and ``-shm``) set aside first; on any failure, put everything back."""
    aside.mkdir()
    done = []  # (set-aside copy or None for a new file, its place)
    try:
        for target, new in staged.items():
            for suffix in ("", "-wal", "-shm"):
                old = Path(f"{target}{suffix}")
                if old.exists():
                    kept = aside / f"{len(done)}-{old.name}"
                    os.replace(old, kept)
                    done.append((kept, old))
            os.replace(new, target)
            done.append((None, target))
    except BaseException:
        for kept, place in reversed(done):
            if kept is None:
                place.unlink(missing_ok=True)
            else:
                os.replace(kept, place)
        raise


def _restore_postgresql(manifest, work, prepare, before):
    url = config.database_url("ro")
    pgtools.load(url, work / "archive" / PG_MEMBER, manifest.tool, work)
    try:
        migrate.upgrade_all(url)
        prepare({name: url for name in config.SERVICES}, manifest)
    except Exception as exc:
        if before is None:
            raise BackupError(f"the restored databases could not be migrated or prepared: "
                              f"{exc}; there were no databases before to put back") from exc
        previous = archive.read(before, work / "before")
        pgtools.load(url, work / "before" / PG_MEMBER, previous.tool, work)
        raise BackupError(f"the restored databases could not be migrated or prepared: {exc}; "
                          f"the previous databases were put back") from exc


def _check_integrity(path):
    with contextlib.closing(sqlite3.connect(path)) as connection:
        try:
            result = connection.execute("PRAGMA integrity_check").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            result = str(exc)
    if result != "ok":
        raise ArchiveError(f"{path.name} in the archive is not a sound SQLite database: {result}")


def _sqlite_files():
    """``{path: [services]}`` of the configured SQLite databases, in :data:`ORDER`."""
    files = {}
    for name in ORDER:
        files.setdefault(Path(make_url(config.database_url(name)).database), []).append(name)
    return files


def _sqlite_users(paths):
    """Ids of the processes (but this one) with any of ``paths`` (or its WAL) open."""
    wanted = {str(p.resolve()) for p in paths} | {f"{p.resolve()}-wal" for p in paths}
    users = set()
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        pid = int(fd_dir.parent.name)
        if pid == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) in wanted for fd in fd_dir.iterdir()):
                users.add(pid)
    return users


def _backend_of(url):
    return "postgresql" if url.startswith("postgresql") else "sqlite"


def _nothing(_urls, _manifest):
    """No preparation."""


def _version():
    try:
        return importlib.metadata.version("cdnaas")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
