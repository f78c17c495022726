"""What the CLI shows of the Instance Manager: sparklines of a vCDN's metrics, its decisions
and the hosts' power; ``charts`` on its own, then the commands against a real stack on the
noop driver whose load file feeds the modelled viewers.

Its tests that start no process are in tests/unit/test_cli_metrics_units.py (the unit tier)."""
import datetime as dt
import json
import re
import time

import pytest
from click.testing import CliRunner

from cdnaas.cli.main import cli
from cdnaas.common import charts
from cdnaas.common import timeutil
from tests.support.api import vcdn_body
from tests.support.im import FLAVOR, eventually, modelled_stack, set_viewers


# -- against a running stack ------------------------------------------------------------------

def invoke(args, env, token):
    result = CliRunner().invoke(cli, args, env={**env, "CDNAAS_TOKEN": token, "COLUMNS": "250"},
                                catch_exceptions=False)
    return result


def invoke_json(args, env, token):
    result = invoke(["--json", *args], env, token)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def scaled(tmp_path_factory):
    """A stack whose vCDN saw 8000 then 16000 viewers in eu-west and was scaled out for it."""
    with modelled_stack(tmp_path_factory.mktemp("cli-metrics")) as stack:
        body = vcdn_body("charted", (("eu-west", 10000), ("us-east", 5000)), flavor=FLAVOR)
        accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
        vcdn_id = accepted["vcdn"]["id"]
        assert stack.acme.wait(accepted["operation"]["id"])["state"] == "COMPLETED"

        def region_viewers():
            found = stack.acme.ok("GET", f"/vcdns/{vcdn_id}/metrics", params={"scope": "region"})
            return [p["viewers"] for s in found["series"] if s["key"] == "eu-west"
                    for p in s["points"]]

        set_viewers(stack, vcdn_id, eu_west=8000, us_east=2000)
        eventually(lambda: region_viewers().count(8000) >= 3, "three samples of 8000 viewers",
                   25)
        set_viewers(stack, vcdn_id, eu_west=16000, us_east=2000)
        [scale_out] = eventually(lambda: stack.acme.ok(
            "GET", f"/vcdns/{vcdn_id}/decisions", params={"kind": "scale_out"})["decisions"],
            "a scale out", 25)
        assert stack.acme.wait(scale_out["details"]["operation"])["state"] == "COMPLETED"
        stack.vcdn_id = vcdn_id
        stack.tokens = {tenant: stack.operator.ok("POST", f"/tenants/{tenant}/tokens", 201,
                                                  json={})["token"]
                        for tenant in ("acme", "globex")}
        yield stack


def test_metrics_draw_one_bar_per_sample_of_each_region(scaled):
    env, token = scaled.env, scaled.tokens["acme"]
    time.sleep(1.5)  # let the passes in flight at `until` write their points
    until = timeutil.utcnow() - dt.timedelta(seconds=1)
    window = ["--since", "10m", "--until", timeutil.isoformat(until)]
    found = invoke_json(["vcdn", "metrics", scaled.vcdn_id, *window], env, token)
    series = {s["key"]: s["points"] for s in found["series"]}
    assert set(series) == {"eu-west", "us-east"} and all(s["scope"] == "region"
                                                          for s in found["series"])
    eu_west = series["eu-west"]
    viewers = [p["viewers"] for p in eu_west]
    assert 8000 in viewers and 16000 in viewers and eu_west[-1]["watts"] > 0

    shown = invoke(["vcdn", "metrics", scaled.vcdn_id, *window, "--width", "1000"], env, token)
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    viewers_line = next(line for line in lines if "eu-west" in line and "viewers" in line)
    expected = charts.sparkline(viewers)
    assert len(expected) == len(eu_west) and len(set(expected.strip())) >= 2
    assert expected in viewers_line and f" {len(eu_west)} " in viewers_line
    # latest, min, max: a pass before the first load file may have counted 0 viewers
    cells = [cell.strip() for cell in viewers_line.split("│")]
    assert cells[-4:-1] == [f"{v:,.0f}" for v in (viewers[-1], min(viewers), max(viewers))]
    mos_line = next(line for line in lines if "eu-west" in line and " MOS " in line)
    assert charts.sparkline([p["mos"] for p in eu_west]) in mos_line
    assert f"{eu_west[-1]['mos']:.2f}" in mos_line
    assert sum(1 for line in lines if " watts " in line) == 2  # one per region

    squeezed = invoke(["vcdn", "metrics", scaled.vcdn_id, *window, "--width", "5"], env, token)
    assert charts.sparkline(charts.resample(viewers, 5), min(viewers), max(viewers)) in \
        squeezed.stdout


