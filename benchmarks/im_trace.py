"""Instance Manager trace: a day of diurnal demand, three policies, against the bounds.

A 3-region vCDN (qoe-video, KVM caches, MOS target 4.0 everywhere) replays 24
hours of viewers, one control period (default 10 s, the IM's interval) at a
time, on a simulated plant (:mod:`tests.support.plant`: SO's placement and
removal rules, the no-op driver's modelled metrics, caches that boot in the
technology's time of the paper's Table I, 11.5 s for KVM). Two traces, each
region at its local time, viewers jittering by +-2% a period:

- **synthetic**: each region peaks at 21:00 and bottoms out at 15% of its peak
  before dawn; at 19:30 UTC a live event in ``eu`` raises its audience to 2.5
  times the diurnal level over 10 minutes, holds an hour, and fades over 20;
- **bdew**: the BDEW H25 standard household load profile (January workday, 96
  quarter hours of measured 2018-2019 household demand, as the PyPI package
  demandlib 0.2.2 ships it: ``benchmarks/data/bdew-h25-january-workday.csv``)
  as the shape of each region's day, scaled to the same peaks; no flash crowd.

The customer declares each region's peak, and SO plans for it with the qoe-video
plugin. Then, on the same trace:

- **static peak**: that plan all day;
- **CPU threshold** (Heat/Senlin style): one cache more when the region's
  caches average over 80% CPU over the last minute, one fewer under 30%,
  60 s cooldown after each change;
- **ours**: the real Instance Manager pass (:func:`reconcile_once`, QoE
  estimate, power figures, the flavor's policy hook, decisions through SO,
  host power actions through RO) on the simulated clock.

Energy is what the plant's hosts draw (idle + (peak - idle) x utilisation with
KVM's overhead). The baselines get an idealised plant where a host carrying
nothing is off at once and for free; ours gets the real thing: hosts are on
until the IM has RO switch them off, and draw their idle power while they shut
down (30 s) and while they boot (120 s, until they take VNFs), nothing when off.
The IM keeps a share of each region's demand spare on hosts that are on
(``CDNAAS_IM_HEADROOM_SHARE``, default 0.12; at least ``CDNAAS_IM_HEADROOM_VCPUS``,
default 0), plus what a rise adds while a host boots, knows the hosts' boot time
(``CDNAAS_IM_HOST_BOOT_SECONDS``, set here to the plant's) and changes no host's power
twice within the dwell where it can help it (``CDNAAS_IM_POWER_DWELL_SECONDS``,
default 1800: :mod:`cdnaas.im.hosts`).

For scale, with perfect foresight:

- **bound**: at every period, each region's fewest 4-vCPU caches that meet the
  target exactly, packed with its balancer (and the DNS VNF) on the fewest hosts,
  no boot time;
- **bound, dwell**: the same caches, each region's hosts scheduled over the day
  (a unit commitment solved exactly by HiGHS): each host's boot and shutdown paid
  (idle power, the plant's physics) and no host changing power state twice within
  the dwell. The reference of the target;
- **filled**: the bound's hosts filled with caches (more caches draw less busy
  power in this model: fewer connections per vCPU): the least any policy can draw
  in this plant, no boot time;
- **filled, switched** and **filled, dwell**: filled, scheduled as bound, dwell, with
  no dwell and with it: the least a policy paying boots and shutdowns can draw, and
  the least one keeping the dwell can;
- **floor**: filled, dwell, keeping the same headroom on hosts that are on as the
  IM: the least a policy with the IM's constraints can draw.

An interval below target is a region and control period whose viewers get
MOS < 4.0 from the model at the caches that serve them then. The surge figures
are when ours first decided to scale ``eu`` out after the flash crowd began, in
control periods from its start and from when ``eu``'s caches of the moment first
fell short (the MOS they give drops below the policy's scale-out threshold, 4.2;
negative: ours acted before, on the rising trend). Ours also lists the power
actions a real plant would have received (``POST /ro/v1/hosts/{host}/power``), how
many a day, the least time between two changes of one host, and the energy the IM
itself attributed to the vCDN (hosts carrying its VNFs), against the plant's truth
(every host on, empty or booting included).

Targets: ours within 5% of the bound under the dwell (bound, dwell), no interval
below target, no host changing power state twice within the dwell, scale out within
2 control periods of the surge.

    .venv/bin/python benchmarks/im_trace.py [--trace synthetic|bdew|both] [--period 10]
        [--hours 24] [--only ours] [--plugin qoe-video]
"""
import argparse
import datetime as dt
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from scipy import optimize, sparse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cdnaas.common import config, plugins  # noqa: E402
from cdnaas.common.flavor import HostCapacity, PlanRequest, RegionRequest  # noqa: E402
from cdnaas.common.sig import Origin  # noqa: E402
from cdnaas.db import migrate  # noqa: E402
from cdnaas.db.engine import Database  # noqa: E402
from cdnaas.im import decisions, power  # noqa: E402
from cdnaas.im import hosts as hosts_power  # noqa: E402
from cdnaas.im.models import Action, Sample  # noqa: E402
from cdnaas.im.reconcile import reconcile_once  # noqa: E402
from cdnaas_plugins.qoe_video.plugin import PLUGIN_DIR, QoeVideoFlavor  # noqa: E402
from cdnaas_plugins.qoe_video.policy import DEFAULTS  # noqa: E402
from tests.support.plant import Plant, SimHost  # noqa: E402

START = dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc)
TARGET = 4.0
#: name, viewers at the 21:00 local peak, UTC offset (hours), hosts of 16 vCPUs
REGIONS = (("eu", 160_000, 1, 6), ("us", 150_000, -5, 3), ("asia", 100_000, 8, 3))
TROUGH = 0.15
JITTER = 0.02
BDEW_FILE = Path(__file__).resolve().parent / "data" / "bdew-h25-january-workday.csv"
#: seconds a host takes to shut down and to boot until it takes VNFs (the plant's, and the
#: IM's CDNAAS_IM_HOST_BOOT_SECONDS)
HOST_OFF_SECONDS, HOST_ON_SECONDS = 30.0, 120.0
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


def bdew_profile():
    """The BDEW H25 household profile (January workday), 96 quarter hours scaled to a peak
    of 1 (``benchmarks/data/bdew-h25-january-workday.csv`` says where it comes from)."""
    lines = [line for line in BDEW_FILE.read_text().splitlines()
             if line and not line.startswith("#")][1:]
    values = [float(line.split(",")[1]) for line in lines]
    return [v / max(values) for v in values]


def bdew(peak, offset, at, profile):
    """Viewers of a region at ``at``: ``peak`` times the profile at local time (linear
    between quarter hours)."""
    quarter = ((at.hour + at.minute / 60 + at.second / 3600 + offset) % 24) * 4
    low = int(quarter)
    share = quarter - low
    return peak * (profile[low % 96] * (1 - share) + profile[(low + 1) % 96] * share)


def trace(period, hours, seed, shape="synthetic"):
    """``[(time, {region: viewers})]`` of every control period: ``synthetic`` (the cosine
    day with the flash crowd in ``eu``) or ``bdew`` (the BDEW H25 household day, no
    flash crowd), with the same peaks and jitter."""
    rng = random.Random(seed)
    profile = bdew_profile() if shape == "bdew" else None
    found = []
    for step in range(int(hours * 3600 / period)):
        at = START + dt.timedelta(seconds=step * period)
        found.append((at, {name: (diurnal(peak, offset, at)
                                  * (flash_factor(at) if name == FLASH["region"] else 1.0)
                                  if profile is None else bdew(peak, offset, at, profile))
                           * rng.uniform(1 - JITTER, 1 + JITTER)
                           for name, peak, offset, _hosts in REGIONS}))
    return found


def template(plugin):
    """The qoe-video template for ``plugin``, its model the qoe-video plugin's own
    (``QoeVideoFlavor.load_model`` finds it in that plugin's folder)."""
    document = yaml.safe_load((PLUGIN_DIR / "template.yaml").read_text())
    document.update(plugin=plugin)
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


