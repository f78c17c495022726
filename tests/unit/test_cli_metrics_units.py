"""What the CLI shows of the Instance Manager: the tests that start no process (the unit tier);
the others, and what the module covers, are in tests/service/test_cli_metrics.py."""
import datetime as dt

import click
import pytest

from cdnaas.cli.api_commands import TimeOrAgo
from cdnaas.common import charts
from cdnaas.common import timeutil


# -- charts -----------------------------------------------------------------------------------

def test_a_sparkline_draws_one_bar_per_value_from_the_least_to_the_greatest():
    assert charts.sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert charts.sparkline([10, 40, 20]) == "▁█▃"
    assert charts.sparkline([5, 6], low=0, high=10) == "▅▅"


def test_unknown_values_are_gaps_of_the_same_width():
    line = charts.sparkline([1, None, 3, None])
    assert line == "▁ █ " and len(line) == 4
    assert charts.sparkline([None, None]) == "  "
    assert charts.sparkline([]) == ""


def test_a_flat_series_is_drawn_at_mid_height():
    assert charts.sparkline([4.8, 4.8, 4.8]) == "▄▄▄"
    assert charts.sparkline([7]) == "▄"
    assert charts.sparkline([0, 0]) == "▄▄"
    # a thousandth of the value is noise (an idle host's watts), not a rise to the top
    assert charts.sparkline([115.0, 115.002, 115.002]) == "▄▄▄"
    assert charts.sparkline([115.0, 120.0]) == "▁█"


def test_long_series_are_averaged_down_to_the_width():
    assert charts.resample([1, 2, 3], 5) == [1, 2, 3]
    assert charts.resample([1, 3, 5, 7, None, None], 3) == [2, 6, None]
    assert len(charts.resample(list(range(1000)), 60)) == 60


def test_a_share_bar_fills_its_cells_in_proportion():
    assert charts.share_bar(0.3) == "███░░░░░░░ 30%"
    assert charts.share_bar(1.5, width=4) == "████ 150%"
    assert charts.share_bar(None) == "-"


def test_region_rows_give_each_figure_its_chart_latest_and_range():
    points = [{"viewers": 100.0, "mos": 4.8, "watts": 50.0},
              {"viewers": 300.0, "mos": None, "watts": 60.5},
              {"viewers": 200.0, "mos": 4.2, "watts": None}]
    metrics = {"series": [{"scope": "cache", "key": "eu-west-cache-0", "points": points},
                          {"scope": "region", "key": "eu-west", "points": points}]}
    rows = charts.region_rows(metrics, width=60)
    assert [(r["region"], r["figure"], r["samples"]) for r in rows] == [
        ("eu-west", "viewers", 3), ("eu-west", "MOS", 3), ("eu-west", "watts", 3)]
    viewers, mos, watts = rows
    assert viewers == {"region": "eu-west", "samples": 3, "figure": "viewers", "chart": "▁█▅",
                       "latest": "200", "min": "100", "max": "300"}
    assert (mos["chart"], mos["latest"], mos["min"], mos["max"]) == ("█ ▁", "4.20", "4.20", "4.80")
    assert (watts["chart"], watts["latest"], watts["max"]) == ("▁█ ", "-", "60.5")
    # squeezed to 100 and mean(300, 200), drawn on the scale of the raw 100-300
    assert charts.region_rows(metrics, width=2)[0]["chart"] == "▁▆"


def test_since_takes_an_iso_time_or_how_long_ago():
    since = TimeOrAgo()
    assert since.convert("2030-01-31T18:00:00Z", None, None) == \
        dt.datetime(2030, 1, 31, 18, tzinfo=dt.timezone.utc)
    ago = timeutil.utcnow() - since.convert("15m", None, None)
    assert dt.timedelta(minutes=14, seconds=59) < ago < dt.timedelta(minutes=15, seconds=5)
    with pytest.raises(click.BadParameter):
        since.convert("a while", None, None)
