"""The web portal in a real headless Chromium (Debian's ``chromium``, driven by Playwright),
against a real five-process stack on the noop driver: every tenant flow, clicked and typed
as a content provider would, and checked in the API afterwards.

Selectors are by role and label (``get_by_role``, ``get_by_label``), so each test also checks
that buttons, inputs, tables and dialogs carry accessible names. One stack and one browser
serve the module; each test has its own page and its own vCDNs. Set
``CDNAAS_PORTAL_SCREENSHOTS=docs`` to save the main views as ``docs/portal-*.png``.
"""
import datetime as dt
import json
import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.api import vcdn_body
from tests.support.browser import browser, page, screenshot, sign_in  # noqa: F401 (fixtures)
from tests.support.certs import TestCA, key_marker
from tests.support.im import FLAVOR, eventually, modelled_stack, set_viewers

ORIGIN = "http://origin.example.com:8080"
OPERATION_TIMEOUT = 30_000  # ms: an operation on the noop driver ends within seconds


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """A populated stack (flavors ``static`` and ``im-video``) whose regions have room for
    every test's vCDNs, and whose caches report the viewers ``set_viewers`` writes."""
    with modelled_stack(tmp_path_factory.mktemp("portal")) as running:
        for region in ("eu-west", "us-east"):
            running.operator.ok("POST", f"/regions/{region}/hosts", 201,
                                json={"name": f"{region}-big", "vcpus": 256, "ram_mb": 1 << 20})
        yield running


def lease(api, name, demands=(("eu-west", 1000),), **overrides):
    """A vCDN made through the API (the test is about what follows), ACTIVE."""
    accepted = api.ok("POST", "/vcdns", 202, json=vcdn_body(name, demands, **overrides))
    assert api.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
    return accepted["vcdn"]


def row_of(page, name):
    return page.get_by_role("row").filter(has=page.get_by_role("cell", name=name, exact=True))


def operation_ends(page, text):
    expect(page.locator("#operation")).to_contain_text(text, timeout=OPERATION_TIMEOUT)


#: the form of each tab of the detail view
FORMS = {"Demand, regions, origin, lease": "Change this vCDN", "Names and HTTPS": "Names and certificate",
         "Cache rules and purge": "Cache rules", "Usage and traffic": "Usage window"}


def manage(page, name, tab=None):
    """Open vCDN ``name``'s detail from the list (filtered by its name: the tenant has more
    vCDNs than a page holds), on ``tab``; that tab's form."""
    filters = page.get_by_role("form", name="Filter your vCDNs")
    filters.get_by_label("Name").fill(name)
    filters.get_by_role("button", name="Filter").click()
    page.get_by_role("button", name=f"Manage {name}", exact=True).click()
    expect(page.get_by_role("heading", name=f"vCDN {name}")).to_be_visible()
    if tab:
        page.get_by_role("tab", name=tab).click()
        return page.get_by_role("form", name=FORMS[tab])
    return None


def region_demands(api, vcdn_id):
    return {r["name"]: r["demand"] for r in api.ok("GET", f"/vcdns/{vcdn_id}")["regions"]}


# -- signing in and the catalogue -------------------------------------------------------------

