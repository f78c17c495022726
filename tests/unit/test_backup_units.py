"""The backup archive and the refusals of a restore, on the embedded default's SQLite
files (no service runs): a round trip, damaged archives, an archive of a newer schema
or of the other backend, and a restore failing half-way, which changes nothing."""
import io
import json
import os
import shutil
import sqlite3
import tarfile
from pathlib import Path

import pytest

from cdnaas.common import config
from cdnaas.db import archive, backup, migrate
from cdnaas.db.archive import ArchiveError, BackupError
from cdnaas.ro import reconciliation


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    """SQLite files migrated once for the module, copied by each test."""
    folder = tmp_path_factory.mktemp("migrated")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CDNAAS_STATE_DIR", str(folder))
        patch.delenv("CDNAAS_DATABASE_URL", raising=False)
        migrate.upgrade_all()
    return folder


@pytest.fixture
def state(tmp_path, monkeypatch, migrated):
    """A state dir of migrated SQLite files holding tenant ``before``."""
    monkeypatch.setenv("CDNAAS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("CDNAAS_DATABASE_URL", raising=False)
    shutil.copytree(migrated, tmp_path / "state")
    add_tenant("before")
    return tmp_path / "state"


def sqlite_file(service):
    return Path(config.database_url(service).removeprefix("sqlite:///"))


def add_tenant(name):
    with sqlite3.connect(sqlite_file("api")) as connection:
        connection.execute("INSERT INTO api_tenants (name, role, created_at) "
                           "VALUES (?, 'tenant', '2025-01-01 00:00:00')", (name,))


def tenants():
    with sqlite3.connect(sqlite_file("api")) as connection:
        return {row[0] for row in connection.execute("SELECT name FROM api_tenants")}


def reconciliations():
    with sqlite3.connect(sqlite_file("ro")) as connection:
        return connection.execute("SELECT status, cause FROM ro_reconciliations").fetchall()


def request_reconciliation(urls, manifest):
    reconciliation.request(urls["ro"], f"the restore of the backup taken at {manifest.created_at}")


def rewritten(path, tmp_path, change_manifest=None, change_files=None):
    """A copy of the archive ``path`` with its manifest (a dict) and member files changed."""
    work = tmp_path / "rewrite"
    manifest = archive.read(path, work)
    files = {name: work / name for name in manifest.files}
    if change_files:
        change_files(files)
    data = manifest.to_dict()
    if change_manifest:
        change_manifest(data)
    copy = tmp_path / "changed.tar.gz"
    copy.unlink(missing_ok=True)
    fields = {k: v for k, v in data.items() if k != "files"}
    return archive.write(copy, archive.Manifest(**fields), files)


def test_backup_holds_every_database_at_its_revision_and_a_restore_brings_it_back(state):
    path, manifest = backup.take()
    assert path.parent == state / "backups" and path.name.startswith("cdnaas-backup-")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert manifest.backend == "sqlite" and set(manifest.services) == set(config.SERVICES)
    for service, entry in manifest.services.items():
        assert entry == {"revision": _head(service), "file": f"sqlite/{service}.db"}
    add_tenant("after")

    restored = backup.restore(state / "backups", prepare=request_reconciliation)

    assert restored["archive"] == path
    assert tenants() == {"before"}
    assert reconciliations() == [("PENDING", f"the restore of the backup taken at "
                                             f"{manifest.created_at}")]
    assert not list(state.glob(".cdnaas-*")), "staging folders are left"
    backup.restore(restored["before"])  # the databases the restore replaced: an undo
    assert tenants() == {"before", "after"} and reconciliations() == []


def _head(service):
    from alembic.script import ScriptDirectory  # pylint: disable=import-outside-toplevel

    return ScriptDirectory.from_config(migrate.alembic_config(service, "sqlite://")) \
        .get_current_head()


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flip_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _not_gzip(path):
    path.write_text("not an archive")


def _without_manifest(path):
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("sqlite/api.db")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"abc"))


