"""A service whose database cannot be reached answers 503 with a Retry-After (nothing was
done; try again), never an internal error; the customer API relays a peer's 503 as it is.
The database is a real PostgreSQL address where nothing listens (a server restarting).

Its tests that start no process are in tests/unit/test_database_outage_units.py (the unit
tier)."""
import pytest

from cdnaas.api.app import create_app as create_api
from cdnaas.common.ports import free_loopback_ports
from cdnaas.db.engine import Database
from cdnaas.so.app import create_app as create_so
from tests.support.auth import signed


@pytest.fixture
def unreachable():
    database = Database(f"postgresql+psycopg://cdnaas@127.0.0.1:{free_loopback_ports(1)[0]}/so")
    yield database
    database.dispose()


def assert_unavailable(response, service):
    assert response.status_code == 503, response.data[:300]
    assert response.headers["Retry-After"] == "2"
    error = response.json["error"]
    assert error["title"] == "Service unavailable"
    assert f"the {service} service cannot reach its database right now" in error["message"]
    assert "try again" in error["message"]


def test_so_without_its_database_answers_503_to_a_read_and_a_change(unreachable):
    client = signed(create_so(unreachable, background=False).test_client())
    assert_unavailable(client.get("/so/v1/instances"), "so")
    assert_unavailable(client.delete("/so/v1/instances/0d1f8a0e-5d8c-4d7a-9a8e-3b7c8c9d0e1f"),
                       "so")


def test_the_api_without_its_database_answers_503_before_any_token_check(unreachable):
    client = create_api(unreachable).test_client()
    assert_unavailable(client.get("/api/v1/vcdns", headers={"Authorization": "Bearer " + "x" * 40}),
                       "api")
