"""The portal's vCDN detail: the tests that start no process (the unit tier); the others, and
what the module covers, are in tests/service/test_portal_metrics.py."""
import re


from cdnaas.portal import STATIC


# -- the page and its scripts -----------------------------------------------------------------

def test_the_page_loads_the_chart_code_before_the_app_and_has_a_detail_view():
    page = (STATIC / "index.html").read_text()
    assert page.index("/portal/charts.js") < page.index("/portal/app.js")
    assert all(f'id="{node}"' in page
               for node in ("detail", "charts", "decisions", "detail-close", "detail-span"))
    assert re.findall(r'<option value="(\d+)"', page) == ["1", "6", "24"]  # hours of the window
    app = (STATIC / "app.js").read_text()
    assert "/metrics?scope=region&since=" in app and "/decisions`" in app
    assert 'addEventListener("change"' in app and "metrics.step" in app
    assert "regionPanels(metrics, mosTargets(vcdn), vcdn.regions.map((r) => r.name))" in app
    assert "setInterval(refreshDetail" in app
    assert "openDetail(vcdn.id)" in app
