"""Purge completion time on the local driver: a vCDN of 2 regions x 16 caches (1 vCPU
each), N objects warm on every cache, then POST .../invalidations -> operation COMPLETED,
for N paths and for one prefix holding them; each purge checked (every object a MISS on
every cache, which warms them again for the next repetition).

The reference, in the same run: the same purge requests sent straight to the 32 caches'
management listeners in parallel (cdnaas.ro.vim.purge from this process, no API, SO or RO):
the floor any orchestration can approach. Also timed: a prefetch of the N paths through
the API (how the objects are first warmed).

    .venv/bin/python benchmarks/purge.py [--objects 200] [--runs 3]
"""
import argparse
import concurrent.futures
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from deploy_time import REGIONS, local_stack  # noqa: E402

from cdnaas.common.clients import RoClient  # noqa: E402
from cdnaas.ro.vim import purge  # noqa: E402

CACHES = 16  # per region: deploy_time registers flavor bench-16
PREFIX = "/plain/bench/"


def wait(session, api, accepted, timeout=300):
    """Seconds from now until the accepted operation ends; raise unless it COMPLETED."""
    operation_id = accepted.json()["operation"]["id"]
    deadline = time.monotonic() + timeout
    while True:
        operation = session.get(f"{api}/operations/{operation_id}", timeout=10).json()
        if operation["state"] not in ("PENDING", "PROCESSING"):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"operation {operation_id} still {operation['state']}")
        time.sleep(0.02)
    if operation["state"] != "COMPLETED":
        raise SystemExit(f"operation {operation_id} {operation['state']}: {operation['error']}")
    return operation


def timed_api(session, api, vcdn_id, kind, body):
    started = time.perf_counter()
    accepted = session.post(f"{api}/vcdns/{vcdn_id}/{kind}", json=body, timeout=30)
    accepted.raise_for_status()
    operation = wait(session, api, accepted)
    return time.perf_counter() - started, operation


def timed_direct(pool, caches, paths, prefixes):
    """The same purges sent straight to every cache's management listener at once."""
    started = time.perf_counter()
    list(pool.map(lambda c: purge.invalidate(c["address"], paths, prefixes), caches))
    return time.perf_counter() - started


def statuses(pool, caches, paths):
    """X-Cache-Status of every path fetched from every cache's public listener."""
    def one(cache):
        seen = []
        purge.exchange(cache["address"], 80, [p.encode() for p in paths],
                       lambda _t, answer: seen.append(answer.getheader("X-Cache-Status")))
        return seen
    return [status for seen in pool.map(one, caches) for status in seen]


def check_all(pool, caches, paths, expected):
    found = statuses(pool, caches, paths)
    wrong = len(found) - found.count(expected)
    if wrong:
        raise SystemExit(f"{wrong} of {len(found)} fetches were not {expected}")


def deploy(session, api, origin_url):
    body = {"name": "purge-bench", "flavor": f"bench-{CACHES}", "origin": origin_url,
            "regions": [{"name": r[0], "demand": 1000, "quality": {"min_mos": 3.6}}
                        for r in REGIONS],
            "lease": {"end": "2099-01-01T00:00:00Z"}}
    accepted = session.post(f"{api}/vcdns", json=body, timeout=30)
    accepted.raise_for_status()
    wait(session, api, accepted)
    return accepted.json()["vcdn"]["id"]


def measure(session, api, stack, vcdn_id, args):
    ro = RoClient(base_url=stack.urls["ro"], key_file=Path(stack.state_dir) / "service.key")
    caches = [v for v in ro.get_deployment(vcdn_id)["vnfs"] if v["role"] == "cache"]
    paths = [f"{PREFIX}{n}" for n in range(args.objects)]
    times = {"prefetch (API)": [], "paths (API)": [], "paths (direct)": [],
             "prefix (API)": [], "prefix (direct)": []}
    with concurrent.futures.ThreadPoolExecutor(len(caches)) as pool:
        seconds, _ = timed_api(session, api, vcdn_id, "prefetches", {"paths": paths})
        times["prefetch (API)"].append(seconds)
        check_all(pool, caches, paths, "HIT")
        for run in range(args.runs):
            # which side purges first alternates per run, so the caches' keys logs growing
            # over the runs weigh on both sides alike
            order = ("API", "direct") if run % 2 == 0 else ("direct", "API")
            for label, body in (("paths", {"paths": paths}), ("prefix", {"prefixes": [PREFIX]})):
                for side in order:
                    if side == "API":
                        seconds, operation = timed_api(session, api, vcdn_id, "invalidations",
                                                       body)
                        assert len(operation["steps"][0]["detail"]) == len(caches)
                    else:
                        seconds = timed_direct(pool, caches, body.get("paths", []),
                                               body.get("prefixes", []))
                    times[f"{label} ({side})"].append(seconds)
                    check_all(pool, caches, paths, "MISS")  # and warm again
    return len(caches), times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--objects", type=int, default=200, help="objects warm on every cache")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with local_stack() as (stack, session, api, origin_url):
        vcdn_id = deploy(session, api, origin_url)
        count, times = measure(session, api, stack, vcdn_id, args)
        session.delete(f"{api}/vcdns/{vcdn_id}", timeout=30)
    print(f"{count} caches (2 regions x {CACHES}, 1 vCPU each), {args.objects} objects warm "
          f"on each, {args.runs} runs; medians:")
    for label, runs in times.items():
        print(f"  {label:16s} {statistics.median(runs):.3f} s  "
              f"(runs: {', '.join(f'{t:.3f}' for t in runs)})")
    for label in ("paths", "prefix"):
        api_s, direct_s = (statistics.median(times[f"{label} ({k})"]) for k in ("API", "direct"))
        print(f"  {label}: the API's operation takes {api_s - direct_s:+.3f} s over the direct "
              f"floor ({api_s / direct_s:.1f}x)")


if __name__ == "__main__":
    main()
