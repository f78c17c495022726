"""The operator console of the portal in a real headless Chromium, against a real five-process
stack on the noop driver: an operator signs in and reads regions and hosts with their watts,
registers, deprecates and deletes a template version, reads a tenant's quotas and monthly
statement, runs and watches a calibration, and reads the quality board and a vCDN's
decisions; a tenant never sees the console. Each is checked against the API afterwards.
``CDNAAS_PORTAL_SCREENSHOTS=docs`` saves ``docs/portal-console.png``.
"""
import datetime as dt
import re

import pytest
import yaml
from playwright.sync_api import expect

from tests.support.api import TEMPLATE, vcdn_body
from tests.support.browser import browser, page, screenshot, sign_in  # noqa: F401 (fixtures)
from tests.support.im import FLAVOR, eventually, modelled_stack, set_viewers

OPERATOR = "signed in: operator admin"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """A populated stack (flavors ``static`` and ``im-video``; tenants acme and globex)."""
    with modelled_stack(tmp_path_factory.mktemp("console")) as running:
        yield running


def row_of(scope, *names):
    """The row of ``scope`` with a cell named each of ``names``."""
    rows = scope.get_by_role("row")
    for name in names:
        rows = rows.filter(has=scope.page.get_by_role("cell", name=name, exact=True))
    return rows


def console_tab(page, name):
    page.get_by_role("tab", name=name).click()


def test_a_tenant_never_sees_the_console(page, stack):
    sign_in(page, stack.acme)
    expect(page.get_by_role("heading", name="Your vCDNs")).to_be_visible()
    expect(page.get_by_role("heading", name="Operator console")).to_be_hidden()
    expect(page.get_by_role("tab", name="Regions and hosts")).to_be_hidden()


def test_an_operator_sees_regions_and_hosts_with_their_watts(page, stack):
    def measured():
        hosts = stack.operator.ok("GET", "/hosts/power")["hosts"]
        return hosts if all(h["watts"] is not None for h in hosts) else None
    hosts = {h["name"]: h for h in eventually(measured, "the IM's first pass over the hosts")}
    sign_in(page, stack.operator, OPERATOR)
    expect(page.get_by_role("heading", name="Operator console")).to_be_visible()
    expect(page.get_by_role("heading", name="Your vCDNs")).to_be_hidden()  # the customer's view
    table = page.get_by_role("table", name="Hosts")
    eu1 = row_of(table, "eu-1")
    expect(eu1).to_contain_text("eu-west")
    watts = eu1.get_by_role("cell").nth(7)
    expect(watts).to_have_text(re.compile(r"^\d[\d,]*(\.\d)?$"))
    shown = float(watts.inner_text().replace(",", ""))
    assert abs(shown - hosts["eu-1"]["watts"]) < 50  # the IM's figure (it moves a little per pass)
    expect(eu1.get_by_role("progressbar", name="Utilisation of eu-1")).to_have_count(1)
    regions = page.get_by_role("table", name="Regions and their capacity")
    expect(row_of(regions, "eu-west")).to_contain_text("10.1.0.0/16")
    expect(row_of(regions, "eu-west").get_by_role("cell").nth(4)).to_have_text("2")  # eu-1, eu-2
    expect(page.locator("#op-power-total")).to_contain_text(f"{len(hosts)} hosts drawing")
    screenshot(page, "console", page.locator("#console"))


def test_an_operator_registers_deprecates_and_deletes_a_template_version(page, stack):
    sign_in(page, stack.operator, OPERATOR)
    console_tab(page, "Flavors and templates")
    form = page.get_by_role("form", name="Register a template version")
    broken = {"flavor": "console-static", "version": 1, "technology": "vm", "vnfs": {}}
    form.get_by_label("Template (YAML or JSON").fill(yaml.safe_dump(broken))
    form.get_by_role("button", name="Register").click()
    problems = page.get_by_role("list", name="Problems of the template")
    expect(problems).to_be_visible()
    expect(problems).to_contain_text("vnfs")  # SIDR's checks, each naming its field
    assert not [t for t in stack.operator.ok("GET", "/templates")["templates"]
                if t["flavor"] == "console-static"]

    document = yaml.safe_load(TEMPLATE.read_text())
    document.update(flavor="console-static", description="made in the console")
    form.get_by_label("Template (YAML or JSON").fill(yaml.safe_dump(document))
    form.get_by_role("button", name="Register").click()
    expect(page.locator("#operation")).to_contain_text("Registered console-static v1")
    expect(problems).to_be_hidden()
    versions = page.get_by_role("table", name="Template versions")
    row = row_of(versions, "console-static")
    expect(row).to_contain_text("offered")

    page.get_by_role("button", name="Deprecate console-static v1").click()
    expect(row).to_contain_text("deprecated")
    stored = stack.operator.ok("GET", "/templates?flavor=console-static")["templates"]
    assert [t["deprecated"] for t in stored] == [True]
    page.get_by_role("button", name="Offer again console-static v1").click()
    expect(row).to_contain_text("offered")
    page.get_by_role("button", name="Delete console-static v1").click()
    expect(row).to_have_count(0)
    assert stack.operator.ok("GET", "/templates?flavor=console-static")["templates"] == []