def test_signing_in_with_a_token_shows_the_catalogue(page, stack):
    page.goto("/portal/")
    expect(page.locator("#who")).to_have_text("paste your token")
    page.get_by_label("API token").fill("cdn_nobody_wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("the token is unknown or revoked")

    page.get_by_label("API token").fill(stack.acme.token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#who")).to_have_text("signed in")
    expect(page.get_by_role("alert")).to_be_hidden()
    flavors = page.get_by_role("table", name="Flavors")
    for flavor in ("static", FLAVOR):
        expect(flavors.get_by_role("cell", name=flavor, exact=True)).to_be_visible()
    regions = page.get_by_role("table", name="Regions")
    for region in ("eu-west", "us-east"):
        expect(regions.get_by_role("cell", name=region, exact=True)).to_be_visible()
    expect(page.get_by_role("combobox", name="Flavor")).to_contain_text(FLAVOR)


def test_the_tenant_sees_its_quotas_and_what_it_uses(page, stack):
    stack.operator.ok("PUT", "/tenants/acme/quotas", json={"vcdns": 500})
    try:
        in_use = next(q["in_use"] for q in stack.acme.ok("GET", "/quotas")["quotas"]
                      if q["name"] == "vcdns")
        sign_in(page, stack.acme)
        expect(page.get_by_label("Your quotas")).to_contain_text(f"vCDNs {in_use} of 500")
        expect(page.get_by_label("Your quotas")).to_contain_text("purges this hour")
    finally:
        stack.operator.ok("PUT", "/tenants/acme/quotas", json={"vcdns": None})


# -- leasing ----------------------------------------------------------------------------------

def test_a_quoted_vcdn_is_leased_and_followed_until_active_with_its_entry_point(page, stack):
    sign_in(page, stack.acme)
    form = page.locator("#request")
    form.get_by_label("Name", exact=True).fill("browser-lease")
    form.get_by_role("combobox", name="Flavor").select_option("static")
    form.get_by_label("Origin").fill(ORIGIN)
    form.get_by_label("eu-west", exact=True).check()
    form.get_by_label("Peak viewers in eu-west").fill("2000")
    form.get_by_label("us-east", exact=True).check()
    form.get_by_label("Peak viewers in us-east").fill("500")
    form.get_by_label("Minimum MOS in us-east").fill("3.8")
    page.get_by_role("button", name="Quote").click()
    quote = page.get_by_role("table", name="Quote per region")
    expect(quote.get_by_role("row")).to_have_count(3)
    expect(page.locator("#quote")).to_contain_text("nothing is reserved yet")
    expect(page.locator("#quote .price b")).to_have_text(re.compile(r"^\d+(\.\d+)? [A-Z]{3}$"))
    screenshot(page, "lease", page.locator("#order"))
    form.get_by_role("combobox", name="Quality target").select_option("response_time")
    form.get_by_label("Percentile", exact=True).fill("99")
    form.get_by_label("Response time (ms) in us-east").fill("150")
    page.get_by_role("button", name="Quote").click()  # the same regions, a time to meet
    expect(quote.get_by_role("row")).to_have_count(3)
    expect(page.get_by_role("alert")).to_be_hidden()
    form.get_by_role("combobox", name="Quality target").select_option("min_mos")
    form.get_by_label("Minimum MOS in us-east").fill("3.8")

    page.get_by_role("button", name="Lease it").click()
    operation_ends(page, "INSTANTIATE COMPLETED")
    row = row_of(page, "browser-lease")
    expect(row.get_by_role("cell", name="ACTIVE")).to_be_visible()
    expect(row).to_contain_text("browser-lease.acme.cdn.example.net")
    [vcdn] = stack.acme.ok("GET", "/vcdns?name=browser-lease")["vcdns"]
    assert vcdn["state"] == "ACTIVE" and vcdn["origin"] == ORIGIN
    assert {r["name"]: (r["demand"], r["quality"]) for r in vcdn["regions"]} == {
        "eu-west": (2000, {"min_mos": 4.0}), "us-east": (500, {"min_mos": 3.8})}


def test_errors_of_the_api_are_shown_with_their_message(page, stack):
    sign_in(page, stack.acme)
    form = page.locator("#request")
    form.get_by_label("Name", exact=True).fill("too-big")
    form.get_by_label("Origin").fill(ORIGIN)
    form.get_by_label("eu-west", exact=True).check()
    form.get_by_label("Peak viewers in eu-west").fill("100000000")
    page.get_by_role("button", name="Quote").click()  # 422: beyond what the flavor allows
    expect(page.get_by_role("alert")).to_contain_text("regions: region eu-west needs")
    page.get_by_role("button", name="Dismiss the message").click()
    expect(page.get_by_role("alert")).to_be_hidden()
    form.get_by_label("eu-west", exact=True).uncheck()
    form.get_by_label("doomed", exact=True).check()  # 8 vCPUs in all
    form.get_by_label("Peak viewers in doomed").fill("200000")
    page.get_by_role("button", name="Lease it").click()  # 409: no room for that many viewers
    expect(page.get_by_role("alert")).to_contain_text(re.compile(r"region doomed lacks \d+ vCPUs"))

    form.get_by_label("Peak viewers in doomed").fill("1000")
    form.get_by_label("Origin").fill("http://169.254.169.254")  # the cloud's metadata address
    page.get_by_role("button", name="Lease it").click()
    expect(page.get_by_role("alert")).to_contain_text("origin")
    assert stack.acme.ok("GET", "/vcdns?name=too-big")["vcdns"] == []


def test_a_request_without_a_region_says_so_and_messages_never_cover_a_heading(page, stack):
    sign_in(page, stack.acme)
    form = page.locator("#request")
    form.get_by_label("Name", exact=True).fill("no-region")
    form.get_by_label("Origin").fill(ORIGIN)
    for box in form.locator("[data-region]").all():
        box.uncheck()
    for button in ("Quote", "Lease it"):
        page.get_by_role("button", name=button).click()
        expect(page.locator("#error-text")).to_have_text(  # not the schema's own words
            "Tick at least one region and give its peak viewers.")
    assert stack.acme.ok("GET", "/vcdns?name=no-region")["vcdns"] == []
    # a heading brought to the top of a short window stays below the message, readable
    page.set_viewport_size({"width": 1360, "height": 360})
    for name in ("Lease a vCDN", "Your vCDNs"):
        heading = page.get_by_role("heading", name=name)
        heading.evaluate("node => node.scrollIntoView()")
        alert, title = page.get_by_role("alert").bounding_box(), heading.bounding_box()
        assert alert["y"] + alert["height"] <= title["y"], (name, alert, title)
        assert title["y"] + title["height"] <= 360, (name, title)  # and in the window
    # a quote needs no name
    form.get_by_label("Name", exact=True).fill("")
    form.get_by_label("eu-west", exact=True).check()
    page.get_by_role("button", name="Quote").click()
    expect(page.get_by_role("table", name="Quote per region").get_by_role("row")).to_have_count(2)
    expect(page.get_by_role("alert")).to_be_hidden()
    expect(page.locator("#quote")).to_contain_text("vCPUs in caches")


def test_hostile_text_from_the_api_is_shown_as_text_never_run(page, stack):
    sign_in(page, stack.acme)
    form = page.locator("#request")
    hostile = '<img src=x onerror="window.pwned=1">'
    form.get_by_label("Name", exact=True).fill(hostile)  # the API quotes what it refuses
    form.get_by_label("Origin", exact=True).fill(hostile)
    form.get_by_label("eu-west", exact=True).check()
    page.get_by_role("button", name="Quote").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text(f"name: '{hostile}' does not match")  # shown as text
    assert page.evaluate("window.pwned") is None and alert.locator("img").count() == 0


# -- changing a vCDN --------------------------------------------------------------------------

def test_demand_is_changed_from_the_portal(page, stack):
    vcdn = lease(stack.acme, "browser-demand", (("eu-west", 1000), ("us-east", 1000)))
    sign_in(page, stack.acme)
    form = manage(page, "browser-demand", "Demand, regions, origin, lease")
    form.get_by_label("Peak viewers in eu-west").fill("6000")
    form.get_by_label("Minimum MOS in us-east").fill("4.2")
    form.get_by_role("button", name="Apply changes").click()
    operation_ends(page, "UPDATE COMPLETED")
    expect(form.get_by_label("Peak viewers in eu-west")).to_have_value("6000")
    changed = stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")
    assert {r["name"]: (r["demand"], r["quality"]) for r in changed["regions"]} == {
        "eu-west": (6000, {"min_mos": 4.0}), "us-east": (1000, {"min_mos": 4.2})}
    expect(row_of(page, "browser-demand")).to_contain_text("eu-west: 6000 viewers")

    form.get_by_role("button", name="Apply changes").click()  # nothing edited: nothing sent
    expect(page.get_by_role("alert")).to_contain_text("Nothing to change")
    form.get_by_label("Origin").fill("http://169.254.169.254:80")  # the API's own check
    form.get_by_role("button", name="Apply changes").click()
    expect(page.get_by_role("alert")).to_contain_text("origin")
    assert stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")["origin"] == ORIGIN


def test_regions_origin_and_lease_end_are_changed_from_the_portal(page, stack):
    vcdn = lease(stack.acme, "browser-regions", (("eu-west", 1000),))
    sign_in(page, stack.acme)
    form = manage(page, "browser-regions", "Demand, regions, origin, lease")
    form.get_by_role("combobox", name="Region").select_option("us-east")
    form.get_by_label("Peak viewers", exact=True).fill("700")
    form.get_by_label("Origin").fill("http://origin2.example.com:8081")
    end = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=3)).replace(microsecond=0)
    form.get_by_label("Lease end (UTC)").fill(end.strftime("%Y-%m-%dT%H:%M:%S"))
    form.get_by_role("button", name="Apply changes").click()
    operation_ends(page, "UPDATE COMPLETED")
    changed = stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")
    assert region_demands(stack.acme, vcdn["id"]) == {"eu-west": 1000, "us-east": 700}
    assert changed["origin"] == "http://origin2.example.com:8081"
    assert changed["lease"]["end"].replace("+00:00", "Z").startswith(end.strftime("%Y-%m-%dT%H:%M:%S"))

    expect(form.get_by_label("Remove us-east")).to_be_visible()
    form.get_by_label("Remove eu-west").check()
    form.get_by_role("button", name="Apply changes").click()
    operation_ends(page, "UPDATE COMPLETED")
    assert region_demands(stack.acme, vcdn["id"]) == {"us-east": 700}
    expect(form.get_by_label("Remove eu-west")).to_have_count(0)


