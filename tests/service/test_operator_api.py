"""The routes the operator console reads, on a five-process stack (noop driver): who the
caller is, the calibration jobs' list and a job's curves, and a tenant's monthly statement.
Each answers operators, refuses tenants (403) and names the field of bad input."""
import datetime as dt

import pytest

from tests.support.api import vcdn_body
from tests.support.im import FLAVOR, eventually, modelled_stack


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with modelled_stack(tmp_path_factory.mktemp("operator-api")) as running:
        yield running


def this_month():
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m")


def test_whoami_tells_an_operator_from_a_tenant(stack):
    assert stack.operator.ok("GET", "/whoami") == {
        "tenant": "admin", "user": "default", "roles": ["admin", "member", "reader"],
        "system": True, "operator": True}
    assert stack.acme.ok("GET", "/whoami") == {
        "tenant": "acme", "user": "default", "roles": ["member", "reader"], "system": False,
        "operator": False}
    assert stack.acme.call("GET", "/whoami", headers={"Authorization": "Bearer nope"}).status_code == 401


def test_calibrations_are_listed_with_their_progress(stack):
    started = stack.operator.ok("POST", "/calibrations", 202,
                                json={"flavor": FLAVOR, "host": "eu-1", "vcpus": [1],
                                      "max_seconds": 60})
    listed = stack.operator.ok("GET", "/calibrations")["calibrations"]
    mine = next(job for job in listed if job["id"] == started["id"])
    assert mine["flavor"] == FLAVOR and mine["host"] == "eu-1" and mine["vcpus"] == [1]
    assert mine["started_at"] == started["created_at"] and 0 <= mine["progress"] <= 1

    def ended():
        job = next(j for j in stack.operator.ok("GET", "/calibrations")["calibrations"]
                   if j["id"] == started["id"])
        return job if job["ended_at"] else None
    job = eventually(ended, "the calibration's end", timeout=120)
    assert job["state"] in ("COMPLETED", "FAILED") and job["ended_at"] >= job["started_at"]
    assert job["progress"] == 1.0 or job["state"] == "FAILED"
    assert stack.acme.call("GET", "/calibrations").status_code == 403


def test_a_tenant_sees_no_calibration(stack):
    answer = stack.acme.call("GET", "/calibrations/abc123")
    assert answer.status_code == 403, answer.text
    answer = stack.operator.call("GET", "/calibrations/not-hex")
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "job_id"


def test_a_tenants_statement_prices_each_vcdn_of_the_month(stack):
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body("billed"))
    assert stack.acme.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
    month = this_month()
    statement = stack.operator.ok("GET", f"/tenants/acme/statements/{month}")
    assert statement["tenant"] == "acme" and statement["month"] == month
    assert statement["from"].startswith(f"{month}-01T00:00:00")
    line = next(v for v in statement["vcdns"] if v["name"] == "billed")
    assert line["flavor"] == "static" and line["price"]["currency"] == "EUR"
    assert statement["total"]["price"]["amount"] == round(
        sum(v["price"]["amount"] for v in statement["vcdns"]), 2)
    assert statement["total"]["vcpu_hours"] >= line["vcpu_hours"]
    # globex leased nothing: an empty statement, priced 0 in the table's currency
    empty = stack.operator.ok("GET", f"/tenants/globex/statements/{month}")
    assert empty["vcdns"] == [] and empty["total"]["price"] == {"amount": 0, "currency": "EUR"}
    # a month before the vCDN was made has no line for it
    assert stack.operator.ok("GET", "/tenants/acme/statements/2020-01")["vcdns"] == []


@pytest.mark.parametrize("path, status, field", [
    ("/tenants/acme/statements/2026-13", 400, "month"),
    ("/tenants/acme/statements/june", 400, "month"),
    ("/tenants/acme/statements/2999-01", 422, "month"),
    ("/tenants/nobody/statements/2026-01", 404, "tenant"),
])
def test_a_bad_statement_request_names_its_field(stack, path, status, field):
    answer = stack.operator.call("GET", path)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["field"] == field


def test_a_tenant_reads_no_statement_not_even_its_own(stack):
    answer = stack.acme.call("GET", f"/tenants/acme/statements/{this_month()}")
    assert answer.status_code == 403, answer.text