def test_an_operator_reads_a_tenants_quotas_and_monthly_statement(page, stack):
    accepted = stack.globex.ok("POST", "/vcdns", 202, json=vcdn_body("console-billed"))
    assert stack.globex.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
    stack.operator.ok("PUT", "/tenants/globex/quotas", json={"vcdns": 7})
    sign_in(page, stack.operator, OPERATOR)
    console_tab(page, "Tenants")
    tenants = page.get_by_role("table", name="Tenants")
    expect(row_of(tenants, "globex")).to_contain_text("vCDNs 1 of 7")
    expect(row_of(tenants, "admin").get_by_role("button")).to_have_count(0)  # operators have no bill
    page.get_by_role("button", name="Statement of globex").click()
    month = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m")
    statement = page.get_by_role("table", name=re.compile(f"Statement of globex for {month}"))
    expect(row_of(statement, "console-billed")).to_contain_text("static")
    answer = stack.operator.ok("GET", f"/tenants/globex/statements/{month}")
    expect(row_of(statement, "Total")).to_contain_text(f"{answer['total']['price']['amount']:.2f} EUR")

    page.get_by_label("Statements of the month (UTC)").fill("2020-01")
    page.get_by_role("button", name="Statement of globex").click()
    expect(page.get_by_role("table", name=re.compile("Statement of globex for 2020-01"))).to_contain_text(
        "no vCDN lived in this month")


def test_an_operator_runs_lists_and_watches_a_calibration(page, stack):
    sign_in(page, stack.operator, OPERATOR)
    console_tab(page, "Calibrations")
    form = page.get_by_role("form", name="Run a calibration")
    form.get_by_label("Flavor").select_option(FLAVOR)
    form.get_by_label("Host").select_option("eu-1")
    form.get_by_label("vCPU counts").fill("1")
    form.get_by_label("Time bound (s)").fill("60")
    form.get_by_role("button", name="Run calibration").click()
    listed = eventually(lambda: stack.operator.ok("GET", "/calibrations")["calibrations"],
                        "the calibration's job")
    job = listed[0]
    assert job["flavor"] == FLAVOR and job["host"] == "eu-1" and job["vcpus"] == [1]
    calibrations = page.get_by_role("table", name="Calibrations")
    expect(row_of(calibrations, job["id"])).to_contain_text(FLAVOR)
    title = page.locator("#op-calibration-title")
    expect(title).to_contain_text(f"Calibration {job['id']}: {FLAVOR} on eu-1")
    expect(title).to_contain_text(re.compile("COMPLETED|FAILED"), timeout=120_000)
    ended = stack.operator.ok("GET", f"/calibrations/{job['id']}")
    expect(page.locator("#op-calibration-steps").get_by_role("progressbar")).to_have_count(
        len(ended["steps"]))
    row = row_of(calibrations, job["id"])
    expect(row).to_contain_text(ended["state"])
    expect(row.get_by_role("progressbar", name=f"Progress of calibration {job['id']}")).to_have_count(1)
    if ended["state"] == "COMPLETED":  # a driver that measures: the curve against the model
        expect(page.get_by_role("img", name=re.compile("QoE of"))).to_be_visible()
    else:  # the noop driver deploys nothing to measure: the job says why
        expect(title).to_contain_text(ended["error"][:40])


def test_an_operator_reads_the_quality_board_and_a_vcdns_decisions(page, stack):
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body(
        "console-watched", (("eu-west", 2000),), flavor=FLAVOR))
    assert stack.acme.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
    vcdn_id = accepted["vcdn"]["id"]
    set_viewers(stack, vcdn_id, eu_west=40000)  # far above the demand: the IM scales out
    decisions = eventually(lambda: stack.operator.ok("GET", f"/vcdns/{vcdn_id}/decisions")["decisions"],
                           "a decision of the Instance Manager", 60)
    eventually(lambda: next(v for v in stack.operator.ok("GET", "/quality")["vcdns"]
                            if v["id"] == vcdn_id)["viewers"], "the vCDN measured")
    sign_in(page, stack.operator, OPERATOR)
    console_tab(page, "Quality and decisions")
    board = page.get_by_role("table", name="Quality board")
    row = row_of(board, "console-watched", "eu-west")
    expect(row).to_contain_text("acme")
    expect(row).to_contain_text("40,000")
    expect(page.locator("#op-quality-total")).to_contain_text("vCDNs")
    page.get_by_role("button", name="Decisions of console-watched").click()
    table = page.get_by_role("table", name=re.compile("Decisions of the Instance Manager about console-watched"))
    expect(table).to_contain_text(decisions[-1]["kind"])
    expect(table).to_contain_text(decisions[-1]["outcome"])