def test_a_change_made_meanwhile_is_never_overwritten(page, stack):
    vcdn = lease(stack.acme, "browser-etag")
    sign_in(page, stack.acme)
    form = manage(page, "browser-etag", "Demand, regions, origin, lease")
    form.get_by_label("Peak viewers in eu-west").fill("3000")  # typed from what the page read
    meanwhile = stack.acme.ok("PATCH", f"/vcdns/{vcdn['id']}", 202,
                              json={"regions": [{"name": "eu-west", "demand": 2000}]})
    assert stack.acme.wait(meanwhile["operation"]["id"])["state"] == "COMPLETED"
    form.get_by_role("button", name="Apply changes").click()
    expect(page.get_by_role("alert")).to_contain_text("changed since the page loaded it")
    expect(form.get_by_label("Peak viewers in eu-west")).to_have_value("2000")  # as it is now
    assert region_demands(stack.acme, vcdn["id"]) == {"eu-west": 2000}

    form.get_by_label("Peak viewers in eu-west").fill("3000")  # decided anew: applied
    form.get_by_role("button", name="Apply changes").click()
    operation_ends(page, "UPDATE COMPLETED")
    assert region_demands(stack.acme, vcdn["id"]) == {"eu-west": 3000}


# -- ending a vCDN ----------------------------------------------------------------------------

