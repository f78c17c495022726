"""Instance Manager trace: a day of diurnal demand with a flash crowd, three policies.

A 3-region vCDN (qoe-video, KVM caches, MOS target 4.0 everywhere) replays 24
hours of viewers, one control period (default 10 s, the IM's interval) at a
time, on a simulated plant (:mod:`cdnaas.im.simulation`: SO's placement and
removal rules, the no-op driver's modelled metrics, operations that take the
paper's KVM boot time). Each region peaks at 21:00 local time and bottoms out
at 15% of its peak before dawn; viewers jitter by +-2% a period. At 19:30 UTC
a live event in ``eu`` raises its audience to 2.5 times the diurnal level over
10 minutes, holds an hour, and fades over 20 minutes.

The customer declares each region's peak, flash crowd included, and SO plans
for it with the qoe-video plugin. Then, on the same trace:

- **static peak**: that plan all day;
- **CPU threshold** (Heat/Senlin style): one cache more when the region's
  caches average over 80% CPU over the last minute, one fewer under 30%,
  60 s cooldown after each change;
- **ours**: the real Instance Manager pass (:func:`reconcile_once`, QoE
  estimate, power figures, the flavor's policy hook, decisions through SO)
  on the simulated clock.

For scale, **bound** is what no policy can beat with this flavor and these
hosts: at every period, each region with the fewest 4-vCPU caches that meet
the target exactly, packed with its balancer (and the DNS VNF) on the fewest
hosts, no boot time.

Energy is what the plant's hosts draw (idle + (peak - idle) x utilisation with
KVM's overhead; a host carrying nothing is off); an interval below target is
a region and control period whose viewers get MOS < 4.0 from the model at
the caches that serve them then. The surge figures are when ours first
decided to scale ``eu`` out after the flash crowd began, in control periods
from its start and from when ``eu``'s caches of the moment first fell short
(the MOS they give drops below the policy's scale-out threshold, 4.2; negative:
ours acted before, on the rising trend). Ours also reports the energy the IM
itself attributed to the vCDN, against the plant's truth.

Targets: ours at most 60% of static peak's energy, no interval below target,
scale out within 2 control periods of the surge.

    .venv/bin/python benchmarks/im_trace.py [--period 10] [--hours 24] [--plugin qoe-video]
"""
import argparse
import datetime as dt
import math
import random
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cdnaas.common import plugins  # noqa: E402
from cdnaas.common.flavor import HostCapacity, PlanRequest, RegionRequest  # noqa: E402
from cdnaas.common.sig import Origin  # noqa: E402
from cdnaas.db import migrate  # noqa: E402
from cdnaas.db.engine import Database  # noqa: E402
from cdnaas.im import decisions, power  # noqa: E402
from cdnaas.im.models import Action, Sample  # noqa: E402
from cdnaas.im.reconcile import reconcile_once  # noqa: E402
from cdnaas.im.simulation import Plant, SimHost  # noqa: E402
from cdnaas_plugins.qoe_video.plugin import PLUGIN_DIR, QoeVideoFlavor  # noqa: E402
from cdnaas_plugins.qoe_video.policy import DEFAULTS  # noqa: E402

START = dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc)
TARGET = 4.0
#: name, viewers at the 21:00 local peak, UTC offset (hours), hosts of 16 vCPUs
REGIONS = (("eu", 160_000, 1, 6), ("us", 150_000, -5, 3), ("asia", 100_000, 8, 3))
TROUGH = 0.15
JITTER = 0.02
FLASH = {"region": "eu", "start": dt.timedelta(hours=19, minutes=30), "ramp": 600,
         "hold": 3600, "fade": 1200, "factor": 2.5}


def diurnal(peak, offset, at):
    """Viewers of a region at ``at``: 21:00 local at ``peak``, TROUGH of it before dawn."""
    hour = (at.hour + at.minute / 60 + at.second / 3600 + offset) % 24
    shape = ((1 + math.cos(2 * math.pi * (hour - 21) / 24)) / 2) ** 1.5
    return peak * (TROUGH + (1 - TROUGH) * shape)


def flash_factor(at):
    """How many times the diurnal level the flash crowd makes at ``at`` (1 outside it)."""
    into = (at - (START + FLASH["start"])).total_seconds()
    ramp, hold, fade, factor = FLASH["ramp"], FLASH["hold"], FLASH["fade"], FLASH["factor"]
    if into < 0 or into > ramp + hold + fade:
        return 1.0
    if into < ramp:
        return 1 + (factor - 1) * into / ramp
    if into < ramp + hold:
        return factor
    return factor - (factor - 1) * (into - ramp - hold) / fade