def bound(document, demand, period, fill=False, headroom=False, dwell=None):
    """The energy (kWh) of the ideal plan, with perfect foresight.

    Default (**bound**): at every period, each region's fewest caches that meet the
    target exactly, packed with its balancer (and the DNS VNF) on the fewest hosts, no
    boot time. ``fill``: the same hosts filled with caches, when more caches draw less
    busy power (fewer connections per vCPU; **filled** is the least any policy can draw
    in this plant). ``dwell`` (seconds): each region's hosts scheduled over the whole day
    (:func:`schedule`), each boot and shutdown paid (a host switched on draws idle power
    for HOST_ON_SECONDS first, one switched off for HOST_OFF_SECONDS) and, when ``dwell``
    is not 0, no host changing power state twice within it (the IM's
    CDNAAS_IM_POWER_DWELL_SECONDS); more hosts than the fewest carry more caches with
    ``fill``, only their idle power without. ``headroom`` (the IM's spare vCPUs beyond
    the need on hosts that are on, :func:`cdnaas.im.hosts.headroom`) with ``fill`` and
    ``dwell`` gives the **floor** under the constraints the IM keeps.
    """
    model = QoeVideoFlavor.load_model(document)
    size = document["vnfs"]["cache"]["vcpus"]["max"]
    per_cache = model.max_load_for_mos(TARGET) * size
    host = SimHost("bound", "", 16)
    overhead = power.OVERHEAD[document["technology"]]

    def joules(viewers, hosts, caches):
        busy = (model.utilisation(viewers, caches * size) * caches * size
                + model.utilisation(viewers, 1)) * overhead
        return (hosts * host.idle_watts
                + (host.peak_watts - host.idle_watts) * busy / host.vcpus) * period

    total = 0.0
    for name, _peak, _offset, count in REGIONS:
        fixed = 1 + (name == REGIONS[0][0])  # balancer, DNS
        fewest, costs = [], []
        for _at, viewers in demand:
            caches = max(1, math.ceil(viewers[name] / per_cache))
            room = hosts_power.headroom(caches * size + fixed, size) if headroom else 0
            least = math.ceil((caches * size + fixed + room) / host.vcpus)
            fewest.append(least)
            costs.append([joules(viewers[name], hosts,
                                 (hosts * host.vcpus - fixed) // size if fill else caches)
                          for hosts in range(least, max(count, least) + 1)])
        if dwell is None:
            total += sum(c[0] for c in costs)
        else:
            total += schedule(fewest, costs, host.idle_watts * HOST_ON_SECONDS,
                              host.idle_watts * HOST_OFF_SECONDS, math.ceil(dwell / period))
    return total / 3.6e6


def schedule(fewest, costs, switch_on, switch_off, window):
    """The least joules of a region's identical hosts over the day, with perfect foresight.

    Period ``t`` needs ``fewest[t]`` hosts on at least and costs ``costs[t][k]`` with
    ``fewest[t] + k`` on (convex in k: each more host costs more than the last);
    switching a host on costs ``switch_on``, off ``switch_off``; with ``window`` > 0 no
    host changes state twice within ``window`` periods. That is unit commitment with a
    minimum up and down time, exact in aggregate for identical hosts: the hosts switched
    on over the last ``window`` periods are all still on, and those switched off still
    off. Cumulative counts of switches keep each window three coefficients wide; HiGHS
    (``scipy.optimize.milp``) solves it, the count of hosts on integer.
    """
    periods = len(fewest)
    most = max(f + len(c) - 1 for f, c in zip(fewest, costs))
    # columns: hosts on, switched on so far, switched off so far (period by period), then
    # each period's hosts beyond its fewest, one column a host (0..1, convex costs)
    on, ups, downs, extra = 0, periods, 2 * periods, 3 * periods
    starts = np.cumsum([0] + [len(c) - 1 for c in costs])
    columns = extra + starts[-1]
    objective = np.zeros(columns)
    objective[ups + periods - 1], objective[downs + periods - 1] = switch_on, switch_off
    for t, cost in enumerate(costs):
        objective[extra + starts[t]:extra + starts[t + 1]] = np.diff(cost)
    lower = np.zeros(columns)
    upper = np.ones(columns)
    lower[on:ups], upper[on:ups] = fewest, most
    upper[ups:extra] = np.inf
    upper[ups], upper[downs] = 0, 0  # no switch before the first period
    rows, cols, values, low, high = [], [], [], [], []

    def row(entries, floor, ceiling):
        for column, value in entries:
            rows.append(len(low))
            cols.append(column)
            values.append(value)
        low.append(floor)
        high.append(ceiling)

    for t in range(periods):
        row([(on + t, 1)] + [(extra + k, -1) for k in range(starts[t], starts[t + 1])],
            fewest[t], fewest[t])
        if t:
            row([(on + t, 1), (on + t - 1, -1), (ups + t, -1), (ups + t - 1, 1),
                 (downs + t, 1), (downs + t - 1, -1)], 0, 0)
            row([(ups + t, 1), (ups + t - 1, -1)], 0, np.inf)
            row([(downs + t, 1), (downs + t - 1, -1)], 0, np.inf)
        if window:
            before = [(ups + t - window, -1)] if t >= window else []
            row([(ups + t, 1), (on + t, -1)] + before, -np.inf, 0)
            before = [(downs + t - window, -1)] if t >= window else []
            row([(downs + t, 1), (on + t, 1)] + before, -np.inf, most)
    matrix = sparse.csr_array((values, (rows, cols)), shape=(len(low), columns))
    integral = np.zeros(columns)
    integral[on:ups] = 1
    found = optimize.milp(objective, integrality=integral,
                          bounds=optimize.Bounds(lower, upper),
                          constraints=optimize.LinearConstraint(matrix, low, high),
                          options={"mip_rel_gap": 1e-6})
    if not found.success:
        raise RuntimeError(f"the schedule of the bound was not solved: {found.message}")
    return found.fun + sum(c[0] for c in costs)


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
                plant.so.scale(plant.sig.vcdn_id, name, caches + change,
                               reason=f"mean CPU {mean:.0%}")
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
    plant = Plant(document, model, sig, hosts(), demand[0][0], power_actions=name == "ours",
                  off_seconds=HOST_OFF_SECONDS, on_seconds=HOST_ON_SECONDS)
    policy = {"static peak": None, "CPU threshold": CpuThreshold(plant, period),
              "ours": Ours(plant, directory) if directory else None}[name]
    joules, below, lowest, started = 0.0, 0, TARGET + 1, time.monotonic()
    need, misses = None, []
    for at, viewers in demand:
        plant.advance(at, viewers)
        for region in viewers:
            mos = plant.true_mos(region)
            lowest = min(lowest, mos)
            if mos < TARGET:
                below += 1
                misses.append((at, region, mos))
        joules += sum(plant.watts().values()) * period
        threshold = TARGET + DEFAULTS.out_margin
        if need is None and at >= START + FLASH["start"] \
                and plant.true_mos(FLASH["region"]) < threshold:
            need = at
        if policy is not None:
            policy.step(at)
    figures = {"policy": name, "kwh": joules / 3.6e6, "below": below, "lowest": lowest,
               "actions": plant.operations, "seconds": time.monotonic() - started,
               "misses": misses}
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
        figures["power_log"] = list(plant.power_log)
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--period", type=float, default=10.0, help="control period, seconds")
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--trace", choices=("synthetic", "bdew", "both"), default="both")
    parser.add_argument("--only", help="run only this policy (static peak, CPU threshold, ours)")
    parser.add_argument("--plugin", default="qoe-video",
                        help="flavor plugin (entry point) whose policy hook 'ours' replays")
    args = parser.parse_args()
    plugins.load(plugins.FLAVORS, args.plugin)  # fail early if it is not installed
    os.environ.setdefault("CDNAAS_IM_HOST_BOOT_SECONDS", str(HOST_ON_SECONDS))
    print(f"hosts boot in {HOST_ON_SECONDS:g} s and shut down in {HOST_OFF_SECONDS:g} s; the IM "
          f"keeps {config.setting('CDNAAS_IM_HEADROOM_SHARE'):.0%} of a region's demand spare "
          f"(at least {config.setting('CDNAAS_IM_HEADROOM_VCPUS')} vCPUs) on hosts that are on; "
          f"no host changes power twice within "
          f"{config.setting('CDNAAS_IM_POWER_DWELL_SECONDS'):g} s (the dwell) if it can help it")
    document = template(args.plugin)
    for shape in ("synthetic", "bdew") if args.trace == "both" else (args.trace,):
        run_trace(args, document, shape)


def run_trace(args, document, shape):
    demand = trace(args.period, args.hours, args.seed, shape)
    peaks = declared_peaks(demand)
    sig = plan(document, peaks)
    print(f"\n== trace {shape}: {len(demand)} control periods of {args.period:g} s; declared "
          "peaks " + ", ".join(f"{r} {v:,}" for r, v in peaks.items()) + "; static plan: "
          + ", ".join(f"{r} {len(sig.vnfs_in(r, 'cache'))} caches" for r in peaks))
    results = []
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as tmp:
        for name in [args.only] if args.only else ("static peak", "CPU threshold", "ours"):
            results.append(replay(name, document, sig, demand, args.period,
                                  tmp if name == "ours" else None))
    static = next((r["kwh"] for r in results if r["policy"] == "static peak"), None)
    dwell = config.setting("CDNAAS_IM_POWER_DWELL_SECONDS")
    floors = {"bound": bound(document, demand, args.period),
              "bound, dwell": bound(document, demand, args.period, dwell=dwell),
              "filled": bound(document, demand, args.period, fill=True),
              "filled, switched": bound(document, demand, args.period, fill=True, dwell=0),
              "filled, dwell": bound(document, demand, args.period, fill=True, dwell=dwell),
              "floor": bound(document, demand, args.period, fill=True, headroom=True,
                             dwell=dwell)}
    intervals = len(demand) * len(REGIONS)
    print(f"\n{'policy':<18}{'energy kWh':>11}{'vs static':>10}{'/ bound':>9}{'/ b. dwell':>11}"
          f"{'/ floor':>9}{'below target':>14}{'lowest MOS':>12}{'actions':>9}")

    def ratios(kwh):
        return (f"{kwh / floors['bound']:>9.3f}{kwh / floors['bound, dwell']:>11.3f}"
                f"{kwh / floors['floor']:>9.3f}")
    for r in results:
        print(f"{r['policy']:<18}{r['kwh']:>11.2f}"
              + (f"{r['kwh'] / static:>10.0%}" if static else f"{'':>10}") + ratios(r["kwh"])
              + f"{r['below']:>7}/{intervals:<6}{r['lowest']:>12.2f}{r['actions']:>9}")
    for name, kwh in floors.items():
        print(f"{name:<18}{kwh:>11.2f}" + (f"{kwh / static:>10.0%}" if static else f"{'':>10}")
              + ratios(kwh))
    ours = next((r for r in results if r["policy"] == "ours"), None)
    if ours is None:
        return
    kinds = {}
    for d in ours["decisions"]:
        kinds[d["kind"], d["outcome"]] = kinds.get((d["kind"], d["outcome"]), 0) + 1
    print("\nours, decisions: " + ", ".join(f"{k} {o} x{n}" for (k, o), n in sorted(kinds.items())))
    if ours["misses"]:
        print("ours, below target: " + ", ".join(f"{at:%H:%M:%S} {region} {mos:.2f}"
                                                 for at, region, mos in ours["misses"][:12]))
    if shape == "synthetic" and "after_onset" in ours:
        print(f"flash crowd in {FLASH['region']}: ours first scaled out {ours['after_onset']:.0f} "
              f"control periods after it began"
              + (f", {ours['after_need']:+.0f} from when its caches first fell short"
                 if "after_need" in ours else ", before its caches ever fell short")
              + " (target: within 2)")
    log = ours["power_log"]
    print(f"power actions a real plant would have received ({len(log)}: "
          f"{sum(a == 'off' for _t, _h, a, _r in log)} off, "
          f"{sum(a == 'on' for _t, _h, a, _r in log)} on; POST /ro/v1/hosts/<host>/power):")
    by_host = {}
    for at, host, action, _reason in log:
        by_host.setdefault(host, []).append((at, action))
    for host, actions in sorted(by_host.items()):
        print(f"  {host:<8}" + ", ".join(f"{action} {at:%H:%M}" for at, action in actions))
    least = min(((b - a, host, a, b) for host, actions in by_host.items()
                 for (a, _), (b, _) in zip(actions, actions[1:])), default=None)
    print(f"ours: {len(log) * 24 / args.hours:.0f} power actions a day; the least time between "
          "two changes of one host: " + (f"{least[0].total_seconds() / 60:.0f} min ({least[1]} "
                                         f"{least[2]:%H:%M} and {least[3]:%H:%M})"
                                         if least else "no host changed twice")
          + f" (dwell {dwell / 60:g} min)")
    print(f"ours: the IM attributed {ours['estimated_kwh']:.2f} kWh to the vCDN "
          f"(the plant drew {ours['kwh']:.2f}); the replay took {ours['seconds']:.0f} s")


if __name__ == "__main__":
    main()
