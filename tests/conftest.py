"""Shared fixtures: a database URL on each backend (SQLite and real PostgreSQL), a
sample origin on this machine, a service key for apps run inside the test process, and
the faults tests inject (:mod:`tests.support.faults`) in it and in what it starts."""
import os

import pytest

from cdnaas.common import service_auth
from cdnaas.origin.server import serve_in_thread
from tests.openstack import fixtures as minicloud_fixtures
from tests.openstack.fixtures import *  # noqa: F401,F403 (the mini cloud's fixtures)
from tests.support import faults, postgres


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Group the mini cloud's tests (one hook per conftest: this one calls the mini cloud's,
    before pytest-xdist turns the group marks into node ids). Each tier's folder marks its
    own tests (``tests/unit``, ``tests/service``, ``tests/system``: their conftest.py)."""
    minicloud_fixtures.pytest_collection_modifyitems(items)


@pytest.fixture(scope="session", autouse=True)
def service_key(tmp_path_factory):
    """A service key for the apps and clients of this test process (stacks make their own)."""
    folder = tmp_path_factory.mktemp("service-key")
    path = service_auth.ensure_key(folder / "service.key")
    os.environ["CDNAAS_SERVICE_KEY_FILE"] = str(path)
    os.environ["CDNAAS_SECRET_KEY_FILE"] = str(folder / "secrets.key")  # RO's, made by RO
    # entry points kept in memory unless a test asks for the local zone server (as the
    # noop VIM driver is the stacks' default): stacks and in-process ROs inherit it
    os.environ.setdefault("CDNAAS_ZONE_PUBLISHER", "noop")
    # custom hostnames served as accepted unless a test checks them (tests/system/test_zone_local.py)
    os.environ.setdefault("CDNAAS_HOSTNAME_CHECK", "0")
    yield path


@pytest.fixture(scope="session", autouse=True)
def injected_faults():
    """The faults of :mod:`tests.support.faults` installed here, and in every Python process
    the tests start (their ``sitecustomize``, first on ``PYTHONPATH``), each acting only
    while its ``CDNAAS_TEST_*`` variable is set."""
    faults.install()
    paths = [str(faults.STARTUP), *filter(None, [os.environ.get("PYTHONPATH")])]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)


@pytest.fixture(scope="session")
def postgres_admin_url():
    """Admin URL of a real PostgreSQL server (the machine's, or a throwaway one)."""
    with postgres.server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    """An empty database on each backend; tests using it run once per backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'cdnaas.db'}"
    else:
        admin = request.getfixturevalue("postgres_admin_url")
        with postgres.fresh_database(admin) as url:
            yield url


@pytest.fixture(scope="module")
def origin():
    """The sample origin listening on all addresses (the local driver's caches reach this
    machine at their bridge's gateway), allowed by the origin policy while it runs;
    ``origin.stats()`` counts fetches per path."""
    server, _thread = serve_in_thread("0.0.0.0", 0)
    with pytest.MonkeyPatch.context() as patch:  # the operator allows this machine's origin
        patch.setenv("CDNAAS_ORIGIN_ALLOW", "127.0.0.1")
        yield server
    server.shutdown()
    server.server_close()


#: seconds spent per xdist group (``@group`` in a node id) and per worker, for the summary
_GROUP_SECONDS = {}
_WORKER_SECONDS = {}


def pytest_runtest_logreport(report):
    """Add each test phase's duration to its group's and its worker's totals."""
    tail = report.nodeid.rpartition("@")[2]
    group = tail if "@" in report.nodeid and not {"]", "/"} & set(tail) else None
    worker = getattr(report, "node", None)
    _GROUP_SECONDS[group] = _GROUP_SECONDS.get(group, 0.0) + report.duration
    if worker is not None:
        name = worker.gateway.id
        _WORKER_SECONDS[name] = _WORKER_SECONDS.get(name, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    """Where a whole run's time went: each xdist group (run serially on one worker) and
    each worker, so a run that grows shows which group is its critical path; and the
    tests skipped where none may be (:func:`pytest_sessionfinish`)."""
    skipped = _forbidden_skips(terminalreporter.config)
    if skipped:
        terminalreporter.section("skipped where the whole suite must run")
        for report in skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) \
                else report.longrepr
            terminalreporter.write_line(f"{report.nodeid}: {reason}")
    if not _WORKER_SECONDS or sum(_GROUP_SECONDS.values()) < 60:  # a run of pytest-xdist
        return
    terminalreporter.section("time per group and worker")
    for group, seconds in sorted(_GROUP_SECONDS.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{seconds / 60:6.1f} min  group {group or '(none)'}")
    for worker, seconds in sorted(_WORKER_SECONDS.items()):
        terminalreporter.write_line(f"{seconds / 60:6.1f} min  worker {worker}")


def _forbidden_skips(config):
    """The reports of the tests skipped in a run that must skip none (``CDNAAS_TESTS_NO_SKIPS``
    set), as the controller of a pytest-xdist run (or the one process) saw them."""
    if not os.environ.get("CDNAAS_TESTS_NO_SKIPS") or hasattr(config, "workerinput"):
        return []
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    return reporter.stats.get("skipped", []) if reporter else []


def pytest_sessionfinish(session, exitstatus):
    """The whole suite as root (``scripts/test`` sets ``CDNAAS_TESTS_NO_SKIPS``) fails when
    any test was skipped: a tool missing or a driver that cannot run would otherwise pass
    the run by skipping what it should have tested (the summary lists them)."""
    if _forbidden_skips(session.config) and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
