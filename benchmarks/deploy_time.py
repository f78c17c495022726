"""Deployment time on the local driver against its floor: POST /vcdns until the
operation is COMPLETED (API -> SO -> RO -> driver -> a client in each region resolved
the vCDN and fetched through it), for 2 regions x 2, 16 and 64 caches.

The floor, in the same run: the configs our driver rendered for that vCDN started
again in parallel namespaces without us (:mod:`deploy_floor`). Sizes and sides take
turns, so whatever drifts over a series weighs on all alike; the figures are medians.
Our fixed overhead is ours minus the floor at the smallest size (target < 0.2 s); at
32 and 128 caches the ratio to the floor matters (target <= 1.10).

    .venv/bin/python benchmarks/deploy_time.py [--runs 3] [--sizes 2,16,64]
"""
import argparse
import contextlib
import datetime as dt
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import deploy_floor  # noqa: E402
from cdnaas.api.tokens import bootstrap_token  # noqa: E402
from cdnaas.cli.stack import Stack, database_url_of, free_port_env  # noqa: E402
from cdnaas.common.clients import RoClient  # noqa: E402
from cdnaas.db.engine import Database  # noqa: E402
from cdnaas.origin.server import serve_in_thread  # noqa: E402
from cdnaas.ro.vim.local import network  # noqa: E402

SIZES = (2, 16, 64)  # caches per region
#: how often the benchmark asks for its operation: the time is the operation's own end
#: (``updated_at``), so asking less often only takes less CPU from what it measures
#: (every 0.05 s, the API and SO spent 1 s of CPU answering during a 128-cache deployment)
POLL_SECONDS = 0.5
REGIONS = (("eu-west", "10.1.0.0/16", True), ("us-east", "10.2.0.0/16", False))


def template(caches):
    return {"flavor": f"bench-{caches}", "version": 1, "plugin": "static", "technology": "container",
            "description": f"benchmark: {caches} caches per region",
            "vnfs": {role: {"image": "cdnaas-vnf", "instances": {"min": n, "max": n},
                            "vcpus": {"min": 1, "max": 1}, "ram_mb": {"min": 256, "max": 256},
                            "config_templates": []}
                     for role, n in (("cache", caches), ("load_balancer", 1), ("dns", 1))}}


def setup(urls, token, sizes=(2, 16)):
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    api = f"{urls['api']}/api/v1"
    for name, prefix, default in REGIONS:
        session.post(f"{api}/regions", json={"name": name, "client_prefixes": [prefix],
                                             "default": default}, timeout=10).raise_for_status()
        session.post(f"{api}/regions/{name}/hosts", timeout=10, json={
            "name": f"{name}-host", "vcpus": 2 * max(sizes) + 4,
            "ram_mb": 1024 * (max(sizes) + 4)}).raise_for_status()
    for caches in sizes:
        session.post(f"{api}/templates", json=template(caches), timeout=60).raise_for_status()
    return session, api


def deploy_once(session, api, caches, origin_url, run, running=lambda vcdn_id: None):
    """Seconds from ``POST /vcdns`` until its operation is COMPLETED (the operation's own
    ``updated_at``, so the poll's period adds nothing); ``running(vcdn_id)`` is called
    while the vCDN runs, before it is deleted."""
    body = {"name": f"bench-{caches}-{run}", "flavor": f"bench-{caches}", "origin": origin_url,
            "regions": [{"name": r[0], "demand": 1000, "quality": {"min_mos": 3.6}} for r in REGIONS],
            "lease": {"end": "2099-01-01T00:00:00Z"}}
    started = time.time()
    accepted = session.post(f"{api}/vcdns", json=body, timeout=30)
    accepted.raise_for_status()
    operation = wait(session, api, accepted.json()["operation"]["id"])
    if operation["state"] != "COMPLETED":
        raise SystemExit(f"deployment failed: {operation['error']}")
    elapsed = dt.datetime.fromisoformat(operation["updated_at"]).timestamp() - started
    vcdn_id = accepted.json()["vcdn"]["id"]
    running(vcdn_id)
    wait(session, api, session.delete(f"{api}/vcdns/{vcdn_id}", timeout=30).json()["operation"]["id"])
    return elapsed


def wait(session, api, operation_id, poll=POLL_SECONDS):
    """The operation once it ended, asked every ``poll`` seconds."""
    while True:
        operation = session.get(f"{api}/operations/{operation_id}", timeout=10).json()
        if operation["state"] not in ("PENDING", "PROCESSING"):
            return operation
        time.sleep(poll)


@contextlib.contextmanager
def local_stack(sizes=(2, 16)):
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
            yield (stack, *setup(stack.urls, token, sizes),
                   f"http://127.0.0.1:{origin.server_address[1]}")
        finally:
            stack.stop()
            stack.remove_local_vnfs()  # a vCDN the benchmark did not see deleted
            origin.shutdown()


def floor_snapshot(stack, session, api, caches, origin_url, folder):
    """Deploy a vCDN of ``caches`` per region and copy what the floor starts of it."""
    ro = RoClient(base_url=stack.urls["ro"], key_file=Path(stack.state_dir) / "service.key")
    owner = network.owner(database_url_of(stack.env, "ro"))
    shots = []
    deploy_once(session, api, caches, origin_url, "floor", lambda vcdn_id: shots.append(
        deploy_floor.snapshot(ro.get_deployment(vcdn_id), owner, stack.state_dir, folder)))
    return shots[0]


def floor_once(shot, folder):
    try:
        return deploy_floor.start(shot, Path(folder) / "run")
    finally:
        deploy_floor.stop(shot)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="caches per region of each size, comma-separated")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    ours = {caches: [] for caches in sizes}
    floor = {caches: [] for caches in sizes}
    with local_stack(sizes) as (stack, session, api, origin_url), \
            tempfile.TemporaryDirectory(prefix="cdnaas-floor-") as folder:
        shots = {caches: floor_snapshot(stack, session, api, caches, origin_url,
                                        Path(folder) / str(caches)) for caches in sizes}
        floor_once(shots[sizes[0]], folder)  # warm-up
        for run in range(args.runs):
            for caches in sizes:
                sides = [("ours", lambda: deploy_once(session, api, caches, origin_url, run)),
                         ("floor", lambda: floor_once(shots[caches], folder))]
                for side, measure in sides if run % 2 == 0 else sides[::-1]:
                    (ours if side == "ours" else floor)[caches].append(measure())
    medians = {}
    for caches in sizes:
        medians[caches] = (statistics.median(ours[caches]), statistics.median(floor[caches]))
        print(f"{2 * caches:3d} caches (2 regions x {caches}): ours {medians[caches][0]:.3f} s, "
              f"floor {medians[caches][1]:.3f} s, ratio {medians[caches][0] / medians[caches][1]:.2f} "
              f"(ours: {', '.join(f'{t:.3f}' for t in ours[caches])}; "
              f"floor: {', '.join(f'{t:.3f}' for t in floor[caches])})")
    overhead = statistics.median(o - f for o, f in zip(ours[sizes[0]], floor[sizes[0]]))
    print(f"fixed overhead (ours - floor at {2 * sizes[0]} caches, median of pairs): "
          f"{overhead:.3f} s (target < 0.2 s)")
    for caches in sizes[1:]:
        ratio = medians[caches][0] / medians[caches][1]
        print(f"ratio at {2 * caches} caches: {ratio:.2f} (target <= 1.10: "
              f"{'met' if ratio <= 1.10 else 'not met'})")


if __name__ == "__main__":
    main()
