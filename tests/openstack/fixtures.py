"""pytest fixtures running the ``openstack`` VIM driver against the mini cloud.

- ``minicloud`` (session): claims the mini cloud (:func:`minicloud.claim`: ``start`` installs
  what is missing, idempotent) and stops it at the end if this test run started
  it. Under pytest-xdist the workers share one cloud: a lock serialises the start
  and the last worker out stops it. A cloud already running before the tests
  (a developer's) is used and left running.
- ``openstack_env``: this test's environment: ``OS_CLIENT_CONFIG_FILE``,
  ``OS_CLOUD=minicloud`` and an owner of its own (``CDNAAS_OS_OWNER``), so the
  ``cleanup(set())`` of one test never touches another test's vCDNs.
- ``fail_host_openstack`` / ``origin_openstack``: what the driver contract test
  (``tests/system/test_vim_contract.py``) asks of each driver. ``fail(host)`` disables
  the nova-compute service of the zone the host's region maps to (``<region>-az``),
  so a server placed there really fails to schedule (NoValidHost); it is enabled
  again after the test.
- ``minicloud_faults``: faults of the mini cloud's services at the test's own resources
  only: ``.vip_deallocation(lb_id, fault)`` (:meth:`minicloud.Cloud.fault_vip_deallocation`:
  deleting that balancer fails or stops); taken back after the test.
- ``minicloud_outage``: ``.stop(name)`` stops one of the mini cloud's APIs (e.g.
  ``barbican``) as a service that dies, ``.start(name)`` starts it again; what is still
  stopped is started again, and answers, after the test.
- ``_minicloud_log_marks`` (autouse) and the ``pytest_runtest_makereport`` hook: a failed
  test on the mini cloud reports the errors its services logged while it ran.
- ``_openstack_contract_env`` (autouse): gives a contract test parametrized with
  ``driver_name=openstack`` the mini cloud before its ``driver`` fixture runs.
- ``designate_zone`` (module): an operator zone of its own for the module's tests (made
  by the ``designate`` publisher's ``ensure_zone``, deleted after them);
  ``zone_server_designate``: the zone publishers' contract (``tests/system/test_zone_contract.py``)
  on it, served by the mini cloud's BIND.

Use: ``from tests.openstack.fixtures import *  # noqa`` in a conftest or test module.
"""
import contextlib
import os
import sys
import types
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import configs

__all__ = [
    "_openstack_contract_env",
    "admin_conn",
    "caches_here_env",
    "designate_zone",
    "fail_host_openstack",
    "minicloud",
    "minicloud_faults",
    "minicloud_outage",
    "minicloud_sql",
    "openstack_env",
    "origin_openstack",
    "pytest_collection_modifyitems",
    "pytest_runtest_makereport",
    "_minicloud_log_marks",
    "traffic_openstack",
    "zone_server_designate",
]

BASE = Path(os.environ.get("CDNAAS_MINICLOUD_DIR") or "/opt/cdnaas-minicloud")
#: where the mini cloud's services log (``minicloud.Cloud.logs``)
LOGS = BASE / "run/logs"
#: lines of a service's log a failed test reports at most
LOGGED_ERRORS = 40
_LOG_MARKS = pytest.StashKey[dict]()
#: the origin of contract SIGs: TEST-NET-1 (the fake servers never fetch from it)
ORIGIN = {"scheme": "http", "host": "192.0.2.10", "port": 8080}
#: parameters whose value puts a test on the mini cloud (beside the ``minicloud`` fixture)
MINICLOUD_PARAMS = {"zone": "designate", "driver_name": "openstack"}
#: the mini cloud's BIND, where Designate's zones are served
BIND = (configs.HOST, configs.PORTS["bind"])


@pytest.fixture(scope="session")
def minicloud():
    """Path of the mini cloud's clouds.yaml, the cloud running for the whole session."""
    if os.geteuid() != 0:
        pytest.skip("the mini OpenStack needs root (apt packages, its own MariaDB and RabbitMQ)")
    import minicloud as script
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid-{os.getpid()}"
    me = f"{run_id}-{os.getpid()}"
    script.claim(run_id, me)
    yield BASE / "clouds.yaml"
    script.release(run_id, me)


@pytest.fixture
def openstack_env(minicloud, monkeypatch):
    """This test's cloud (``minicloud``) and owner; returns the owner."""
    owner = f"test-{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(minicloud))
    monkeypatch.setenv("OS_CLOUD", "minicloud")
    monkeypatch.delenv("CDNAAS_OS_CLOUD", raising=False)
    monkeypatch.setenv("CDNAAS_OS_OWNER", owner)
    monkeypatch.setenv("CDNAAS_OS_POLL_INTERVAL", "0.25")  # the waits end sooner
    return owner


