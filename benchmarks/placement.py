"""Placement benchmark: the qoe-video plugin's plans against the exact optimum.

100 random vCDN requests (fixed seed), a third each over 10, 100 and 1,000
hosts split among their 1 to 3 regions, in two scenarios (:data:`SCENARIOS`):
hosts come in four sizes with per-host measured watts within 5% of their
model's, 40% of them already carrying reservations; then a harder one, with
watts within 20% and only 5% of hosts on, so that choosing which hosts to
power on matters more and pruning removes fewer hosts. Requests mix demands,
MOS and response-time targets, vm and container models, and the
fewest_hosts and spread objectives.

For every request the plugin plans as it would for SO (exact integer program
or heuristic, picked by size); every region's placement is then costed
(``cdnaas.planning.placement.energy_watts``) against the optimum of the same
integer program over all the region's hosts, unpruned and without a time
limit. The heuristic alone is measured the same way, so its quality shows
even where the plugin solves exactly. Times are per request: the median of
several runs of ``plan()``, dimensioning and SIG included.

Run: ``.venv/bin/python benchmarks/placement.py`` (under a minute on 2 cores).
"""
import copy
import random
import statistics
import time
from pathlib import Path

import yaml

from cdnaas.common import errors
from cdnaas.common.flavor import HostCapacity, InsufficientCapacity, PlanRequest, RegionRequest
from cdnaas.common.sig import Origin
from cdnaas.planning import placement
from cdnaas_plugins.qoe_video.plugin import QoeVideoFlavor

SEED = 20170601
REQUESTS = 100
# (title, share of hosts already on, spread of per-host watts around the model's)
SCENARIOS = [("40% of hosts on, watts within 5% of their model", 0.4, 0.05),
             ("5% of hosts on, watts within 20% of their model", 0.05, 0.2)]
HOST_COUNTS = (10, 100, 1000)
RUNS = 5
# vCPUs, RAM (MB), idle and peak watts of the host models
HOST_MODELS = [(8, 32768, 60, 130), (16, 65536, 115, 269), (32, 131072, 170, 420),
               (64, 262144, 250, 700)]
TARGETS = [{"min_mos": 3.6}, {"min_mos": 4.0}, {"min_mos": 4.5}, {"min_mos": 4.8},
           {"response_time": {"percentile": 90, "max_ms": 600}}]
TEMPLATE = yaml.safe_load((Path(__file__).resolve().parents[1] / "plugins/qoe_video/template.yaml")
                          .read_text(encoding="utf-8"))


def random_hosts(rng, scenario, region, count):
    _, on, spread = scenario
    hosts = []
    for index in range(count):
        vcpus, ram, idle, peak = rng.choice(HOST_MODELS)
        used = rng.randint(1, vcpus - 1) if rng.random() < on else 0
        hosts.append(HostCapacity(f"{region}-h{index:04d}", vcpus - used, ram - used * 4096,
                                  vcpus, ram, round(idle * rng.uniform(1 - spread, 1 + spread), 1),
                                  round(peak * rng.uniform(1 - spread, 1 + spread), 1)))
    return hosts


def random_template(rng):
    template = copy.deepcopy(TEMPLATE)
    if rng.random() < 0.5:
        template.update(technology="container", model="models/container.yaml")
    if rng.random() < 0.4:
        template["placement"] = {"objective": "spread",
                                 "max_host_share": rng.choice([0.5, 0.34, 0.25])}
    return template


