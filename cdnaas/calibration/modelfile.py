"""A calibration's runs as a model file (``api-spec/model.schema.json``) of measured points.

The points are the figures per vCPU of the run with the fewest vCPUs (as the paper
reports one vCPU); the other runs give the scaling ratios stated in ``assumptions``.
Every point is ``source: measured`` with its ``calibration`` (host, date, hash of the
VNF configuration, load generator). Two readings keep the planner's rules:

- MOS must never rise with load: a load measured at a higher MOS than a lighter one
  (noise of a few hundredths) is entered at the lighter one's MOS (the running
  minimum), never above what was measured at a lighter load;
- a load the generator could not drive (its CPU saturated) is left out, and the ramp
  ended there: the cache was not what limited it.
"""
import datetime
import hashlib
import re

import yaml

from cdnaas.calibration import qoe
from cdnaas.common import plugins
from cdnaas.vnf import templates

#: the sample origin's chunk sizes in KB (cdnaas/origin/server.py)
CHUNK_KB = {"hd": 435, "low": 73}
CHUNK_SECONDS = 2


def config_sha256(vnfs, folders=()):
    """SHA-256 of the cache's configuration: its templates' text (with the templates they
    include) and its image name, as the flavor's template names them.

    :param folders: where the flavor's own templates are (its plugin's ``templates/``),
        searched before the project's, as RO renders them.
    """
    cache = (vnfs or {}).get("cache") or {}
    digest = hashlib.sha256(f"image={cache.get('image')}\n".encode())
    search = (*folders, templates.TEMPLATES_DIR)
    seen, pending = set(), list(cache.get("config_templates") or [])
    while pending:
        name = pending.pop(0)
        if name in seen:
            continue
        path = templates.find_template(name, search)
        if path is None:
            continue
        seen.add(name)
        text = path.read_text(encoding="utf-8")
        digest.update(f"--- {name}\n".encode() + text.encode())
        pending += re.findall(r'{%\s*include\s+"([^"]+)"', text)
    return digest.hexdigest()


def model_name(flavor, host, when):
    raw = f"calibrated-{flavor}-{host}-{when:%Y%m%d}".lower()
    return re.sub(r"[^a-z0-9-]", "-", raw)[:63]