def trace(period, hours, seed):
    """``[(time, {region: viewers})]`` of every control period."""
    rng = random.Random(seed)
    found = []
    for step in range(int(hours * 3600 / period)):
        at = START + dt.timedelta(seconds=step * period)
        found.append((at, {name: diurnal(peak, offset, at)
                           * (flash_factor(at) if name == FLASH["region"] else 1.0)
                           * rng.uniform(1 - JITTER, 1 + JITTER)
                           for name, peak, offset, _hosts in REGIONS}))
    return found


def template(plugin):
    """The qoe-video template for ``plugin``, its model named by absolute path."""
    document = yaml.safe_load((PLUGIN_DIR / "template.yaml").read_text())
    document.update(plugin=plugin, model=str(PLUGIN_DIR / document["model"]))
    return document


def hosts():
    return [SimHost(f"{name}-{index}", name, 16) for name, _peak, _offset, count in REGIONS
            for index in range(1, count + 1)]


def declared_peaks(demand):
    return {name: math.ceil(max(viewers[name] for _at, viewers in demand))
            for name, *_rest in REGIONS}


def plan(document, peaks):
    """SO's plan of the vCDN for the declared peaks (the qoe-video plugin on empty hosts)."""
    free = {}
    for host in hosts():
        free.setdefault(host.region, []).append(HostCapacity(
            host.name, host.vcpus, 10 ** 9, host.vcpus, 10 ** 9, host.idle_watts, host.peak_watts))
    request = PlanRequest(
        vcdn_id="trace", hostname="trace.tv.cdn.example.net",
        origin=Origin("https", "origin.tv.example.com", 443), default_region=REGIONS[0][0],
        template=document,
        regions=[RegionRequest(name=name, demand=peaks[name], quality={"min_mos": TARGET},
                               zone=None, vim_region=None, client_prefixes=[f"10.{i}.0.0/16"],
                               hosts=free[name]) for i, (name, *_rest) in enumerate(REGIONS)])
    return QoeVideoFlavor().plan(request)


def bound(document, demand, period):
    """The energy (kWh) of the ideal plan of every period (see the module docstring)."""
    model = QoeVideoFlavor.load_model(document)
    size = document["vnfs"]["cache"]["vcpus"]["max"]
    per_cache = model.max_load_for_mos(TARGET) * size
    host = SimHost("bound", "", 16)
    overhead = power.OVERHEAD[document["technology"]]
    joules = 0.0
    for _at, viewers in demand:
        for name, *_rest in REGIONS:
            caches = max(1, math.ceil(viewers[name] / per_cache))
            vcpus = caches * size + 1 + (name == REGIONS[0][0])  # balancer, DNS
            busy = (model.utilisation(viewers[name], caches * size) * caches * size
                    + model.utilisation(viewers[name], 1)) * overhead
            joules += (math.ceil(vcpus / host.vcpus) * host.idle_watts
                       + (host.peak_watts - host.idle_watts) * busy / host.vcpus) * period
    return joules / 3.6e6


class CpuThreshold:
    """Heat/Senlin-style autoscaling on the caches' mean CPU over the last minute."""

    HIGH, LOW, WINDOW, COOLDOWN = 0.8, 0.3, 60, 60

    def __init__(self, plant, period):
        self.plant, self.period = plant, period
        self.samples = {name: [] for name, *_rest in REGIONS}
        self.quiet_until = START

    def step(self, now):
        plant = self.plant
        for name, samples in self.samples.items():
            samples.append(plant.cache_utilisation(name))
            del samples[:-max(1, int(self.WINDOW / self.period))]
        if plant.busy or now < self.quiet_until:
            return
        bounds = plant.template["vnfs"]["cache"]["instances"]
        for name, samples in self.samples.items():
            mean = sum(samples) / len(samples)
            caches = len(plant.sig.vnfs_in(name, "cache"))
            change = 1 if mean > self.HIGH and caches < bounds["max"] else \
                -1 if mean < self.LOW and caches > bounds["min"] else 0
            if change:
                plant.so.post(f"/so/v1/instances/{plant.sig.vcdn_id}/scale",
                              json={"region": name, "caches": caches + change,
                                    "reason": f"mean CPU {mean:.0%}"})
                self.quiet_until = now + dt.timedelta(seconds=self.COOLDOWN)
                return


class Ours:
    """The real Instance Manager pass on the simulated plant, with its own database."""

    def __init__(self, plant, directory):
        url = f"sqlite:///{directory}/im.db"
        migrate.upgrade("im", url)
        self.database = Database(url)
        self.plant = plant

    def step(self, now):
        if not self.plant.busy:  # SO would list it as UPDATING: the pass skips it anyway
            reconcile_once(self.database, now=now, so=self.plant.so, ro=self.plant.ro,
                           sidr=self.plant.sidr)

    def decisions(self):
        with self.database.sessions() as session:
            return [decisions.view(a) for a in session.query(Action).order_by(Action.id)]

    def estimated_kwh(self):
        """Energy the IM attributed to the vCDN over the replay (its last vCDN point)."""
        with self.database.sessions() as session:
            last = session.query(Sample).filter(Sample.scope == "vcdn").order_by(
                Sample.at.desc()).first()
        return last.energy_wh / 1000