@pytest.fixture
def admin_conn(minicloud):
    """An openstacksdk connection as the mini cloud's admin (to look and to inject failures)."""
    from openstack import connection
    conn = connection.Connection(config=_config(minicloud))
    yield conn
    conn.close()


def _config(clouds_yaml):
    from openstack import config as os_config
    return os_config.OpenStackConfig(config_files=[str(clouds_yaml)]).get_one("minicloud-admin")


@pytest.fixture
def fail_host_openstack(openstack_env, admin_conn):
    """``fail(host)``: the compute hosts of ``<region>-az`` (region: ``host`` up to ``-host-``)
    stop taking servers (their nova-compute services are disabled) until the test ends."""
    disabled = []

    def fail(host):
        zone = host.split("-host-")[0] + "-az"
        for compute in [h for h, z in configs.COMPUTE_HOSTS if z == zone]:
            for service in admin_conn.compute.services(binary="nova-compute", host=compute):
                admin_conn.compute.disable_service(service,
                                                   disabled_reason="cdnaas test: " + host)
                disabled.append(service)
    yield fail
    for service in disabled:
        admin_conn.compute.enable_service(service)


@pytest.fixture
def minicloud_sql(minicloud):
    """``sql(statement)`` run as root in the mini cloud's MariaDB: to stand in for what
    only a peer outside it would write (e.g. a provider's balancer statistics)."""
    import minicloud as script
    return script.Cloud(BASE).sql


@pytest.fixture
def minicloud_faults(minicloud):
    """``.vip_deallocation(lb_id, fault)``: see the module's docstring."""
    import minicloud as script
    cloud, asked = script.Cloud(BASE), set()

    def vip_deallocation(lb_id, fault):
        asked.add(lb_id)
        cloud.fault_vip_deallocation(lb_id, fault)
    yield types.SimpleNamespace(vip_deallocation=vip_deallocation)
    for lb_id in asked:
        cloud.fault_vip_deallocation(lb_id, None)


@pytest.fixture
def minicloud_outage(minicloud):
    """``.stop(name)``: the mini cloud's API ``name`` stops; ``.start(name)`` starts it
    again and returns once it answers (done after the test for what is still stopped)."""
    import minicloud as script
    cloud = script.Cloud(BASE)
    stopped = []

    def stop(name):
        stopped.append(name)
        cloud.stop_api(name)
    yield types.SimpleNamespace(stop=stop, start=cloud.start_api)
    for name in stopped:
        cloud.start_api(name)  # nothing to do for one running again


@pytest.fixture
def origin_openstack(openstack_env):
    return dict(ORIGIN)


@pytest.fixture
def caches_here_env(openstack_env, monkeypatch):
    """The mini cloud, for vCDNs whose caches run here (:class:`caches_here.CachesHere`):
    their networks from a pool this machine routes nowhere else, which is also the
    management prefix (RO reads and purges the caches from ``.1`` of each subnet)."""
    from caches_here import unrouted_pool
    pool = unrouted_pool()
    monkeypatch.setenv("CDNAAS_OS_POOL", pool)
    monkeypatch.setenv("CDNAAS_OS_MANAGEMENT_CIDR", pool)
    return pool


@pytest.fixture
def traffic_openstack(caches_here_env, admin_conn):
    """The driver contract's viewers: ``serve(deployment)`` runs the caches of
    ``deployment`` here (:class:`caches_here.CachesHere`: the mini cloud's servers boot no
    guest) until the test ends, ``make(deployment)`` sends three viewer requests to each."""
    from caches_here import CachesHere
    with contextlib.ExitStack() as running:
        serving = {}

        def serve(deployment):
            serving[deployment.deployment_id] = running.enter_context(
                CachesHere(admin_conn, deployment, (ORIGIN["host"], ORIGIN["port"])))

        def make(deployment):
            caches = serving[deployment.deployment_id]
            for index, cache in enumerate(caches.caches):
                for _ in range(3):
                    assert caches.fetch(cache, "/objects/small",
                                        f"10.{index + 1}.0.77")[0] == 200
        yield types.SimpleNamespace(serve=serve, make=make)