def test_a_vcdn_ends_only_once_the_dialog_confirms_it(page, stack):
    vcdn = lease(stack.acme, "browser-end")
    sign_in(page, stack.acme)
    page.get_by_role("button", name="End browser-end").click()
    dialog = page.get_by_role("dialog", name="End vCDN browser-end?")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("browser-end.acme.cdn.example.net stops answering viewers")
    screenshot(page, "confirm-end")
    dialog.get_by_role("button", name="Keep it").click()
    expect(dialog).to_be_hidden()
    page.get_by_role("button", name="End browser-end").click()
    page.keyboard.press("Escape")  # also keeps it
    expect(dialog).to_be_hidden()
    time.sleep(0.5)  # a DELETE sent anyway would be on its way by now
    operations = stack.acme.ok("GET", f"/vcdns/{vcdn['id']}/operations")["operations"]
    assert [o["type"] for o in operations] == ["INSTANTIATE"]
    assert stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")["state"] == "ACTIVE"

    page.get_by_role("button", name="End browser-end").click()
    dialog.get_by_role("button", name="End vCDN").click()
    operation_ends(page, "TERMINATE COMPLETED")
    expect(row_of(page, "browser-end")).to_have_count(0)  # ended vCDNs are hidden
    assert stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")["state"] == "DELETED"
    page.get_by_label("Show ended vCDNs").check()
    page.get_by_role("button", name="Filter").click()
    expect(row_of(page, "browser-end").get_by_role("cell", name="DELETED")).to_be_visible()


