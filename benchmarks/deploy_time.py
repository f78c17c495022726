"""Deployment time on the local driver: POST /vcdns -> ACTIVE (a client in each region
resolved the vCDN and fetched through it), for 2 regions x 2 caches and 2 x 16 caches.

The paper registers load-balancer members one after another, so its deployment
time grows with the number of caches; ours starts caches in parallel and gives
each balancer all its members in one configuration. The figure that matters is
the ratio large/small (target < 1.5) and the small deployment's time (target < 2 s).

    .venv/bin/python benchmarks/deploy_time.py [--runs 5]
"""
import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cdnaas.api.tokens import bootstrap_token  # noqa: E402
from cdnaas.cli.stack import Stack, database_url_of, free_port_env  # noqa: E402
from cdnaas.db.engine import Database  # noqa: E402
from cdnaas.origin.server import serve_in_thread  # noqa: E402

SIZES = (2, 16)
REGIONS = (("eu-west", "10.1.0.0/16", True), ("us-east", "10.2.0.0/16", False))


def template(caches):
    return {"flavor": f"bench-{caches}", "version": 1, "plugin": "static", "technology": "container",
            "description": f"benchmark: {caches} caches per region",
            "vnfs": {role: {"image": "cdnaas-vnf", "instances": {"min": n, "max": n},
                            "vcpus": {"min": 1, "max": 1}, "ram_mb": {"min": 256, "max": 256},
                            "config_templates": []}
                     for role, n in (("cache", caches), ("load_balancer", 1), ("dns", 1))}}


def setup(urls, token):
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    api = f"{urls['api']}/api/v1"
    for name, prefix, default in REGIONS:
        session.post(f"{api}/regions", json={"name": name, "client_prefixes": [prefix],
                                             "default": default}, timeout=10).raise_for_status()
        session.post(f"{api}/regions/{name}/hosts", timeout=10, json={
            "name": f"{name}-host", "vcpus": 64, "ram_mb": 262144}).raise_for_status()
    for caches in SIZES:
        session.post(f"{api}/templates", json=template(caches), timeout=60).raise_for_status()
    return session, api


def deploy_once(session, api, caches, origin_url, run):
    body = {"name": f"bench-{caches}-{run}", "flavor": f"bench-{caches}", "origin": origin_url,
            "regions": [{"name": r[0], "demand": 1000, "quality": {"min_mos": 3.6}} for r in REGIONS],
            "lease": {"end": "2099-01-01T00:00:00Z"}}
    started = time.perf_counter()
    accepted = session.post(f"{api}/vcdns", json=body, timeout=30)
    accepted.raise_for_status()
    operation_id = accepted.json()["operation"]["id"]
    while True:
        operation = session.get(f"{api}/operations/{operation_id}", timeout=10).json()
        if operation["state"] not in ("PENDING", "PROCESSING"):
            break
        time.sleep(0.05)  # a viewer-like poll; faster polling would steal the CPU it measures
    elapsed = time.perf_counter() - started
    if operation["state"] != "COMPLETED":
        raise SystemExit(f"deployment failed: {operation['error']}")
    ended = session.delete(f"{api}/vcdns/{accepted.json()['vcdn']['id']}", timeout=30).json()
    while session.get(f"{api}/operations/{ended['operation']['id']}",
                      timeout=10).json()["state"] in ("PENDING", "PROCESSING"):
        time.sleep(0.05)
    return elapsed


@contextlib.contextmanager
def local_stack():
    """The five services on the local driver (throwaway state dir), the sample origin, and
    :func:`setup`'s regions, hosts and flavors: yields ``(stack, session, api, origin URL)``."""
    origin, _thread = serve_in_thread("0.0.0.0", 0)
    with tempfile.TemporaryDirectory(prefix="cdnaas-bench-") as state:
        env = free_port_env(state)
        env.update({"CDNAAS_VIM_DRIVER": "local", "CDNAAS_IM_INTERVAL": "3600",
                    "CDNAAS_LOG_LEVEL": "WARNING", "CDNAAS_ORIGIN_ALLOW": "127.0.0.1"})
        stack = Stack(env=env, state_dir=state).start(timeout=60)
        try:
            token = bootstrap_token(Database(database_url_of(stack.env, "api")), "admin")
            yield (stack, *setup(stack.urls, token),
                   f"http://127.0.0.1:{origin.server_address[1]}")
        finally:
            stack.stop()
            origin.shutdown()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with local_stack() as (_stack, session, api, origin_url):
        deploy_once(session, api, SIZES[0], origin_url, "warmup")
        # Sizes take turns, so whatever drifts over a series (this machine's
        # file system slows as freed inodes pile up) weighs on both alike.
        times = {caches: [] for caches in SIZES}
        for run in range(args.runs):
            for caches in SIZES:
                times[caches].append(deploy_once(session, api, caches, origin_url, run))
        medians = {caches: statistics.median(runs) for caches, runs in times.items()}
        for caches, runs in times.items():
            print(f"2 regions x {caches:2d} caches: median {medians[caches]:.3f} s "
                  f"(runs: {', '.join(f'{t:.3f}' for t in runs)})")
    small, large = medians[SIZES[0]], medians[SIZES[1]]
    print(f"ratio large/small: {large / small:.2f} (target < 1.5); small under 2 s: "
          f"{'yes' if small < 2 else 'no'}")
    print(f"a sequential reference growing like the paper's (same per-cache cost, one after "
          f"another) would take about {small * SIZES[1] / SIZES[0]:.2f} s for {SIZES[1]} caches")


if __name__ == "__main__":
    main()
