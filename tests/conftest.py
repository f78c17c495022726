"""Shared fixtures: a database URL on each backend (SQLite and real PostgreSQL), a
sample origin on this machine, and a service key for apps run inside the test process."""
import os

import pytest

from cdnaas.common import service_auth
from cdnaas.origin.server import serve_in_thread
from tests.openstack import fixtures as minicloud_fixtures
from tests.openstack.fixtures import *  # noqa: F401,F403 (the mini cloud's fixtures)
from tests.support import postgres


#: modules of the ``unit`` tier (no process, no database server, no network); a module not
#: listed here or in SYSTEM_MODULES is ``service``, so a new slow module never slows the unit run
UNIT_MODULES = {
    "test_compose", "test_dimensioning", "test_im_flavor", "test_im_policy", "test_im_power",
    "test_im_qoe", "test_models", "test_placement", "test_portal", "test_qoe_video_plugin",
    "test_resizing", "test_settings", "test_so_retry", "test_spec_routes", "test_static_flavor",
    "test_traffic_logs", "test_webhook_units",
    "test_certificates", "test_ports", "test_acme_unit",
    "test_comforts_unit", "test_pipeline",
    "test_loadgen_agent",
    "test_delivery_registry",
    "test_cli_bodies",
    "test_policy",
    "test_zone_units",
    "test_backup_units",
    "test_layers",
    "test_token_cache",
}
#: modules of the ``system`` tier: root, namespaces, real nginx/dnsmasq, the mini OpenStack
SYSTEM_MODULES = {
    "test_crash", "test_im_local", "test_local_driver", "test_local_netns", "test_local_stack",
    "test_log_streaming",
    "test_openstack_driver", "test_status_private", "test_vim_contract", "test_vnf_rendering",
    "test_openstack_tls", "test_openstack_regions", "test_openstack_traffic", "test_vnf_image",
    "test_guest_supervision",
    "test_openstack_shield", "test_openstack_dns", "test_openstack_calibration",
    "test_dataplane",
    "test_flavor_packages", "test_sidr_checks",
    "test_usage",
    "test_tls", "test_acme", "test_acme_openstack",
    "test_local_update", "test_lossless_changes",
    "test_cache_rules", "test_purge", "test_origin_shield",
    "test_ranges",
    "test_access",
    "test_https_policy", "test_openstack_https_policy",
    "test_openstack_catalog",
    "test_openstack_identity",
    "test_openstack_zone_designate",
    "test_zone_contract", "test_zone_local",
    "test_compose_run",
    "test_vnf_health", "test_vnf_healing",
    "test_backup_local",
    "test_chaos",
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Mark every test with its tier (``pytest -m unit`` is the developer's fast loop), and
    group the mini cloud's tests (one hook per conftest: this one calls the mini cloud's,
    before pytest-xdist turns the group marks into node ids)."""
    minicloud_fixtures.pytest_collection_modifyitems(items)
    for item in items:
        module = item.module.__name__.rpartition(".")[2]
        tier = "unit" if module in UNIT_MODULES else \
            "system" if module in SYSTEM_MODULES else "service"
        item.add_marker(tier)


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
    # custom hostnames served as accepted unless a test checks them (tests/test_zone_local.py)
    os.environ.setdefault("CDNAAS_HOSTNAME_CHECK", "0")
    yield path


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
    each worker, so a run that grows shows which group is its critical path."""
    if not _WORKER_SECONDS or sum(_GROUP_SECONDS.values()) < 60:  # a run of pytest-xdist
        return
    terminalreporter.section("time per group and worker")
    for group, seconds in sorted(_GROUP_SECONDS.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{seconds / 60:6.1f} min  group {group or '(none)'}")
    for worker, seconds in sorted(_WORKER_SECONDS.items()):
        terminalreporter.write_line(f"{seconds / 60:6.1f} min  worker {worker}")


def pytest_sessionfinish(session, exitstatus):
    """The whole suite as root (``scripts/test`` sets ``CDNAAS_TESTS_NO_SKIPS``) fails when
    any test was skipped: a tool missing or a driver that cannot run would otherwise pass
    the run by skipping what it should have tested."""
    if not os.environ.get("CDNAAS_TESTS_NO_SKIPS") or hasattr(session.config, "workerinput"):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if not skipped:
        return
    reporter.section("skipped where the whole suite must run")
    for report in skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        reporter.write_line(f"{report.nodeid}: {reason}")
    if exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