def replay(name, document, sig, demand, period, directory=None):
    """Run one policy over the trace; return its figures."""
    model = QoeVideoFlavor.load_model(document)
    plant = Plant(document, model, sig, hosts(), demand[0][0])
    policy = {"static peak": None, "CPU threshold": CpuThreshold(plant, period),
              "ours": Ours(plant, directory) if directory else None}[name]
    joules, below, lowest, started = 0.0, 0, TARGET + 1, time.monotonic()
    need = None
    for at, viewers in demand:
        plant.advance(at, viewers)
        for region in viewers:
            mos = plant.true_mos(region)
            lowest = min(lowest, mos)
            below += mos < TARGET
        joules += sum(plant.watts().values()) * period
        threshold = TARGET + DEFAULTS.out_margin
        if need is None and at >= START + FLASH["start"] \
                and plant.true_mos(FLASH["region"]) < threshold:
            need = at
        if policy is not None:
            policy.step(at)
    figures = {"policy": name, "kwh": joules / 3.6e6, "below": below, "lowest": lowest,
               "actions": plant.operations, "seconds": time.monotonic() - started}
    if isinstance(policy, Ours):
        outs = [d for d in policy.decisions() if d["kind"] == "scale_out"
                and d["region"] == FLASH["region"] and d["outcome"] == "started"
                and dt.datetime.fromisoformat(d["created_at"]) >= START + FLASH["start"]]
        if outs:
            first = dt.datetime.fromisoformat(outs[0]["created_at"])
            figures["after_onset"] = (first - START - FLASH["start"]).total_seconds() / period
            if need is not None:
                figures["after_need"] = (first - need).total_seconds() / period
        figures["decisions"] = policy.decisions()
        figures["estimated_kwh"] = policy.estimated_kwh()
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--period", type=float, default=10.0, help="control period, seconds")
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--plugin", default="qoe-video",
                        help="flavor plugin (entry point) whose policy hook 'ours' replays")
    args = parser.parse_args()
    plugins.load(plugins.FLAVORS, args.plugin)  # fail early if it is not installed
    document = template(args.plugin)
    demand = trace(args.period, args.hours, args.seed)
    peaks = declared_peaks(demand)
    sig = plan(document, peaks)
    print(f"{len(demand)} control periods of {args.period:g} s; declared peaks "
          + ", ".join(f"{r} {v:,}" for r, v in peaks.items()) + "; static plan: "
          + ", ".join(f"{r} {len(sig.vnfs_in(r, 'cache'))} caches" for r in peaks))
    results = []
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as tmp:
        for name in ("static peak", "CPU threshold", "ours"):
            results.append(replay(name, document, sig, demand, args.period,
                                  tmp if name == "ours" else None))
    static = results[0]["kwh"]
    ideal = bound(document, demand, args.period)
    intervals = len(demand) * len(REGIONS)
    print(f"\n{'policy':<15}{'energy kWh':>12}{'vs static':>11}{'below target':>14}"
          f"{'lowest MOS':>12}{'actions':>9}")
    for r in results:
        print(f"{r['policy']:<15}{r['kwh']:>12.2f}{r['kwh'] / static:>11.0%}"
              f"{r['below']:>7}/{intervals:<6}{r['lowest']:>12.2f}{r['actions']:>9}")
    print(f"{'bound':<15}{ideal:>12.2f}{ideal / static:>11.0%}")
    ours = results[-1]
    kinds = {}
    for d in ours["decisions"]:
        kinds[d["kind"], d["outcome"]] = kinds.get((d["kind"], d["outcome"]), 0) + 1
    print("\nours, decisions: " + ", ".join(f"{k} {o} x{n}" for (k, o), n in sorted(kinds.items())))
    if "after_onset" in ours:
        print(f"flash crowd in {FLASH['region']}: ours first scaled out {ours['after_onset']:.0f} "
              f"control periods after it began"
              + (f", {ours['after_need']:+.0f} from when its caches first fell short"
                 if "after_need" in ours else ", before its caches ever fell short")
              + " (target: within 2)")
    print(f"ours: the IM attributed {ours['estimated_kwh']:.2f} kWh to the vCDN "
          f"(the plant drew {ours['kwh']:.2f}); the replay took {ours['seconds']:.0f} s")


if __name__ == "__main__":
    main()