def test_the_detail_view_ends_its_vcdn_after_confirmation(page, stack):
    vcdn = lease(stack.acme, "browser-detail-end")
    sign_in(page, stack.acme)
    manage(page, "browser-detail-end")
    page.get_by_role("button", name="End this vCDN").click()
    page.get_by_role("dialog").get_by_role("button", name="End vCDN").click()
    operation_ends(page, "TERMINATE COMPLETED")
    expect(page.locator("#facts")).to_contain_text("DELETED")
    expect(page.get_by_role("button", name="End this vCDN")).to_be_disabled()
    assert stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")["state"] == "DELETED"


# -- the list ---------------------------------------------------------------------------------

def test_the_list_filters_by_state_and_name_and_pages(page, stack):
    start = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for number in range(11):  # later leases: reserved, not deployed
        stack.globex.ok("POST", "/vcdns", 202, json=vcdn_body(
            f"later-{number:02d}", lease={"start": start, "end": "2099-01-01T00:00:00Z"}))
    lease(stack.globex, "now-active")
    sign_in(page, stack.globex)
    names = page.locator("#vcdns tbody tr td:first-child")
    expect(names).to_have_count(10)
    expect(page.locator("#page-info")).to_have_text("page 1")
    page.get_by_role("button", name="Next page").click()
    expect(page.locator("#page-info")).to_have_text("page 2")
    expect(names).to_have_count(2)
    expect(page.get_by_role("button", name="Next page")).to_be_disabled()
    first_two = {*names.all_inner_texts()}
    page.get_by_role("button", name="First page").click()
    expect(names).to_have_count(10)
    assert first_two.isdisjoint(names.all_inner_texts())
    assert len(first_two | {*names.all_inner_texts()}) == 12

    filters = page.get_by_role("form", name="Filter your vCDNs")
    filters.get_by_label("State").select_option("ACTIVE")
    filters.get_by_role("button", name="Filter").click()
    expect(names).to_have_text(["now-active"])
    filters.get_by_label("State").select_option("SCHEDULED")
    filters.get_by_label("Name").fill("later-07")
    filters.get_by_role("button", name="Filter").click()
    expect(names).to_have_text(["later-07"])
    screenshot(page, "list", page.locator("#mine"))


# -- names and HTTPS --------------------------------------------------------------------------

def test_custom_hostnames_and_a_certificate_are_set_and_shown_never_the_key(page, stack):
    vcdn = lease(stack.acme, "browser-tls")
    issued = TestCA().issue(["video.browser.example", "img.browser.example"])
    sign_in(page, stack.acme)
    form = manage(page, "browser-tls", "Names and HTTPS")
    expect(page.locator("#tls-now")).to_contain_text("HTTP only")
    form.get_by_label("Custom hostnames").fill("video.browser.example\nimg.browser.example")
    form.get_by_label("New certificate chain").fill(issued.chain_pem)
    form.get_by_role("button", name="Save names and certificate").click()
    expect(page.get_by_role("alert")).to_contain_text("Paste both")  # no key: nothing sent
    form.get_by_label("Its private key").fill(issued.key_pem)
    form.get_by_role("button", name="Save names and certificate").click()
    operation_ends(page, "UPDATE COMPLETED")
    tls = stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")["tls"]
    assert tls["fingerprint_sha256"] == issued.fingerprint
    facts = page.locator("#facts")
    expect(facts).to_contain_text(issued.fingerprint)
    expect(facts).to_contain_text("video.browser.example, img.browser.example")
    expect(page.locator("#tls-now")).to_contain_text("valid until")
    expect(form.get_by_label("Its private key")).to_have_value("")
    assert key_marker(issued.key_pem) not in page.content()
    screenshot(page, "https", page.locator("#detail"))

    form.get_by_role("button", name="Serve HTTP only").click()
    operation_ends(page, "UPDATE COMPLETED")
    assert stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")["tls"] is None
    expect(page.locator("#tls-now")).to_contain_text("HTTP only")