def build(plan, runs, job_id, when=None):
    """The model document of ``runs`` measured for ``plan`` (a :class:`~.campaign.Plan`)."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    base = min(runs, key=lambda r: r["vcpus"])
    stamp = when.replace(microsecond=0).isoformat().replace("+00:00", "Z")
    folders = ((plugins.load(plugins.FLAVORS, plan.plugin).templates_folder(),)
               if plan.plugin else ())
    sha = config_sha256(plan.vnfs, folders)

    def provenance(tool, what):
        return {"source": "measured",
                "ref": f"cdnaas calibrate job {job_id}: {what}, {base['vcpus']} vCPU cache on "
                       f"host {plan.host}, figures per vCPU",
                "calibration": {"host": plan.host, "vcpus": base["vcpus"], "measured_at": stamp,
                                "vnf_config_sha256": sha, "tool": tool,
                                **({"qoe_model": qoe.CITATION} if tool.startswith("cdnaas-viewers")
                                   else {})}}

    throughput = [{"object_kb": p["object_kb"], "connections": p["connections"],
                   "requests_per_second": max(p["per_vcpu"], 0.1),
                   **provenance(p["tool"], f"wrk, {p['connections']} connections")}
                  for p in base["throughput"]]
    usable = [p for p in base["viewers"] if p["mos"] is not None and not generator_bound(p)]
    qoe_points, response, lowest, slowest = [], [], None, 0.0
    for point in usable:
        lowest = point["mos"] if lowest is None else min(lowest, point["mos"])
        what = (f"{point['viewers']} simulated HD viewers, MOS "
                f"{point['mos']} measured")
        qoe_points.append({"viewers_per_vcpu": point["per_vcpu"], "mos": round(lowest, 3),
                           **provenance(point["tool"], what)})
        p90 = (point.get("latency_ms") or {}).get("p90")
        if p90:
            slowest = max(slowest, p90)
            response.append({"viewers_per_vcpu": point["per_vcpu"], "max_ms": round(slowest, 3),
                             **provenance(point["tool"], f"{point['viewers']} viewers, p90 "
                                                         f"{p90} ms measured")})
    document = {
        "format": 1, "name": model_name(plan.flavor, plan.host, when),
        "technology": plan.technology,
        "description": (f"The {plan.flavor} flavor's cache (template v{plan.template_version}, "
                        f"image {((plan.vnfs or {}).get('cache') or {}).get('image')}) measured "
                        f"on host {plan.host} by cdnaas calibrate on {when:%Y-%m-%d}."),
        "source": {"title": f"Calibration of the {plan.flavor} cache on host {plan.host}",
                   "authors": "the operator's cdnaas calibrate run " + job_id,
                   "published": stamp},
        "assumptions": assumptions(plan, runs, base),
        "video": {"bitrate_kbps": round(CHUNK_KB["hd"] * 1024 * 8 / CHUNK_SECONDS / 1000),
                  "chunk_seconds": CHUNK_SECONDS, "chunk_kb": dict(CHUNK_KB)},
        "throughput": {"vcpu_scaling": "linear", "points": throughput},
        "qoe": {"video": "hd", "points": qoe_points},
    }
    if response:
        document["response_time"] = [{"percentile": 90, "video": "hd", "points": response}]
    return document


def generator_bound(point, limit=0.85):
    """True when the load generator used most of a CPU: it, not the cache, set the pace."""
    return point.get("isolated") and (point.get("generator_cpu") or 0) >= limit


def assumptions(plan, runs, base):
    lines = [
        f"Figures are per vCPU, from a {base['vcpus']} vCPU cache; the model assumes n vCPUs "
        "serve n times as much (the paper's finding).",
        f"MOS is the QoE model of {qoe.CITATION}: MOS = 3.50 exp(-(0.15 L + 0.19) N) + 1.50 "
        f"for N stalls of L s, its best {qoe.BEST} (no stall), less "
        f"{qoe.PER_STARTUP_LEVEL} per level of startup delay above the first (levels up to "
        f"{qoe.STARTUP_LEVELS[0]:g} s, {qoe.STARTUP_LEVELS[1]:g} s, beyond) in the window "
        "where playback started; per viewer and "
        f"{plan.window_seconds:g} s window, smoothed MOS(i+1) = 0.3 MOS(i) + 0.7 s(i+1), "
        "averaged over viewers and windows; a stall over half a window or a failed playback "
        "scores 1.0 (the CDNaaS paper, section IV-D1).",
        f"Viewers fetch one {CHUNK_KB['hd']} KB chunk every {CHUNK_SECONDS} s with 2 chunks of "
        "buffer; the ramp stopped below MOS "
        f"{plan.floor:g}; beyond the last point the planner reads MOS 1.0.",
        "Where a heavier load measured a higher MOS than a lighter one (noise), the lighter "
        "one's MOS is entered: the curve never rises with load.",
    ]
    for run in runs:
        if run is base:
            continue
        ratios = [p["per_vcpu"] / b["per_vcpu"] for p, b in zip(run["throughput"], base["throughput"])
                  if b["per_vcpu"]]
        if ratios:
            lines.append(f"A {run['vcpus']} vCPU cache served {min(ratios):.2f}-{max(ratios):.2f} "
                         f"times the per-vCPU throughput of the {base['vcpus']} vCPU one"
                         + ("" if all(p["isolated"] for p in run["throughput"]) else
                            " (its load generator shared its CPUs: a lower bound)") + ".")
    for run in runs:
        if run.get("stopped"):
            lines.append(f"The {run['vcpus']} vCPU ramp ended at its last point: "
                         f"{run['stopped']}.")
    bound = [p for p in base["viewers"] if generator_bound(p)]
    if bound:
        lines.append(f"The load generator saturated its CPU at {bound[0]['viewers']} viewers; "
                     "that load and heavier ones are not in the curve.")
    return lines


def dump(document):
    """The model as YAML text, with a header saying what it is."""
    header = ("# Performance model measured by `cdnaas calibrate` (see cdnaas/calibration/).\n"
              "# Checked against api-spec/model.schema.json; a service template names it in\n"
              "# `model:` once it is in the flavor plugin's folder or in CDNAAS_MODEL_DIRS.\n")
    return header + yaml.safe_dump(document, sort_keys=False, width=100, allow_unicode=True)
