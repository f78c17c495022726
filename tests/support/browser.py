"""The portal in a real headless Chromium (Debian's ``chromium``, driven by Playwright): the
browser and a fresh tab per test on the module's ``stack`` fixture, signing in, and the
screenshots ``CDNAAS_PORTAL_SCREENSHOTS=docs`` asks for (``docs/portal-*.png``)."""
import os
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

CHROMIUM = "/usr/bin/chromium"  # Debian's package (scripts/setup); Playwright's own is never fetched
SCREENSHOTS = os.environ.get("CDNAAS_PORTAL_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser():
    expect.set_options(timeout=15_000)  # what the page shows after a few API calls, on a busy machine
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, stack):  # pylint: disable=redefined-outer-name
    """A fresh tab (its own session storage) on the stack's customer API."""
    context = browser.new_context(base_url=stack.urls["api"], accept_downloads=True,
                                  viewport={"width": 1360, "height": 900})
    context.set_default_timeout(15_000)
    tab = context.new_page()
    tab.script_errors, tab.network_changes = [], []
    tab.on("pageerror", lambda error: tab.script_errors.append(error))
    tab.on("requestfailed", lambda request: _failed(tab, request))
    tab.on("console", lambda message: print(f"console {message.type}: {message.text}"))
    yield tab
    context.close()
    assert not tab.script_errors, f"the page's scripts failed: {tab.script_errors}"


def _failed(tab, request):
    print(f"request failed: {request.method} {request.url}: {request.failure}")  # in a report
    if "ERR_NETWORK_CHANGED" in (request.failure or ""):
        tab.network_changes.append(request.url)


def sign_in(page, api, who="signed in", attempts=3):  # pylint: disable=redefined-outer-name
    """Open the portal signed in as ``api``'s tenant (a link carrying the token); the page
    says ``who`` once it has loaded. Chromium cancels what it is loading when this
    machine's interfaces change (``ERR_NETWORK_CHANGED``: other tests add namespaces and
    bridges all the time); a load it cancelled so is made again, as a person would."""
    for attempt in range(attempts):
        if attempt:
            page.goto("about:blank")  # a new hash alone would not load the page again
        page.network_changes.clear()
        page.goto(f"/portal/#token={api.token}")
        try:
            expect(page.locator("#who")).to_have_text(who)
            return
        except AssertionError:
            if not page.network_changes or attempt == attempts - 1:
                raise
            page.script_errors.clear()  # those of the cancelled load


def screenshot(page, view, locator=None):  # pylint: disable=redefined-outer-name
    """Save ``locator`` (default: what the window shows) as ``portal-<view>.png`` when asked."""
    if SCREENSHOTS:
        (locator or page).screenshot(path=str(Path(SCREENSHOTS) / f"portal-{view}.png"),
                                     animations="disabled")