def random_request(rng, scenario, index, total_hosts):
    count = rng.randint(1, 3)
    names = [f"r{k}" for k in range(count)]
    template = random_template(rng)
    # demands up to what about a quarter of a region's capacity can serve on vm at MOS 4
    demand_cap = max(3000, total_hosts // count * 16 // 4 * 7000)
    return PlanRequest(
        vcdn_id=f"v-{index}", hostname=f"v{index}.acme.cdn.example.net",
        origin=Origin("http", "origin.example.com", 80), default_region=names[0],
        template=template,
        regions=[RegionRequest(name=name, demand=rng.randint(1000, min(demand_cap, 400000)),
                               quality=rng.choice(TARGETS), zone=None, vim_region=None,
                               client_prefixes=[],
                               hosts=random_hosts(rng, scenario, name, total_hosts // count))
                 for name in names])


def requests(rng, scenario):
    """REQUESTS feasible requests, a third per host count; infeasible draws are counted and redrawn."""
    made, refused = [], 0
    plugin = QoeVideoFlavor()
    for index in range(REQUESTS):
        total_hosts = HOST_COUNTS[index * len(HOST_COUNTS) // REQUESTS]
        while True:
            request = random_request(rng, scenario, index, total_hosts)
            try:
                plugin.plan(request)
            except (InsufficientCapacity, errors.Unprocessable):
                refused += 1
                continue
            made.append((total_hosts, request))
            break
    return made, refused


def cost(outcome, mapping):
    return placement.energy_watts(outcome.instances, outcome.request.hosts, mapping)


def measure(total_hosts, request, plugin):
    """Costs (plugin, heuristic, optimum), solver kinds and times for one request."""
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        plugin.plan(request)
        times.append(time.perf_counter() - started)
    outcomes = plugin.plan_regions(request)
    template = request.template["placement"]
    share = placement.share_limit(template["objective"], template.get("max_host_share"))
    found = {"plugin": 0.0, "heuristic": 0.0, "optimum": 0.0, "exact_regions": 0,
             "regions": len(outcomes), "heuristic_s": 0.0, "optimum_s": 0.0}
    for outcome in outcomes:
        name, instances, hosts = outcome.request.name, outcome.instances, outcome.request.hosts
        found["plugin"] += cost(outcome, {v.name: v.host for v in outcome.vnfs})
        started = time.perf_counter()
        found["heuristic"] += cost(outcome, placement.place_greedy(name, instances, hosts, share))
        found["heuristic_s"] += time.perf_counter() - started
        started = time.perf_counter()
        found["optimum"] += cost(outcome, placement.place_exact(name, instances, hosts, share,
                                                                prune=False))
        found["optimum_s"] += time.perf_counter() - started
        # which solver place() picked (the same size test it makes)
        pairs = placement._Problem(name, instances, hosts, share).pairs
        found["exact_regions"] += pairs <= placement.EXACT_MAX_PAIRS
    found["time_s"] = statistics.median(times)
    return found


def report(scenario, rng, plugin):
    made, refused = requests(rng, scenario)
    results = [(hosts, measure(hosts, request, plugin)) for hosts, request in made]
    print(f"\n{scenario[0]}: {len(made)} requests ({refused} infeasible draws redrawn)\n")
    header = (f"{'hosts':>6} {'reqs':>5} {'regions exact/heur':>19} {'plugin/opt worst':>17} "
              f"{'median':>8} {'heur/opt worst':>15} {'median':>8} {'plan ms med':>12} "
              f"{'max':>7} {'heur ms':>8} {'full ILP ms':>12}")
    print(header)
    print("-" * len(header))
    groups = [(h, [r for n, r in results if n == h]) for h in HOST_COUNTS]
    for hosts, rows in groups + [("all", [r for _, r in results])]:
        plugin_ratio = [r["plugin"] / r["optimum"] for r in rows]
        heuristic_ratio = [r["heuristic"] / r["optimum"] for r in rows]
        exact = sum(r["exact_regions"] for r in rows)
        regions = sum(r["regions"] for r in rows)
        times = [r["time_s"] * 1000 for r in rows]
        print(f"{hosts:>6} {len(rows):>5} {f'{exact}/{regions - exact}':>19} "
              f"{max(plugin_ratio):>17.4f} {statistics.median(plugin_ratio):>8.4f} "
              f"{max(heuristic_ratio):>15.4f} {statistics.median(heuristic_ratio):>8.4f} "
              f"{statistics.median(times):>12.1f} {max(times):>7.1f} "
              f"{statistics.median(r['heuristic_s'] * 1000 for r in rows):>8.1f} "
              f"{statistics.median(r['optimum_s'] * 1000 for r in rows):>12.1f}")


def main():
    started = time.perf_counter()
    rng = random.Random(SEED)
    print(f"seed {SEED}; plan ms = median of {RUNS} plan() runs per request (max: worst request);"
          " heur ms and full ILP ms: per request, medians")
    for scenario in SCENARIOS:
        report(scenario, rng, QoeVideoFlavor())
    print("\ntargets: within 1% of optimal (ratio <= 1.01); under 50 ms per request at 1000 hosts."
          f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