def test_the_https_policy_is_saved_shown_and_refused_naming_the_field(page, stack):
    vcdn = lease(stack.acme, "browser-policy")
    sign_in(page, stack.acme)
    manage(page, "browser-policy", "Names and HTTPS")
    expect(page.locator("#facts")).to_contain_text("plain HTTP served")
    form = page.get_by_role("form", name="HTTPS policy")
    form.get_by_label("Oldest TLS version").select_option("1.3")
    form.get_by_label("HSTS max-age").fill("600")
    form.get_by_role("button", name="Save HTTPS policy").click()
    operation_ends(page, "UPDATE COMPLETED")
    assert stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")["https_policy"] == {
        "http": "allow", "min_tls_version": "1.3", "unknown_sni": "refuse",
        "hsts": {"max_age": 600, "include_subdomains": False, "preload": False}}
    expect(page.locator("#facts")).to_contain_text("TLS 1.3 or later")
    expect(page.locator("#facts")).to_contain_text("HSTS max-age=600")
    form.get_by_label("Plain HTTP").select_option("redirect")  # no certificate: refused
    form.get_by_role("button", name="Save HTTPS policy").click()
    expect(page.get_by_role("alert")).to_contain_text("https_policy.http")


# -- cache rules, purge and prefetch ----------------------------------------------------------

def test_a_url_is_signed_from_the_portal(page, stack):
    secret = "portal-secret-" + "s" * 24
    lease(stack.acme, "browser-signed", access={"signed_urls": {
        "paths": ["/video/"], "keys": [{"id": "k1", "secret": secret}]}})
    sign_in(page, stack.acme)
    manage(page, "browser-signed", "Cache rules and purge")
    access = page.get_by_role("form", name="Delivery options").get_by_label("Access control")
    expect(access).to_have_value(re.compile('"id": "k1"'))
    assert secret not in access.input_value()
    form = page.get_by_role("form", name="Sign a URL")
    form.get_by_label("Path", exact=True).fill("/video/show/index.m3u8")
    form.get_by_label("Every path under this prefix (optional)").fill("/video/show/")
    form.get_by_role("button", name="Sign").click()
    expect(page.locator("#signed-url")).to_contain_text("/video/show/index.m3u8?exp=")
    expect(page.locator("#signed-url")).to_contain_text("&kid=k1&prefix=/video/show/&sig=")
    form.get_by_label("Every path under this prefix (optional)").fill("/audio/")
    form.get_by_role("button", name="Sign").click()
    expect(page.get_by_role("alert")).to_contain_text("prefix")


