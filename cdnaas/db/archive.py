"""The backup archive: one ``.tar.gz`` holding the services' databases and a manifest.

Layout::

    manifest.json            written first: format, time, backend, services and their
                             Alembic revisions, and every other member's SHA-256 and size
    sqlite/<service>.db      the embedded default: one SQLite file per database
    postgresql/cdnaas.dump   PostgreSQL: one pg_dump (custom format) of every service's tables

An archive is written to ``<name>.partial`` and renamed once complete, so a file with
the final name is never half-written. :func:`read` extracts only the members the
manifest lists, as plain files, each checked against its digest: anything else (not a
gzip tar, no manifest, another format, a member missing, extra, linked or changed) is
an :class:`ArchiveError` saying what is wrong.
"""
import dataclasses
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path, PurePosixPath

FORMAT = "cdnaas-backup/1"
MANIFEST = "manifest.json"
CHUNK = 1 << 20


class BackupError(Exception):
    """A backup or restore refused or failed; the message says what to fix."""


class ArchiveError(BackupError):
    """The archive cannot be used: damaged, incomplete or of another kind."""


@dataclasses.dataclass
class Manifest:
    """What an archive holds.

    :param created_at: ISO 8601 UTC time of the snapshot.
    :param backend: ``sqlite`` or ``postgresql``.
    :param services: ``{service: {"revision": Alembic revision, "file": member}}``.
    :param files: ``{member: {"sha256": hex digest, "bytes": size}}``, filled by :func:`write`.
    :param tool: what took the snapshot (``sqlite 3.40.1``, ``pg_dump 15.2``).
    :param cdnaas_version: the version of the code that wrote it.
    """

    created_at: str
    backend: str
    services: dict
    tool: str
    cdnaas_version: str
    files: dict = dataclasses.field(default_factory=dict)
    format: str = FORMAT

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data):
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            found = data.get("format") if isinstance(data, dict) else None
            raise ArchiveError(f"not a {FORMAT} archive (its manifest says format {found!r})")
        try:
            manifest = cls(**{f.name: data[f.name] for f in dataclasses.fields(cls)})
        except KeyError as exc:
            raise ArchiveError(f"the manifest lacks {exc.args[0]!r}") from None
        for service, entry in manifest.services.items():
            if entry.get("file") not in manifest.files:
                raise ArchiveError(f"the manifest names no file of {service}'s database")
        for name in manifest.files:
            _check_member_name(name)
        return manifest


def write(path, manifest, files):
    """Write the archive ``path`` from ``files`` (``{member: local path}``); return ``path``.

    ``manifest.files`` is filled with each member's digest and size.
    """
    path = Path(path)
    manifest.files = {name: _digest(local) for name, local in files.items()}
    partial = path.with_name(path.name + ".partial")
    try:
        with tarfile.open(partial, "w:gz") as tar:
            body = json.dumps(manifest.to_dict(), indent=2).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mode = len(body), 0o600
            tar.addfile(info, io.BytesIO(body))
            for name, local in files.items():
                tar.add(local, arcname=name, recursive=False)
        os.chmod(partial, 0o600)  # tenants' data: readable by its owner only
        partial.replace(path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return path


def read(path, into):
    """Check the archive ``path`` and extract its databases into the directory ``into``.

    :returns: its :class:`Manifest`; member ``m`` is then at ``into / m``.
    :raises ArchiveError: it is damaged or not a CDNaaS backup (the message says how).
    """
    into = Path(into)
    try:
        with tarfile.open(path, "r:gz") as tar:
            first = tar.next()
            if first is None or first.name != MANIFEST or not first.isfile():
                raise ArchiveError(f"{MANIFEST} is not its first member")
            try:
                manifest = Manifest.from_dict(json.load(tar.extractfile(first)))
            except ValueError as exc:
                raise ArchiveError(f"its {MANIFEST} is not JSON: {exc}") from None
            seen = set()
            for member in tar:
                if member.offset == first.offset:
                    continue
                expected = manifest.files.get(member.name)
                if expected is None or not member.isfile() or member.name in seen:
                    raise ArchiveError(f"unexpected member {member.name!r}")
                seen.add(member.name)
                _extract(tar, member, into / member.name, expected)
    except (tarfile.TarError, EOFError, OSError) as exc:  # gzip CRC, truncation, not a tar
        raise ArchiveError(f"{path} cannot be read: {exc}") from None
    missing = sorted(set(manifest.files) - seen)
    if missing:
        raise ArchiveError(f"members missing: {', '.join(missing)}")
    return manifest


def _extract(tar, member, target, expected):
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    with tar.extractfile(member) as source, open(target, "wb") as out:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
    if (digest.hexdigest(), size) != (expected["sha256"], expected["bytes"]):
        raise ArchiveError(f"{member.name} does not match its digest in the manifest "
                           f"({size} bytes, sha256 {digest.hexdigest()[:12]}...; expected "
                           f"{expected['bytes']} bytes, {expected['sha256'][:12]}...)")


def _digest(local):
    digest, size = hashlib.sha256(), 0
    with open(local, "rb") as source:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return {"sha256": digest.hexdigest(), "bytes": size}


def _check_member_name(name):
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or ".." in parts or name == MANIFEST:
        raise ArchiveError(f"the manifest names an unsafe member {name!r}")
