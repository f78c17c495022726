"""``cdnaas db backup`` / ``restore`` / ``reconciliations``: every service's database in one
archive, put back whole, and what RO did about the VNFs afterwards (:mod:`cdnaas.db.backup`,
:mod:`cdnaas.ro.reconciliation`)."""
import collections
import os
from pathlib import Path

import click

from cdnaas.cli import output
from cdnaas.cli import stack as stacks
from cdnaas.common import errors
from cdnaas.common.clients import RoClient
from cdnaas.db.archive import BackupError


@click.command("backup")
@click.argument("destination", required=False, type=click.Path(path_type=Path))
def backup(destination):
    """Back up every service's database into one archive.

    DESTINATION is the archive's file name, or a folder to write
    cdnaas-backup-<UTC time>.tar.gz in (default: <state dir>/backups). The services may
    keep running: SQLite files are copied from snapshots taken at one moment, PostgreSQL
    is dumped in one snapshot (pg_dump). Key files (service, secret, webhook keys) are
    not in the archive: keep a copy of them apart.
    """
    # here, not at the top: Alembic and psycopg would slow every other command
    from cdnaas.db import backup as backups  # pylint: disable=import-outside-toplevel

    try:
        with output.steps("backup") as progress:
            path, manifest = backups.take(destination, progress)
    except BackupError as exc:
        raise click.ClickException(str(exc)) from exc
    output.show({"archive": str(path), "manifest": manifest.to_dict()}, _render_backup)


@click.command("restore")
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def restore(source, yes):
    """Replace every service's database by those of a backup, all or none.

    SOURCE is an archive, or a folder (its newest cdnaas-backup-*.tar.gz). Refused while
    the services run, when the archive is damaged, of the other backend, or of a schema
    newer than this code. The current databases are first kept in <state
    dir>/backups/cdnaas-before-restore-<time>.tar.gz (restore that to undo). The restored
    databases are migrated to this code's schema; when the Resource Orchestrator next
    starts (`cdnaas up`), it brings what runs back to the restored records: see `cdnaas
    db reconciliations`.
    """
    from cdnaas.db import backup as backups  # pylint: disable=import-outside-toplevel

    running = _running_services()
    if running:
        raise click.ClickException(f"the services still run ({', '.join(running)}): stop them "
                                   "with `cdnaas down` (or each replica) first")
    try:
        path = backups.newest(source)
    except BackupError as exc:
        raise click.ClickException(str(exc)) from exc
    if not yes:
        click.confirm(f"Replace every service's database by those of {path}?", abort=True,
                      err=True)
    try:
        with output.steps(f"restore {path.name}") as progress:
            restored = backups.restore(path, prepare=_request_reconciliation, progress=progress)
    except BackupError as exc:
        raise click.ClickException(str(exc)) from exc
    manifest = restored["manifest"]
    output.show({"archive": str(restored["archive"]), "manifest": manifest.to_dict(),
                 "before": str(restored["before"]) if restored["before"] else None},
                _render_restore)


@click.command("reconciliations")
@click.option("--all", "everything", is_flag=True, help="The actions of every reconciliation, "
              "not only the newest's.")
def reconciliations(everything):
    """What the Resource Orchestrator did to bring what runs back to the records after each
    restore: VNFs adopted, rebuilt or removed."""
    try:
        found = RoClient(timeout=10).reconciliations()
    except errors.UpstreamError as exc:
        raise click.ClickException(f"the Resource Orchestrator does not answer ({exc}): "
                                   "start it (`cdnaas up`)") from exc
    output.show({"reconciliations": [r.body for r in found]},
                lambda data: _render_reconciliations(data["reconciliations"], everything))


# -- helpers ----------------------------------------------------------------------------------

def _running_services():
    """Services of this machine's stack that run, or answer at their configured URL."""
    running = set(stacks.running_pids())
    running |= {svc for svc, url in stacks.urls_of(os.environ).items() if stacks.healthy(url)}
    return sorted(running)


def _request_reconciliation(urls, manifest):
    from cdnaas.ro import reconciliation  # pylint: disable=import-outside-toplevel

    reconciliation.request(urls["ro"], f"the restore of the backup taken at "
                                       f"{manifest.created_at}")


def _render_backup(data):
    manifest = data["manifest"]
    output.table([{"service": svc, **entry} for svc, entry in manifest["services"].items()],
                 [("Service", "service"), ("Schema revision", "revision"), ("File", "file")],
                 title=f"Backup of {manifest['created_at']} ({manifest['backend']}, "
                       f"{manifest['tool']})")
    size = sum(f["bytes"] for f in manifest["files"].values())
    output.out().print(f"{data['archive']} ({size:,} bytes of databases)")


def _render_restore(data):
    manifest = data["manifest"]
    output.out().print(f"restored the databases of {manifest['created_at']} from "
                       f"{data['archive']}")
    if data["before"]:
        output.out().print(f"the databases they replaced are kept in {data['before']}")
    output.note("the Resource Orchestrator reconciles what runs with the restored records "
                "when it starts (`cdnaas up`); see `cdnaas db reconciliations`")


def _render_reconciliations(found, everything):
    if not found:
        output.out().print("No reconciliation: no restore was made.")
        return
    output.table([{**r, "done": _counts(r["actions"])} for r in found],
                 [("Id", "id"), ("Status", lambda r: output.styled(r["status"])),
                  ("Cause", "cause"), ("Requested", "created_at"), ("Finished", "finished_at"),
                  ("Actions", "done"), ("Error", "error")], title="Reconciliations")
    for entry in found if everything else found[:1]:
        output.table(entry["actions"], [("Deployment", "deployment"), ("VNF", "vnf"),
                                        ("Role", "role"), ("Action", "action"),
                                        ("Detail", "detail")],
                     title=f"Actions of {entry['id']}")


def _counts(actions):
    counted = collections.Counter(a["action"] for a in actions)
    return ", ".join(f"{n} {action}" for action, n in sorted(counted.items())) or "none"