def test_cache_rules_are_set_from_the_portal(page, stack):
    vcdn = lease(stack.acme, "browser-cache")
    sign_in(page, stack.acme)
    form = manage(page, "browser-cache", "Cache rules and purge")
    form.get_by_role("button", name="Add a TTL rule").click()
    form.get_by_label("Path of rule 1").fill("/video/")
    form.get_by_label("TTL of rule 1").fill("1h")
    form.get_by_role("button", name="Add a TTL rule").click()
    form.get_by_label("Match of rule 2").select_option("suffix")
    form.get_by_label("Path of rule 2").fill(".m3u8")
    form.get_by_label("TTL of rule 2").fill("2s")
    form.get_by_label("Default TTL").fill("5m")
    form.get_by_role("combobox", name="Query strings in the cache key").select_option("keep")
    form.get_by_label("Arguments that count").fill("quality, lang")
    form.get_by_role("combobox", name="Origin Cache-Control").select_option("ignore")
    form.get_by_role("button", name="Save cache rules").click()
    operation_ends(page, "UPDATE COMPLETED")
    rules = {"ttl": [{"match": "prefix", "path": "/video/", "ttl": "1h"},
                     {"match": "suffix", "path": ".m3u8", "ttl": "2s"}],
             "default_ttl": "5m", "query_string": ["lang", "quality"], "origin_cache_control": "ignore"}
    assert stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")["cache_rules"] == rules
    screenshot(page, "cache", page.locator("#detail"))

    form.get_by_role("button", name="Remove rule 1").click()  # what the page shows: what is
    expect(form.get_by_label("Path of rule 1")).to_have_value(".m3u8")
    form.get_by_label("TTL of rule 1").fill("forever")
    form.get_by_role("button", name="Save cache rules").click()
    expect(page.get_by_role("alert")).to_contain_text("forever")
    assert stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")["cache_rules"] == rules
    form.get_by_label("TTL of rule 1").fill("3s")
    form.get_by_role("button", name="Save cache rules").click()
    operation_ends(page, "UPDATE COMPLETED")
    assert stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")["cache_rules"]["ttl"] == [
        {"match": "suffix", "path": ".m3u8", "ttl": "3s"}]


def test_paths_are_purged_and_prefetched_on_every_cache(page, stack):
    vcdn = lease(stack.acme, "browser-purge", (("eu-west", 1000), ("us-east", 1000)))
    sign_in(page, stack.acme)
    manage(page, "browser-purge", "Cache rules and purge")
    purge = page.get_by_role("form", name="Purge")
    purge.get_by_role("button", name="Purge").click()
    expect(page.get_by_role("alert")).to_contain_text("at least one path or prefix")
    purge.get_by_label("Paths").fill("/video/hd/seg-1.m4s\n/video/hd/seg-2.m4s?quality=hd")
    purge.get_by_label("Prefixes").fill("/img/")
    purge.get_by_role("button", name="Purge").click()
    operation_ends(page, "INVALIDATE COMPLETED")
    expect(purge.get_by_label("Paths")).to_have_value("")

    prefetch = page.get_by_role("form", name="Prefetch")
    prefetch.get_by_label("Paths").fill("/video/../etc/passwd")  # refused by the API, named
    prefetch.get_by_role("button", name="Prefetch").click()
    expect(page.get_by_role("alert")).to_contain_text("paths")
    prefetch.get_by_label("Paths").fill("/video/hd/seg-1.m4s")
    prefetch.get_by_role("button", name="Prefetch").click()
    operation_ends(page, "PREFETCH COMPLETED")
    operations = stack.acme.ok("GET", f"/vcdns/{vcdn['id']}/operations")["operations"]
    assert [o["type"] for o in operations] == ["INSTANTIATE", "INVALIDATE", "PREFETCH"]
    assert all(o["state"] == "COMPLETED" for o in operations)


# -- monitoring, usage and traffic ------------------------------------------------------------

@pytest.fixture(scope="module")
def watched(stack):
    """An ``im-video`` vCDN of acme with 8000 viewers in eu-west and 2000 in us-east, once the
    Instance Manager has three points of each region and usage with requests."""
    vcdn = lease(stack.acme, "browser-watched", (("eu-west", 10000), ("us-east", 5000)),
                 flavor=FLAVOR)
    set_viewers(stack, vcdn["id"], eu_west=8000, us_east=2000)

    def measured():
        metrics = stack.acme.ok("GET", f"/vcdns/{vcdn['id']}/metrics?scope=region")
        points = {s["key"]: s["points"] for s in metrics["series"]}
        usage = stack.acme.ok("GET", f"/vcdns/{vcdn['id']}/usage")
        return (set(points) == {"eu-west", "us-east"} and min(map(len, points.values())) >= 3
                and points["eu-west"][-1]["viewers"] == 8000 and usage["total"]["requests"] > 0)
    eventually(measured, "three points of each region and some requests", 30)
    return vcdn