@pytest.mark.parametrize("damage, message", [
    (_truncate, "cannot be read"), (_flip_byte, "cannot be read|does not match its digest"),
    (_not_gzip, "cannot be read"), (_without_manifest, "manifest.json is not its first member"),
])
def test_a_damaged_archive_is_refused_and_nothing_changes(state, damage, message):
    path, _manifest = backup.take()
    add_tenant("after")
    damage(path)
    with pytest.raises(ArchiveError, match=message):
        backup.restore(path)
    assert tenants() == {"before", "after"}
    assert not list((state / "backups").glob("cdnaas-before-restore-*"))


def test_a_member_changed_or_missing_or_added_is_refused(state, tmp_path):
    path, _manifest = backup.take()

    def change_so(files):
        with sqlite3.connect(files["sqlite/so.db"]) as connection:
            connection.execute("DELETE FROM so_regions")
    changed = rewritten(path, tmp_path, change_files=change_so)
    with tarfile.open(changed, "r:gz") as tar:  # the original manifest, a changed member
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    manifest = json.loads(members["manifest.json"])
    manifest["files"]["sqlite/so.db"]["sha256"] = "0" * 64
    forged = tmp_path / "forged.tar.gz"
    with tarfile.open(forged, "w:gz") as tar:
        for name, body in [("manifest.json", json.dumps(manifest).encode()),
                           *[(n, b) for n, b in members.items() if n != "manifest.json"],
                           ("extra", b"x")]:
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    with pytest.raises(ArchiveError, match="sqlite/so.db does not match its digest"):
        backup.restore(forged)

    missing = rewritten(path, tmp_path, change_manifest=lambda m: m["services"].pop("im"))
    with pytest.raises(ArchiveError, match="lacks the database of im"):
        backup.restore(missing)
    unsafe = rewritten(path, tmp_path, change_files=lambda files: files.update(
        {"../evil": files["sqlite/so.db"]}))
    with pytest.raises(ArchiveError, match="unsafe member '../evil'"):
        backup.restore(unsafe)
    assert tenants() == {"before"}


def test_an_archive_of_a_newer_schema_or_the_other_backend_is_refused(state, tmp_path):
    path, _manifest = backup.take()
    add_tenant("after")
    newer = rewritten(path, tmp_path, change_manifest=lambda m: m["services"]["so"].update(
        revision="so_9999"))
    with pytest.raises(BackupError, match="so's database in the archive is at revision so_9999, "
                                          "newer than this code knows"):
        backup.restore(newer)
    other = rewritten(path, tmp_path, change_manifest=lambda m: m.update(backend="postgresql"))
    with pytest.raises(BackupError, match="holds postgresql databases and this installation "
                                          "uses sqlite"):
        backup.restore(other)
    assert tenants() == {"before", "after"}


def test_a_restore_failing_half_way_changes_nothing(state, monkeypatch):
    path, _manifest = backup.take()
    add_tenant("after")
    before = {svc: sqlite_file(svc).read_bytes() for svc in config.SERVICES}

    def failing(_urls, _manifest):
        raise RuntimeError("preparation failed")
    with pytest.raises(RuntimeError, match="preparation failed"):
        backup.restore(path, prepare=failing)
    assert {svc: sqlite_file(svc).read_bytes() for svc in config.SERVICES} == before

    real_replace = os.replace

    def replace(source, target):  # sidr's file, the fourth, fails to move in
        if "/archive/sqlite/" in str(source) and Path(target).name == "sidr.db":
            raise OSError("disk full")
        real_replace(source, target)
    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match="disk full"):
        backup.restore(path)
    monkeypatch.setattr(os, "replace", real_replace)
    assert {svc: sqlite_file(svc).read_bytes() for svc in config.SERVICES} == before
    assert tenants() == {"before", "after"}


def test_backup_refuses_a_database_never_migrated(tmp_path, monkeypatch):
    monkeypatch.setenv("CDNAAS_STATE_DIR", str(tmp_path / "empty"))
    monkeypatch.delenv("CDNAAS_DATABASE_URL", raising=False)
    with pytest.raises(backup.NothingToBackUp, match="no database of api .*cdnaas db upgrade"):
        backup.take()
    with pytest.raises(BackupError, match="exists already"):
        (tmp_path / "taken.tar.gz").write_text("")
        backup.take(tmp_path / "taken.tar.gz")
