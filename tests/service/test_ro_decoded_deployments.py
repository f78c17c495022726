"""RO decodes each deployment record once per version (:mod:`cdnaas.ro.decoded_deployments`):
the readings and placement the Instance Manager asks for every pass, against the noop
driver, on SQLite and PostgreSQL."""
import concurrent.futures

import pytest

from cdnaas.common import errors
from cdnaas.db import migrate
from cdnaas.db.engine import Database
from cdnaas.ro.models import DeploymentRecord
from cdnaas.ro.service import DeploymentService
from cdnaas.ro.vim.base import Deployment
from cdnaas.ro.vim.noop import NoopDriver
from tests.support.sigs import sample_sig

WAIT_SECONDS = 10


@pytest.fixture
def service(database_url):
    """A :class:`DeploymentService` on the noop driver over a migrated database."""
    migrate.upgrade("ro", database_url)
    found = DeploymentService(Database(database_url), NoopDriver())
    yield found
    found.shutdown()
    found.database.dispose()


@pytest.fixture
def decoded(monkeypatch):
    """The deployment ids :meth:`Deployment.from_dict` decodes from now on, in order."""
    ids = []
    decode = Deployment.from_dict.__func__

    def counting(cls, data):
        ids.append(data["deployment_id"])
        return decode(cls, data)
    monkeypatch.setattr(Deployment, "from_dict", classmethod(counting))
    return ids


def settle(service, sig):
    """Deploy or update ``sig``; return its representation once at rest (ACTIVE)."""
    service.put(sig["vcdn_id"], sig)
    view = service.get(sig["vcdn_id"], wait=WAIT_SECONDS)
    assert view["status"] == "ACTIVE", view
    return view


def hosts_of(service, deployment_id):
    """``{VNF: host}`` of ``deployment_id`` as its readings' figures say."""
    answer, = service.readings_many([{"id": deployment_id}])
    return {v["name"]: v["host"] for v in answer["metrics"]["vnfs"]}


def placed(service):
    """:meth:`DeploymentService.placement` with each host's VNFs sorted."""
    return {host: sorted(vnfs) for host, vnfs in service.placement().items()}


def expected_placement(service):
    """What the placement holds, worked out from the deployments' representations."""
    carried = {}
    for view in service.list(live=True):
        for vnf in view["vnfs"]:
            carried.setdefault(vnf["host"], []).append(f"{view['id']}/{vnf['name']}")
    return {host: sorted(vnfs) for host, vnfs in carried.items()}


def test_an_unchanged_record_is_decoded_once(service, decoded):
    for vcdn_id in ("vcdn-1", "vcdn-2"):
        settle(service, sample_sig(vcdn_id))
    decoded.clear()
    asked = [{"id": "vcdn-2"}, {"id": "vcdn-1", "cursor": None}]
    first = service.readings_many(asked)
    assert [a["id"] for a in first] == ["vcdn-2", "vcdn-1"]
    assert all(a["health"]["healthy"] for a in first)
    assert sorted(decoded) == ["vcdn-1", "vcdn-2"]
    for _ in range(3):
        assert placed(service) == expected_placement(service)
        assert [a["health"] for a in service.readings_many(asked)] == \
            [a["health"] for a in first]
    assert sorted(decoded) == ["vcdn-1", "vcdn-2"]


def test_a_record_written_again_is_decoded_again(service, decoded):
    settle(service, sample_sig("vcdn-1"))
    settle(service, sample_sig("vcdn-2"))
    assert hosts_of(service, "vcdn-1")["north-cache-2"] == "north-host-2"
    assert "vcdn-1/north-cache-2" in placed(service)["north-host-2"]
    moved = sample_sig("vcdn-1")
    next(v for v in moved["vnfs"] if v["name"] == "north-cache-2")["host"] = "north-host-9"
    settle(service, moved)  # the update's outcome is written by DeploymentService._save
    decoded.clear()
    assert hosts_of(service, "vcdn-1")["north-cache-2"] == "north-host-9"
    assert placed(service) == expected_placement(service)
    assert placed(service)["north-host-9"] == ["vcdn-1/north-cache-2"]
    assert "vcdn-1/north-cache-2" not in placed(service)["north-host-2"]
    assert decoded == ["vcdn-1"]  # vcdn-2 did not change


def test_a_deleted_record_leaves_placement_and_memory(service, decoded):
    for vcdn_id in ("vcdn-1", "vcdn-2", "vcdn-3"):
        settle(service, sample_sig(vcdn_id))
    service.readings_many([{"id": v} for v in ("vcdn-1", "vcdn-2", "vcdn-3")])
    held = service.decoded._versions  # pylint: disable=protected-access
    assert set(held) == {"vcdn-1", "vcdn-2", "vcdn-3"}
    for vcdn_id in ("vcdn-1", "vcdn-2"):
        service.delete(vcdn_id)
        assert service.get(vcdn_id, wait=WAIT_SECONDS)["status"] == "DELETED"
    answer, = service.readings_many([{"id": "vcdn-1"}])  # a look-up of it forgets it
    assert answer["error"]["status"] == 409
    assert set(held) == {"vcdn-2", "vcdn-3"}
    carried = placed(service)  # so does a look-up of every live record
    assert set(held) == {"vcdn-3"}
    assert carried == expected_placement(service)
    assert {vnf.split("/")[0] for vnfs in carried.values() for vnf in vnfs} == {"vcdn-3"}


def test_readings_refuse_as_before(service):
    settle(service, sample_sig("vcdn-1"))

    def refusal(deployment_id):
        with pytest.raises(errors.CdnaasError) as refused:
            service.readings(deployment_id)
        answer, = service.readings_many([{"id": deployment_id}])
        assert answer == {"id": deployment_id, "error": {"status": refused.value.status,
                                                         "message": refused.value.message}}
        return answer["error"]

    assert refusal("nope") == {"status": 404, "message": "no deployment nope"}
    service.readings_many([{"id": "vcdn-1"}])  # its version decoded and held
    for column, value, message in (
            ("status", "ERROR", "deployment vcdn-1 is ERROR; readings are taken only while it "
                                "is ACTIVE"),
            ("driver", "openstack", "deployment vcdn-1 was built by VIM driver openstack, this "
                                    "resource orchestrator runs noop")):
        with service.database.transaction() as session:  # updated_at left as it was
            record = session.get(DeploymentRecord, "vcdn-1")
            record.status, record.driver = "ACTIVE", "noop"
            setattr(record, column, value)
        assert refusal("vcdn-1") == {"status": 409, "message": message}


def test_threads_share_what_is_decoded(service):
    for vcdn_id in ("vcdn-1", "vcdn-2"):
        settle(service, sample_sig(vcdn_id))
    asked = [{"id": "vcdn-1"}, {"id": "vcdn-2"}, {"id": "nope"}]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        readings = list(pool.map(lambda _: service.readings_many(asked), range(12)))
        placements = list(pool.map(lambda _: placed(service), range(12)))
    assert all([a["id"] for a in r] == ["vcdn-1", "vcdn-2", "nope"] for r in readings)
    assert all("health" in r[0] and "health" in r[1] for r in readings)
    assert all(r[2]["error"]["status"] == 404 for r in readings)
    assert all(p == expected_placement(service) for p in placements)