def test_load_qoe_and_power_are_charted_over_time(page, stack, watched):
    sign_in(page, stack.acme)
    manage(page, "browser-watched")
    charts = page.locator("#charts")
    for title in ("Viewers", "Estimated MOS", "Power"):
        expect(charts.get_by_role("img", name=title)).to_have_count(2)  # one per region
    expect(charts.get_by_role("heading", name="eu-west")).to_be_visible()
    expect(charts.get_by_role("img", name="Viewers").first).to_contain_text("Viewers: 8.0k")
    assert charts.locator("polyline").count() >= 4
    expect(page.get_by_role("table", name=re.compile("Decisions"))).to_be_visible()
    screenshot(page, "monitoring", page.locator("#detail"))


def test_usage_traffic_charts_and_the_access_log_export(page, stack, watched):
    sign_in(page, stack.acme)
    form = manage(page, "browser-watched", "Usage and traffic")
    form.get_by_role("button", name="Show usage").click()
    usage = page.get_by_role("table", name="Usage and price")
    total = usage.get_by_role("row").filter(has=page.get_by_role("cell", name="Total", exact=True))
    expect(total).to_have_count(1)
    expect(usage.get_by_role("row")).to_have_count(4)  # heading, two regions, total
    requests = int(total.get_by_role("cell").nth(1).inner_text().replace(",", ""))
    assert requests > 0
    expect(total.get_by_role("cell").last).to_have_text(re.compile(r"^\d+(\.\d+)? [A-Z]{3}$"))
    traffic = page.locator("#traffic-charts")
    expect(traffic.get_by_role("img", name="Requests")).to_have_count(2)
    expect(traffic.get_by_role("img", name="Cache hit ratio").first).to_contain_text("%")
    screenshot(page, "usage", page.locator("#detail"))

    form.get_by_label("Records exported at most").fill("2000")  # thousands a second here
    with page.expect_download(timeout=30_000) as download:
        form.get_by_role("button", name="Export the access log (NDJSON)").click()
    assert download.value.suggested_filename == "browser-watched-access-log.ndjson"
    records = [json.loads(line) for line in Path(download.value.path()).read_text().splitlines()]
    assert len(records) == 2000 and {r["region"] for r in records} <= {"eu-west", "us-east"}
    assert all(r["status"] == 200 for r in records)


# -- log streams ---------------------------------------------------------------------------------

def test_log_streams_are_set_and_their_counts_shown_from_the_portal(page, stack):
    vcdn = lease(stack.acme, "browser-logs")
    sign_in(page, stack.acme)
    manage(page, "browser-logs", "Usage and traffic")
    form = page.get_by_role("form", name="Log streams")
    streams = [{"type": "syslog", "address": "127.0.0.1:6514", "transport": "tcp"},
               {"type": "https", "url": "http://127.0.0.1:9/in",
                "headers": {"X-Api-Key": "portal-secret"}}]
    form.get_by_role("textbox").fill(json.dumps(streams))
    form.get_by_role("button", name="Save log streams").click()
    operation_ends(page, "UPDATE COMPLETED")
    stored = stack.acme.ok("GET", f"/vcdns/{vcdn['id']}")["log_streams"]
    assert stored[0] == streams[0] and stored[1]["headers"] == {"X-Api-Key": "********"}
    expect(form.get_by_role("textbox")).to_have_value(re.compile(r"127\.0\.0\.1:6514"))
    assert "portal-secret" not in form.get_by_role("textbox").input_value()

    form.get_by_role("button", name="Save log streams").click()  # the masked value again
    expect(page.get_by_role("alert")).to_contain_text("log_streams[1].headers")
    form.get_by_role("button", name="Show what was sent and dropped").click()
    expect(page.locator("#log-stream-counts")).to_contain_text("no shipper answers")
    expect(page.locator("#log-stream-note")).to_contain_text("dropped 0")
