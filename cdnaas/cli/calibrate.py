"""``cdnaas calibrate``: measure a flavor's cache on one of the operator's hosts and write its model.

The campaign runs in RO (through ``POST /api/v1/calibrations``; see
:mod:`cdnaas.ro.calibration_campaign`); this command follows its steps with progress bars,
writes the model file it returns, and shows the calibrated QoE curve beside the model
the flavor's template names now (a sparkline here, an SVG file beside the model).
"""
from pathlib import Path

import click

from cdnaas.calibration import report
from cdnaas.calibration.reference import plugin_without_model, reference_model
from cdnaas.cli import output
from cdnaas.cli.api_commands import api
from cdnaas.common import config
from cdnaas.planning import models

def _ints(_ctx, _param, value):
    if value is None:
        return None
    try:
        return [int(item) for item in value.split(",") if item.strip()]
    except ValueError:
        raise click.BadParameter("a comma-separated list of integers, like 1,2") from None


@click.command()
@click.option("--flavor", required=True, help="The flavor whose cache is measured (its latest template).")
@click.option("--host", required=True, help="A registered host to measure on.")
@click.option("--vcpus", callback=_ints, metavar="N,N", help="vCPU counts to measure "
              "(default 1,2: on a 2-core machine more would measure the machine, not the cache).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Model file to write (default: <first CDNAAS_MODEL_DIRS folder, else the state "
                   "dir's models/>/calibrated/<name>.yaml).")
@click.option("--connections", callback=_ints, metavar="N,N",
              help="wrk connection counts (default 100,1000).")
@click.option("--floor", type=float, help="Stop adding viewers once the MOS is below this (default 3.0).")
@click.option("--viewers-start", type=int, help="First load, viewers per vCPU (default 500).")
@click.option("--max-viewers", type=int, help="Heaviest load, viewers per vCPU (default 40000).")
@click.option("--windows", type=int, help="16 s windows measured per load (default 2).")
@click.option("--window-seconds", type=float, help="QoE window (default 16, the paper's).")
@click.option("--max-seconds", type=float, help="Time bound of the whole campaign (default 1800).")
@click.option("--timeout", default=7200.0, show_default=True, help="Seconds to follow the job.")
def calibrate(flavor, host, vcpus, out, connections, floor, viewers_start, max_viewers, windows,
              window_seconds, max_seconds, timeout):
    """Run the paper's measurement campaign on HOST and write FLAVOR's calibrated model."""
    client = api()
    templates = client.templates(flavor)
    unused = model_unused(templates, flavor)
    if unused:
        output.note(f"[yellow]{unused}[/yellow]")
    body = {"flavor": flavor, "host": host}
    for key, value in (("vcpus", vcpus), ("connections", connections), ("floor", floor),
                       ("viewers_start", viewers_start), ("max_viewers", max_viewers),
                       ("windows", windows), ("window_seconds", window_seconds),
                       ("max_seconds", max_seconds)):
        if value is not None:
            body[key] = value
    job = client.start_calibration(body)
    job = output.watch_operation(client.calibration,
                                 job["id"], interval=1.0, timeout=timeout,
                                 quiet=output.wants_json())
    if job["state"] != "COMPLETED":
        output.show(job, lambda j: output.note(f"[red]calibration {j['id']} {j['state']}[/red]: "
                                                f"{j.get('error')}"))
        raise click.exceptions.Exit(1)
    document = job["result"]["model"]
    path = out or default_path(document["name"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(job["result"]["model_yaml"], encoding="utf-8")
    models.load(path)  # what was written is a model the planner reads
    kind, reference = reference_model(templates, document["technology"])
    pairs = report.curves(document, reference, kind)
    chart = path.with_suffix(".svg")
    chart.write_text(report.svg(pairs, f"{flavor} on {host}: MOS of HD viewers per vCPU"),
                     encoding="utf-8")
    folder, name = model_reference(path)
    summary = {"job": job["id"], "model_file": str(path), "svg": str(chart),
               "seconds": job["result"]["seconds"], "model": document,
               "runs": job["result"]["runs"], "template_model": name,
               "add_to_model_dirs": None if folder is None else str(folder),
               "warning": unused}
    output.show(summary, lambda s: _render(s, pairs))


def default_path(name):
    """Where a calibrated model goes by default: ``calibrated/`` of the first folder of
    ``CDNAAS_MODEL_DIRS``, else of the state dir's ``models/`` (to be added to it)."""
    folders = config.model_dirs()
    base = folders[0] if folders else config.state_dir() / "models"
    return Path(base) / "calibrated" / f"{name}.yaml"


def model_reference(path):
    """``(folder, name)``: the name a template gives the model file at ``path``
    (``model: NAME``) and the folder to add to ``CDNAAS_MODEL_DIRS`` for it to be found
    (None when one of them holds it already): the file's folder, or the one above a
    ``calibrated/`` folder (where :func:`default_path` writes)."""
    path = Path(path).resolve()
    for folder in config.model_dirs():
        base = Path(folder).resolve()
        if path.is_relative_to(base):
            return None, path.relative_to(base).as_posix()
    base = path.parent.parent if path.parent.name == "calibrated" else path.parent
    return base, path.relative_to(base).as_posix()


def model_unused(templates, flavor):
    """Why a calibration of ``flavor`` (SIDR's ``templates`` of it) would write a model
    nothing uses, or None."""
    plugin_name = plugin_without_model(templates)
    if plugin_name is None:
        return None
    return (f"flavor {flavor}'s plugin ({plugin_name}) uses no performance model: the model "
            "this calibration writes will not size, quote or watch its vCDNs (calibrate a "
            "flavor whose plugin uses one, such as qoe-video, for that)")


def _render(summary, pairs):
    model = summary["model"]
    rows, top = report.rows(pairs)
    output.table(rows, [("Curve", "curve"), (f"MOS, 0-{top:,} viewers/vCPU", "chart"),
                        ("Best MOS", "best_mos"), ("Viewers/vCPU at MOS 3.6", "viewers_at_mos_3.6"),
                        ("Last point", "last_point")], title="QoE of HD viewers (MOS 1-5)")
    output.table(model["throughput"]["points"],
                 [("Object KB", "object_kb"), ("Connections", "connections"),
                  ("Requests/s per vCPU", "requests_per_second")], title="Throughput")
    for run in summary["runs"]:
        output.table(run["viewers"], [
            ("Viewers", "viewers"), ("MOS", "mos"), ("Stalls/min", "stalls_per_minute"),
            ("Startup p90 s", "startup_p90_s"), ("Failed", "failed_viewers"),
            ("Req/s", "requests_per_second"), ("Cache CPU", "cache_cpu"),
            ("Generator CPU", "generator_cpu"), ("Isolated", "isolated")],
            title=f"Viewers against a {run['vcpus']} vCPU cache")
    output.note(f"wrote {summary['model_file']} and {summary['svg']} "
                f"(calibration took {summary['seconds']:.0f} s)")
    if summary["add_to_model_dirs"]:
        output.note(f"add {summary['add_to_model_dirs']} to CDNAAS_MODEL_DIRS (SO and IM "
                    "read models there)")
    output.note(f"then register a template version naming it: `model: "
                f"{summary['template_model']}` (cdnaas template register FILE)")
    if summary["warning"]:
        output.note(f"[yellow]{summary['warning']}[/yellow]")