@pytest.fixture(autouse=True)
def _openstack_contract_env(request):
    """A test parametrized with ``driver_name=openstack`` gets the mini cloud first.

    Under ``--dist loadgroup`` a test on the mini cloud must carry its group in its
    node id (``...@openstack``): without it pytest-xdist schedules it beside the
    others, and one test's disabled compute host fails another's deployment.
    """
    if (getattr(request.config.option, "loadgroup", False) and on_minicloud(request.node)
            and not request.node.nodeid.endswith("@" + minicloud_group(request.node))):
        pytest.fail("pytest-xdist did not group this mini cloud test (no @openstack in its "
                    "node id): use the pytest versions setup.py names")
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("driver_name") == "openstack":
        request.getfixturevalue("openstack_env")


def on_minicloud(item):
    """Whether test ``item`` runs on the mini cloud (and so in its xdist group): it uses
    the ``minicloud`` fixture, or is parametrized with a driver that gets it at run time
    (:data:`MINICLOUD_PARAMS`)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return "minicloud" in getattr(item, "fixturenames", ()) or any(
        params.get(name) == value for name, value in MINICLOUD_PARAMS.items())


@pytest.fixture(scope="module")
def designate_zone(minicloud):
    """A zone of the mini cloud's Designate for this module's tests (in project
    ``cdnaas``, name ``<random>.minicloud.example``): the tests' publisher makes it
    (``ensure_zone``); it is deleted after them, with what they left in it."""
    from openstack import connection
    from openstack import config as os_config
    name = f"z{uuid.uuid4().hex[:8]}.minicloud.example"
    yield name
    conn = connection.Connection(config=os_config.OpenStackConfig(
        config_files=[str(minicloud)]).get_one("minicloud"))
    for zone in conn.dns.zones(name=f"{name}."):
        conn.dns.delete_zone(zone)
    conn.close()


@pytest.fixture
def zone_server_designate(openstack_env, designate_zone, monkeypatch):
    """The ``designate`` zone publisher on :func:`designate_zone`, and BIND serving it
    (a change is served once ``publish`` returns: it waits for ACTIVE)."""
    from cdnaas.ro import zones
    from tests.support.zones import ZoneServer
    monkeypatch.setenv("CDNAAS_DNS_DOMAIN", designate_zone)
    monkeypatch.setenv("CDNAAS_DESIGNATE_CLOUD", "minicloud")
    return ZoneServer(zones.load("designate"), BIND)


@pytest.fixture(autouse=True)
def _minicloud_log_marks(request):
    """Where the mini cloud's logs ended as a test on it (one of its group) started."""
    if on_minicloud(request.node):
        request.node.stash[_LOG_MARKS] = {p.name: p.stat().st_size for p in LOGS.glob("*.log")}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test on the mini cloud carries, as a section of its report, the errors the
    cloud's services logged since it started: what an operator would read first."""
    outcome = yield
    report = outcome.get_result()
    marks = item.stash.get(_LOG_MARKS, None)
    if report.failed and marks is not None:
        errors = _logged_errors(marks)
        if errors:
            report.sections.append(("errors the mini cloud logged during the test", errors))


def _logged_errors(marks):
    """The ERROR/CRITICAL lines of each service's log past ``marks`` (name -> offset)."""
    found = []
    for path in sorted(LOGS.glob("*.log")):
        with open(path, "rb") as log:
            log.seek(marks.get(path.name, 0))
            lines = [line for line in log.read().decode("utf-8", "replace").splitlines()
                     if " ERROR " in line or " CRITICAL " in line]
        found += [f"{path.stem}: {line}" for line in lines[-LOGGED_ERRORS:]]
    return "\n".join(found)


def minicloud_group(item):
    """The xdist group of mini-cloud test ``item`` (see :func:`pytest_collection_modifyitems`)."""
    return "openstack-services" if item.get_closest_marker("minicloud_services") else "openstack"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Every test on the mini cloud in a pytest-xdist group (``--dist loadgroup``), first,
    so the group is marked before pytest-xdist's own hook turns the marks into node ids.

    Tests that use the compute hosts share them (the failure injection disables them, an
    outage stops Barbican or Octavia) and run one after another in group ``openstack``, the
    run's longest, which pytest-xdist's ``loadgroup`` hands out first (it schedules the
    groups with the most tests first). Tests marked ``minicloud_services`` (their module
    says so) use only Keystone and Designate, each with projects, regions or zones of its
    own, and touch neither the compute hosts nor the services the fault fixtures stop: their group
    ``openstack-services``, the second largest, runs beside it on the other worker."""
    for item in items:
        if on_minicloud(item):
            item.add_marker(pytest.mark.xdist_group(minicloud_group(item)))
