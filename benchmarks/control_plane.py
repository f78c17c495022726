"""The control plane with replicas: 1,000 vCDNs x 3 regions on the noop driver, and the
customer API's requests/s and the IM's pass time with one and with two replicas of
every service, side by side.

One PostgreSQL database is filled once (through the API, one replica of each service),
then the same measurement runs against one replica, two replicas, and one replica
again (the reference, in the same run, after the other two):

- **API**: ``--clients`` threads in ``--processes`` load processes send, for
  ``--seconds`` s, a fixed mix of GET /vcdns/{id} (50%), GET /vcdns (25%, a tenant's
  100 vCDNs) and POST /quotes (25%, three regions planned, nothing reserved), spread
  over the API replicas in turn (as DNS round robin would); each replica reaches its
  peers through one address per service (a TCP proxy over their replicas).
- **IM**: ``POST /im/v1/reconcile`` (a whole pass over every ACTIVE vCDN: health and
  metrics through RO, points, policy, host marks), timed twice; the periodic passes
  are off so that nothing else runs meanwhile. With two replicas the pass still runs
  once (one leader); its calls to SO and RO are spread over their replicas.

    .venv/bin/python benchmarks/control_plane.py [--vcdns 1000] [--seconds 20]
"""
import argparse
import concurrent.futures
import multiprocessing
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import func, select  # noqa: E402

from cdnaas.db.engine import Database  # noqa: E402
from cdnaas.so.models import Operation  # noqa: E402
from tests.support import postgres  # noqa: E402
from tests.support.stack import replicated_stack  # noqa: E402

REGIONS = ("eu", "us", "asia")
HOSTS_PER_REGION, HOST_VCPUS = 24, 128
TENANTS = 10
LEASE = {"end": "2099-01-01T00:00:00Z"}
MIX = (("get", 0.50), ("list", 0.25), ("quote", 0.25))
TEMPLATE = {"flavor": "bench", "version": 1, "plugin": "static", "technology": "container",
            "description": "benchmark: one cache per region",
            "vnfs": {role: {"image": "cdnaas-vnf", "instances": {"min": 1, "max": 1},
                            "vcpus": {"min": 1, "max": 1}, "ram_mb": {"min": 256, "max": 256},
                            "config_templates": []}
                     for role in ("cache", "load_balancer", "dns")}}


def request_body(name):
    return {"name": name, "flavor": "bench", "origin": "http://origin.example.com:8080",
            "regions": [{"name": r, "demand": 1000, "quality": {"min_mos": 3.6}} for r in REGIONS],
            "lease": LEASE}


def session(token):
    found = requests.Session()
    found.trust_env = False
    found.headers["Authorization"] = f"Bearer {token}"
    return found


# -- filling the database -----------------------------------------------------------------------

def populate(stack, count, database):
    """Regions, hosts, the template, tenants and ``count`` vCDNs; return
    ``{tenant token: [vcdn ids]}``."""
    api = f"{stack.urls['api']}/api/v1"
    operator = session(stack.operator_token)
    for index, region in enumerate(REGIONS):
        operator.post(f"{api}/regions", timeout=30, json={
            "name": region, "client_prefixes": [f"10.{index + 1}.0.0/16"],
            "default": index == 0}).raise_for_status()
        for host in range(HOSTS_PER_REGION):
            operator.post(f"{api}/regions/{region}/hosts", timeout=30, json={
                "name": f"{region}-{host}", "vcpus": HOST_VCPUS,
                "ram_mb": HOST_VCPUS * 4096}).raise_for_status()
    operator.post(f"{api}/templates", json=TEMPLATE, timeout=30).raise_for_status()
    tokens = []
    for index in range(TENANTS):
        operator.post(f"{api}/tenants", json={"name": f"tenant-{index}"},
                      timeout=30).raise_for_status()
        tokens.append(operator.post(f"{api}/tenants/tenant-{index}/tokens", json={},
                                    timeout=30).json()["token"])
    owned = {token: [] for token in tokens}
    guard = threading.Lock()
    started = time.perf_counter()

    def create(number):
        token = tokens[number % TENANTS]
        answer = session(token).post(f"{api}/vcdns", json=request_body(f"v{number}"),
                                     timeout=120)
        answer.raise_for_status()
        with guard:
            owned[token].append(answer.json()["vcdn"]["id"])
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(count)))
    while True:  # every INSTANTIATE ended
        with database.sessions() as db:
            states = dict(db.execute(select(Operation.state, func.count())
                                     .group_by(Operation.state)).all())
        if not states.get("PENDING") and not states.get("PROCESSING"):
            break
        time.sleep(1)
    print(f"filled: {count} vCDNs x {len(REGIONS)} regions in "
          f"{time.perf_counter() - started:.0f} s; operations {states}", flush=True)
    return owned


# -- load ---------------------------------------------------------------------------------------

