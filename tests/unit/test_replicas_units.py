"""Two replicas of every service on one PostgreSQL (issue 15, item 4): the tests that start no
process (the unit tier); the others, and what the module covers, are in
tests/service/test_replicas.py."""
import datetime as dt

from sqlalchemy.exc import OperationalError

from cdnaas.common.timeutil import utcnow
from cdnaas.db import migrate
from cdnaas.db.engine import Database
from cdnaas.ro.models import DeploymentRecord
from cdnaas.ro.service import DeploymentService
from cdnaas.ro.vim.noop import NoopDriver
from cdnaas.so import operations, states
from cdnaas.so.models import Host, Operation, Region
from tests.support.sigs import sample_sig
from tests.unit.test_so_retry import FakeRo, add_instance, wait_ended


def operation(stack, operation_id):
    """The SO's record of ``operation_id`` (``stack``: a running stack or a database)."""
    database = getattr(stack, "db", stack)
    with database.sessions() as session:
        return session.get(Operation, operation_id)


# -- two SO runners in one process, on PostgreSQL -----------------------------------------------


def so_tables(url):
    """The SO's tables at ``url``, with the regions and hosts of :func:`sample_sig`."""
    migrate.upgrade("so", url)
    database = Database(url)
    with database.transaction() as session:
        session.add_all([Region(name=r, client_prefixes=[]) for r in ("north", "south")])
        session.flush()
        session.add_all([Host(name=f"{r}-host-{i}", region_name=r, vcpus=16, ram_mb=65536)
                         for r in ("north", "south") for i in (1, 2, 3)])
    return database


def test_work_that_could_not_write_its_end_is_taken_over_by_its_own_replica(tmp_path,
                                                                           monkeypatch):
    """Work whose end could not be written (the database restarting then) leaves its row
    busy and claimed by this replica, unrenewed: once the lease ran out the replica's
    own watcher takes it over, as a peer's, not only its next start. Rows whose work
    still runs here (held) are left alone."""
    monkeypatch.setenv("CDNAAS_LEASE_SECONDS", "600")
    database = so_tables(f"sqlite:///{tmp_path / 'so.db'}")
    orphan, running = (add_instance(database, states.INSTANTIATE, sample_sig(name),
                                    states.DEPLOYING) for name in ("orphan", "running"))
    runner = operations.OperationRunner(database, ro_client=FakeRo())
    try:
        with database.transaction() as session:
            for operation_id in (orphan, running):
                row = session.get(Operation, operation_id)
                row.claimed_by = runner.claims.owner
                row.claim_expires = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=1)
        runner.claims.hold(running)
        before = operation(database, running).state
        assert runner.take_over() == [orphan]
        assert wait_ended(database, orphan)[0] == "COMPLETED"
        assert operation(database, running).state == before  # not resumed a second time
    finally:
        runner.shutdown()
        database.dispose()


def test_on_sqlite_a_starting_so_takes_every_claim(tmp_path, monkeypatch):
    """SQLite is one process per service: at start every claim is a dead process's, while
    later looks still wait for leases to expire (the same code path as PostgreSQL's)."""
    monkeypatch.setenv("CDNAAS_LEASE_SECONDS", "600")
    database = so_tables(f"sqlite:///{tmp_path / 'so.db'}")
    operation_id = add_instance(database, states.INSTANTIATE, sample_sig("lite"),
                                states.DEPLOYING)
    with database.transaction() as session:
        claimed = session.get(Operation, operation_id)
        claimed.claimed_by = "elsewhere:1#0"
        claimed.claim_expires = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
    runner = operations.OperationRunner(database, ro_client=FakeRo())
    try:
        assert runner.take_over() == []
        assert runner.recover() == [operation_id]
        assert wait_ended(database, operation_id)[0] == "COMPLETED"
    finally:
        runner.shutdown()
        database.dispose()


def _database_gone():
    return OperationalError("SELECT 1", {}, Exception("server closed the connection "
                                                      "unexpectedly"))


def test_an_operation_the_database_left_midway_is_taken_over_not_failed(tmp_path, monkeypatch):
    """An operation whose runner met the database going away (a PostgreSQL restart: the
    30-minute soak's vCDN that stayed FAILED) is not over: it is neither FAILED nor held,
    and the replica's watcher takes it over once its claim runs out."""
    monkeypatch.setenv("CDNAAS_LEASE_SECONDS", "600")
    database = so_tables(f"sqlite:///{tmp_path / 'so.db'}")
    operation_id = add_instance(database, states.INSTANTIATE, sample_sig("restart"),
                                states.DEPLOYING)
    runner = operations.OperationRunner(database, ro_client=FakeRo())
    real_run = runner.run
    try:
        def run_until_the_database_goes(claimed):
            with database.transaction() as session:  # claimed, as run() does first
                row = session.get(Operation, claimed)
                runner.claims.take(row)
                row.state = states.PROCESSING
            raise _database_gone()
        monkeypatch.setattr(runner, "run", run_until_the_database_goes)
        runner._run_guarded(operation_id)  # pylint: disable=protected-access
        found = operation(database, operation_id)
        assert found.state == states.PROCESSING and found.claimed_by == runner.claims.owner
        monkeypatch.setattr(runner, "run", real_run)
        with database.transaction() as session:  # its lease ran out
            session.get(Operation, operation_id).claim_expires = \
                dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=1)
        assert runner.take_over() == [operation_id]
        assert wait_ended(database, operation_id)[0] == "COMPLETED"
    finally:
        runner.shutdown()
        database.dispose()


def test_ro_work_the_database_left_midway_is_not_marked_error(tmp_path):
    """RO's work on a deployment that met the database going away leaves its record as it
    was (busy, for the watcher to take over), not ERROR."""
    url = f"sqlite:///{tmp_path / 'ro.db'}"
    migrate.upgrade("ro", url)
    database = Database(url)
    service = DeploymentService(database, NoopDriver())
    try:
        with database.transaction() as session:
            session.add(DeploymentRecord(  # claimed by this replica, as its work holds it
                id="d-1", driver="noop", status="UPDATING", steps=[], created_at=utcnow(),
                sig=sample_sig("gone"), claimed_by=service.claims.owner,
                claim_expires=dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=60)))

        def work(_deployment_id):
            raise _database_gone()
        service._run("d-1", work)  # pylint: disable=protected-access
        with database.sessions() as session:
            record = session.get(DeploymentRecord, "d-1")
            assert (record.status, record.error) == ("UPDATING", None)
    finally:
        service.shutdown()
        database.dispose()
