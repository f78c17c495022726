"""``cdnaas db backup`` / ``restore`` against running services: a round trip on PostgreSQL
(a stack on the noop driver: backed up while it runs, changed, restored once stopped,
started again and reconciled), and the refusals while something uses the databases."""
import subprocess
import sys

import psycopg
import pytest
from sqlalchemy import select

from cdnaas.cli import stack as stacks
from cdnaas.common.clients import RoClient
from cdnaas.db import backup, pgtools
from cdnaas.db.archive import BackupError
from cdnaas.db.engine import Database
from cdnaas.so.models import Instance
from tests.support import postgres
from tests.support.api import populate, vcdn_body
from tests.support.ledger import per_host, so_view
from tests.support.stack import running_stack


def cli(env, *args):
    return subprocess.run(stacks.cli_command(*args), env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def created(stack, name):
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body(name))
    assert stack.acme.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
    return accepted["vcdn"]["id"]


def test_postgresql_round_trip(postgres_admin_url, tmp_path):
    with postgres.fresh_database(postgres_admin_url) as url, \
            running_stack(url, tmp_path, extra_env={"CDNAAS_IM_INTERVAL": "3600"}) as stack:
        populate(stack)
        kept = created(stack, "kept")
        taken = cli(stack.env, "db", "backup", str(tmp_path / "backups"))  # while it runs
        assert taken.returncode == 0, taken.stderr
        assert "Backup of" in taken.stdout and "postgresql, pg_dump" in taken.stdout
        later = created(stack, "later")
        deleted = stack.acme.ok("DELETE", f"/vcdns/{kept}", 202)["operation"]["id"]
        assert stack.acme.wait(deleted)["state"] == "COMPLETED"

        refused = cli(stack.env, "db", "restore", "--yes", str(tmp_path / "backups"))
        assert refused.returncode == 1 and "the services still run" in refused.stderr

        stack.stack.stop()
        with psycopg.connect(url.replace("+psycopg", "")):  # a client still connected
            refused = cli(stack.env, "db", "restore", "--yes", str(tmp_path / "backups"))
        assert refused.returncode == 1
        assert "1 other client(s) are connected to the database" in refused.stderr
        with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
            conn.execute("CREATE TABLE so_added_later (id integer)")  # a newer schema's table
        restored = cli(stack.env, "db", "restore", "--yes", str(tmp_path / "backups"))
        assert restored.returncode == 0, restored.stderr
        assert "the databases they replaced are kept in" in restored.stdout
        with psycopg.connect(url.replace("+psycopg", "")) as conn:
            assert "so_added_later" not in pgtools.tables(conn.cursor())

        stack.stack.start(timeout=60)
        assert stack.acme.ok("GET", f"/vcdns/{kept}")["state"] == "ACTIVE"
        assert stack.acme.call("GET", f"/vcdns/{later}").status_code == 404
        ro = stack.client(RoClient)
        report = ro.reconciliations()
        assert [r.status for r in report] == ["DONE"], report
        deployment = ro.get_deployment(kept)
        assert deployment.status == "ACTIVE"
        assert {(a.deployment, a.vnf, a.action) for a in report[0].actions} == \
            {(kept, v.name, "adopt") for v in deployment.vnfs}
        stack.so_db = Database(url)
        try:
            with stack.so_db.sessions() as session:
                assert set(session.scalars(select(Instance.id).where(
                    Instance.state == "ACTIVE"))) == {kept}
            reserved, placed = so_view(stack, kept)
            assert reserved == per_host({v.name for v in deployment.vnfs}, placed)
        finally:
            stack.so_db.dispose()


def test_restore_refused_while_a_process_has_a_sqlite_database_open(tmp_path, monkeypatch):
    monkeypatch.setenv("CDNAAS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("CDNAAS_DATABASE_URL", raising=False)
    env = {"CDNAAS_STATE_DIR": str(tmp_path / "state")}
    assert cli(stacks.child_environment({**env, "CDNAAS_DATABASE_URL": None}),
               "db", "upgrade").returncode == 0
    path, _manifest = backup.take()
    holder = subprocess.Popen(  # pylint: disable=consider-using-with
        [sys.executable, "-c", "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1]); "
         "c.execute('SELECT 1 FROM so_regions').fetchall(); print('open', flush=True); "
         "time.sleep(60)", str(tmp_path / "state" / "so.db")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(BackupError, match=f"processes {holder.pid} have the databases open: "
                                              "stop the services"):
            backup.restore(path)
    finally:
        holder.kill()
        holder.wait()
    assert backup.restore(path)["before"] is not None
