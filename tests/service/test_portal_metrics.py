"""The portal's vCDN detail: its page and scripts wire the charts and decisions to the API, and
the hand-written SVG charts (``charts.js``, run in Node) draw the API's real metrics.

Its tests that start no process are in tests/unit/test_portal_metrics_units.py (the unit
tier)."""
import json
import re
import shutil
import subprocess

import pytest
import requests

from cdnaas.portal import STATIC
from tests.support.api import vcdn_body
from tests.support.im import FLAVOR, MODELS, eventually, modelled_stack, set_viewers

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="Node.js runs the portal's chart code")
RUN = """
const fs = require("fs"), vm = require("vm");
const page = {};
vm.runInNewContext(fs.readFileSync(process.argv[1], "utf8"), page);
const [name, args] = JSON.parse(fs.readFileSync(0, "utf8"));
process.stdout.write(page[name](...args));
"""


def charts_js(name, *args):
    """``name(*args)`` of ``charts.js``, run by Node; its markup."""
    done = subprocess.run([NODE, "-e", RUN, str(STATIC / "charts.js")],
                          input=json.dumps([name, args]), capture_output=True, text=True,
                          timeout=20, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def svgs(markup):
    return re.findall(r"<svg\b.*?</svg>", markup, re.S)


def polyline_points(svg):
    return [len(points.split()) for points in re.findall(r'<polyline[^>]* points="([^"]*)"', svg)]


def point(second, **figures):
    values = {"viewers": None, "requests_per_second": None, "mos": None, "cpu": None,
              "vcpus": None, "watts": None, "energy_wh": None, **figures}
    return {"at": f"2030-01-31T18:00:{second:02d}Z", **values}


METRICS = {"vcdn_id": "v1", "since": "2030-01-31T17:00:00Z", "until": "2030-01-31T18:00:00Z",
           "series": [
               {"scope": "cache", "key": "eu-west-cache-0", "points": [point(0, viewers=5.0)]},
               {"scope": "region", "key": "eu-west", "points": [
                   point(0, viewers=100.0, mos=4.8, watts=150.0),
                   point(10, viewers=300.0, mos=None, watts=151.0),
                   point(20, viewers=200.0, mos=4.1, watts=152.0),
                   point(30, viewers=250.0, mos=4.3, watts=152.0)]},
               {"scope": "region", "key": "us-<east>", "points": [point(0, viewers=7.0)]},
               {"scope": "vcdn", "key": "", "points": [point(0, viewers=300.0)]}]}


# -- the chart code ---------------------------------------------------------------------------

@needs_node
def test_each_region_gets_a_chart_of_viewers_mos_and_watts_with_the_mos_target_dashed():
    markup = charts_js("regionPanels", METRICS, {"eu-west": 4.0})
    assert markup.count('class="region-charts"') == 2  # the regions; not the cache, not the vCDN
    assert "<h4>eu-west</h4>" in markup and "<h4>us-&#60;east&#62;</h4>" in markup
    viewers, mos, watts, *others = svgs(markup)
    assert len(others) == 3
    assert "Viewers: 250" in viewers and polyline_points(viewers) == [4]
    assert "Estimated MOS: 4.30" in mos and polyline_points(mos) == [2]  # after the gap
    assert '<circle class="line"' in mos  # the lone point before the gap
    assert mos.count('stroke-dasharray="4 3"') == 1 and "target 4.00" in mos
    assert "stroke-dasharray" not in viewers + watts + others[1]  # us-east has no target
    assert "Power: 152 W" in watts and polyline_points(watts) == [4]
    assert "18:00:00" in viewers and "18:00:30 UTC" in viewers


@needs_node
def test_a_region_no_longer_in_the_vcdn_has_no_charts():
    markup = charts_js("regionPanels", METRICS, {"eu-west": 4.0}, ["eu-west"])
    assert markup.count('class="region-charts"') == 1 and "<h4>eu-west</h4>" in markup
    assert "east" not in markup and len(svgs(markup)) == 3
    assert "No samples yet" in charts_js("regionPanels", METRICS, {}, ["north"])


@needs_node
def test_an_axis_of_no_load_reads_from_zero():
    idle = charts_js("lineChart", {"title": "Viewers", "points": [
        {"time": "2030-01-31T18:00:00Z", "value": 0}, {"time": "2030-01-31T18:01:00Z", "value": 0}]})
    axis = re.findall(r'<text class="axis"[^>]*>([^<]*)</text>', idle)[:2]
    assert axis == ["1.00", "0.00"], axis  # top, bottom: not -1 to 1
    [points] = re.findall(r'<polyline[^>]* points="([^"]*)"', idle)
    assert {float(pair.split(",")[1]) for pair in points.split()} == {100.0}  # on the bottom
    negative = charts_js("lineChart", {"title": "Delta", "points": [
        {"time": "2030-01-31T18:00:00Z", "value": -5}, {"time": "2030-01-31T18:01:00Z", "value": -5}]})
    assert re.findall(r'<text class="axis"[^>]*>([^<]*)</text>', negative)[:2] == ["-4.50", "-5.50"]


@needs_node
def test_a_line_spans_the_plot_from_the_first_to_the_last_sample():
    chart = charts_js("lineChart", {"title": "Viewers", "points": [
        {"time": "2030-01-31T18:00:00Z", "value": 1}, {"time": "2030-01-31T18:01:00Z", "value": 3},
        {"time": "2030-01-31T18:02:00Z", "value": 2}]})
    [points] = re.findall(r'<polyline[^>]* points="([^"]*)"', chart)
    coordinates = [tuple(map(float, pair.split(","))) for pair in points.split()]
    xs, ys = [x for x, _ in coordinates], [y for _, y in coordinates]
    assert xs == sorted(xs) and xs[1] - xs[0] == pytest.approx(xs[2] - xs[1])
    assert ys[1] == min(ys) and ys[0] == max(ys)  # SVG's y grows downwards
    flat = charts_js("lineChart", {"title": "MOS", "points": [
        {"time": "2030-01-31T18:00:00Z", "value": 4.8},
        {"time": "2030-01-31T18:01:00Z", "value": 4.8}]})
    assert polyline_points(flat) == [2] and "NaN" not in flat
    idle = charts_js("lineChart", {"title": "Watts", "points": [  # noise, not a rise
        {"time": "2030-01-31T18:00:00Z", "value": 115.0},
        {"time": "2030-01-31T18:01:00Z", "value": 115.002}]})
    [idle_points] = re.findall(r'<polyline[^>]* points="([^"]*)"', idle)
    assert len({pair.split(",")[1] for pair in idle_points.split()}) == 1
    empty = charts_js("lineChart", {"title": "MOS", "points": [
        {"time": "2030-01-31T18:00:00Z", "value": None}]})
    assert "MOS: no data" in empty and "<polyline" not in empty
    assert "No samples yet" in charts_js("regionPanels", {"series": []}, {})


@needs_node
def test_a_calibrated_curve_is_drawn_against_the_shipped_model():
    """The curves a completed calibration job answers (cdnaas.calibration.reference), drawn
    on one MOS axis: a line and a dot per point each, both named in the legend."""
    from cdnaas.calibration import reference  # pylint: disable=import-outside-toplevel
    from cdnaas.planning import models  # pylint: disable=import-outside-toplevel
    calibrated = models.load(MODELS / "container.yaml")
    kind, shipped = reference.reference_model([], "vm")
    curves = [reference.curve_points("calibrated <x>", calibrated), reference.curve_points(kind, shipped)]
    [chart] = svgs(charts_js("curveChart", "QoE of im-video on eu-1", curves))
    assert 'aria-label="QoE of im-video on eu-1"' in chart and "NaN" not in chart
    assert polyline_points(chart) == [len(calibrated.qoe.xs), len(shipped.qoe.xs)]
    assert chart.count("<circle") == len(calibrated.qoe.xs) + len(shipped.qoe.xs)
    assert "calibrated &#60;x&#62; (tnsm2017-docker)" in chart and "paper (tnsm2017-kvm)" in chart
    # MOS 5 is the plot's top and 1 its bottom; the furthest point stays inside the plot
    [first, *_] = re.findall(r'<polyline[^>]* points="([^"]*)"', chart)
    coordinates = [tuple(map(float, pair.split(","))) for pair in first.split()]
    assert all(46 <= x <= 544 and 40 <= y <= 244 for x, y in coordinates)


# -- against a running stack ------------------------------------------------------------------

@needs_node
def test_the_served_portal_charts_the_apis_real_metrics(tmp_path):
    with modelled_stack(tmp_path) as stack:
        for asset in ("charts.js", "app.js"):
            served = requests.get(f"{stack.urls['api']}/portal/{asset}", timeout=10)
            assert served.status_code == 200 and served.text == (STATIC / asset).read_text()
        accepted = stack.acme.ok("POST", "/vcdns", 202, json=vcdn_body(
            "portal", (("eu-west", 10000), ("us-east", 5000)), flavor=FLAVOR))
        vcdn_id = accepted["vcdn"]["id"]
        assert stack.acme.wait(accepted["operation"]["id"])["state"] == "COMPLETED"
        set_viewers(stack, vcdn_id, eu_west=8000, us_east=2000)

        def charted():  # the portal's own request, once each region has 3 points
            metrics = stack.acme.ok("GET", f"/vcdns/{vcdn_id}/metrics?scope=region")
            series = {s["key"]: s["points"] for s in metrics["series"]}
            if (set(series) == {"eu-west", "us-east"} and min(map(len, series.values())) >= 3
                    and series["eu-west"][-1]["viewers"] == 8000):
                return metrics
            return None
        metrics = eventually(charted, "three points of each region, eu-west at 8000", 20)
        markup = charts_js("regionPanels", metrics, {"eu-west": 4.0, "us-east": 4.0})
    drawn = svgs(markup)
    assert len(drawn) == 6
    eu_viewers, eu_mos, eu_watts = drawn[:3]
    assert "Viewers: 8.0k" in eu_viewers
    eu_points = next(s["points"] for s in metrics["series"] if s["key"] == "eu-west")
    known = [p for p in eu_points if p["viewers"] is not None]
    assert sum(polyline_points(eu_viewers)) + eu_viewers.count("<circle") == len(known) >= 3
    assert 'stroke-dasharray="4 3"' in eu_mos and "<polyline" in eu_watts