def load_process(urls, owned, seconds, threads, seed):
    """One load process: ``threads`` clients for ``seconds``; ``{kind: [latencies]}``,
    errors."""
    results = {kind: [] for kind, _ in MIX}
    errors = [0]
    guard = threading.Lock()
    deadline = time.monotonic() + seconds
    tokens = list(owned)

    def client(number):
        rng = random.Random(seed * 1000 + number)
        token = tokens[number % len(tokens)]
        http = session(token)
        mine = owned[token]
        turn = number
        kinds, weights = zip(*MIX)
        local = {kind: [] for kind in kinds}
        while time.monotonic() < deadline:
            base = f"{urls[turn % len(urls)]}/api/v1"
            turn += 1
            kind = rng.choices(kinds, weights)[0]
            began = time.perf_counter()
            try:
                if kind == "get":
                    answer = http.get(f"{base}/vcdns/{rng.choice(mine)}", timeout=60)
                elif kind == "list":
                    answer = http.get(f"{base}/vcdns", timeout=60)
                else:
                    answer = http.post(f"{base}/quotes", json=request_body("quote"), timeout=60)
                ok = answer.status_code == 200
            except requests.RequestException:
                ok = False
            if ok:
                local[kind].append(time.perf_counter() - began)
            else:
                with guard:
                    errors[0] += 1
        with guard:
            for kind, values in local.items():
                results[kind].extend(values)
    workers = [threading.Thread(target=client, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return results, errors[0]


def measure(stack, owned, args):
    """API requests/s by kind and IM pass times against ``stack``."""
    urls = [replica.urls["api"] for replica in stack.replicas]
    per_process = max(1, args.clients // args.processes)
    context = multiprocessing.get_context("spawn")
    with context.Pool(args.processes) as pool:
        parts = pool.starmap(load_process, [(urls, owned, args.seconds, per_process, seed)
                                            for seed in range(args.processes)])
    latencies = {kind: [] for kind, _ in MIX}
    errors = 0
    for results, failed in parts:
        errors += failed
        for kind, values in results.items():
            latencies[kind].extend(values)
    found = {"errors": errors,
             "total": sum(len(v) for v in latencies.values()) / args.seconds}
    for kind, values in latencies.items():
        found[kind] = len(values) / args.seconds
        found[f"{kind} p50"] = statistics.median(values) * 1000 if values else float("nan")
    passes = []
    for _ in range(2):
        began = time.perf_counter()
        answer = requests.post(f"{stack.urls['im']}/im/v1/reconcile", timeout=1800,
                               headers=stack.service_headers("benchmark"))
        answer.raise_for_status()
        passes.append(time.perf_counter() - began)
    found["im first"], found["im next"] = passes
    print(f"measured {len(stack.replicas)} replica(s): {found}", flush=True)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vcdns", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    env = {"CDNAAS_IM_INTERVAL": "86400", "CDNAAS_LOG_LEVEL": "WARNING",
           "CDNAAS_DEPLOY_TIMEOUT": "600"}
    runs = {}
    with postgres.server() as admin, postgres.fresh_database(admin) as url, \
            tempfile.TemporaryDirectory(prefix="cdnaas-control-plane-") as tmp:
        database = Database(url)
        with replicated_stack(url, Path(tmp) / "fill", extra_env=env, replicas=1,
                              timeout=120) as stack:
            owned = populate(stack, args.vcdns, database)
            runs["1 replica"] = measure(stack, owned, args)
        with replicated_stack(url, Path(tmp) / "two", extra_env=env, replicas=2,
                              mode="round-robin", timeout=120) as stack:
            runs["2 replicas"] = measure(stack, owned, args)
        with replicated_stack(url, Path(tmp) / "again", extra_env=env, replicas=1,
                              timeout=120) as stack:
            runs["1 replica (reference, again)"] = measure(stack, owned, args)
        database.dispose()
    report(runs, args)


def report(runs, args):
    names = list(runs)
    rows = [("API requests/s, all", "total", "{:.1f}"),
            ("  GET /vcdns/{id}", "get", "{:.1f}"),
            ("  GET /vcdns (100 each)", "list", "{:.1f}"),
            ("  POST /quotes", "quote", "{:.1f}"),
            ("p50 GET /vcdns/{id} ms", "get p50", "{:.0f}"),
            ("p50 GET /vcdns ms", "list p50", "{:.0f}"),
            ("p50 POST /quotes ms", "quote p50", "{:.0f}"),
            ("failed requests", "errors", "{:d}"),
            ("IM pass, first (s)", "im first", "{:.2f}"),
            ("IM pass, next (s)", "im next", "{:.2f}")]
    width = max(len(n) for n in names) + 2
    print(f"\n{args.vcdns} vCDNs x {len(REGIONS)} regions, noop driver, PostgreSQL; "
          f"{args.clients} API clients for {args.seconds:.0f} s per column")
    print(f"{'':26}" + "".join(f"{n:>{width}}" for n in names))
    for label, key, fmt in rows:
        print(f"{label:26}" + "".join(f"{fmt.format(runs[n][key]):>{width}}" for n in names))


if __name__ == "__main__":
    main()