def test_metrics_of_an_empty_window_or_another_tenants_vcdn(scaled):
    env = scaled.env
    empty = invoke(["vcdn", "metrics", scaled.vcdn_id, "--since", "2001-01-01T00:00:00Z",
                    "--until", "2001-01-01T01:00:00Z"], env, scaled.tokens["acme"])
    assert empty.exit_code == 0 and "no samples between 2001-01-01 00:00:00" in empty.stdout
    backwards = invoke(["vcdn", "metrics", scaled.vcdn_id, "--since", "1m", "--until", "2h"],
                       env, scaled.tokens["acme"])
    assert backwards.exit_code == 1 and "since must not be after until" in backwards.stderr
    foreign = invoke(["vcdn", "metrics", scaled.vcdn_id], env, scaled.tokens["globex"])
    assert foreign.exit_code == 1


def test_the_operator_sees_each_region_of_every_vcdn_against_its_target(scaled):
    shown = invoke(["quality"], scaled.env, scaled.operator_token)
    assert shown.exit_code == 0, shown.output
    eu_west = next(line for line in shown.stdout.splitlines()
                   if "charted (acme)" in line and "eu-west" in line)
    assert "/ 4.00" in eu_west and "16,000" in eu_west
    assert re.search(r"\d+ vCDNs?, [\d,]+ viewers, [\d,.]+ W; ", shown.stdout)
    refused = invoke(["quality"], scaled.env, scaled.tokens["acme"])
    assert refused.exit_code == 1 and "(operator)" in refused.stderr


def test_decisions_show_the_scale_out_and_why(scaled):
    env, token = scaled.env, scaled.tokens["acme"]
    found = invoke_json(["vcdn", "decisions", scaled.vcdn_id], env, token)
    scale_out = next(d for d in found if d["kind"] == "scale_out")
    assert scale_out["outcome"] == "started" and scale_out["region"] == "eu-west"
    assert scale_out["details"]["samples"][-1]["viewers"] == 16000

    shown = invoke(["vcdn", "decisions", scaled.vcdn_id], env, token)
    assert shown.exit_code == 0, shown.output
    row = next(line for line in shown.stdout.splitlines() if "scale_out" in line)
    assert "eu-west" in row and "started" in row and "predicted MOS" in row
    assert timeutil.isoformat(timeutil.parse(scale_out["created_at"]))[:19].replace("T", " ") \
        in row

    only = invoke_json(["vcdn", "decisions", scaled.vcdn_id, "--kind", "health"], env, token)
    assert only and {d["kind"] for d in only} == {"health"}
    assert invoke_json(["vcdn", "decisions", scaled.vcdn_id, "--since", "2099-01-01T00:00:00Z"],
                       env, token) == []


def test_operators_see_each_hosts_power_and_tenants_do_not(scaled):
    env = scaled.env
    power = invoke_json(["hosts", "power"], env, scaled.operator_token)
    hosts = {h["name"]: h for h in power["hosts"]}
    assert set(hosts) >= {"eu-1", "eu-2", "us-1"} and power["totals"]["hosts"] == len(hosts)
    busy = max(hosts.values(), key=lambda h: h["utilisation"] or 0)
    assert busy["watts"] > busy["idle_watts"]

    shown = invoke(["hosts", "power"], env, scaled.operator_token)
    assert shown.exit_code == 0, shown.output
    row = next(line for line in shown.stdout.splitlines() if f" {busy['name']} " in line)
    assert charts.share_bar(busy["utilisation"]) in row and f"{busy['watts']:,.1f}" in row
    assert "model" in row
    assert f"{power['totals']['hosts']} hosts drawing {power['totals']['watts']:,.1f} W" in \
        shown.stdout

    refused = invoke(["hosts", "power"], env, scaled.tokens["acme"])
    assert refused.exit_code == 1 and refused.stdout == ""
