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
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import func, select  # noqa: E402

from benchmarks import proc  # noqa: E402
from cdnaas.common.ports import free_loopback_ports  # noqa: E402
from cdnaas.db.engine import Database  # noqa: E402
from cdnaas.so.models import Operation  # noqa: E402
from tests.support import postgres  # noqa: E402
from tests.support.stack import replicated_stack  # noqa: E402

REGIONS = ("eu", "us", "asia")
HOST_VCPUS = 128
FLOOR = Path(__file__).with_name("control_plane_floor.py")
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

def populate(stack, count, host_count, database):
    """Regions, ``host_count`` hosts over them, the template, tenants and ``count`` vCDNs;
    return ``{tenant token: [vcdn ids]}`` and ``{tenant token: tenant name}``."""
    api = f"{stack.urls['api']}/api/v1"
    operator = session(stack.operator_token)
    for index, region in enumerate(REGIONS):
        operator.post(f"{api}/regions", timeout=30, json={
            "name": region, "client_prefixes": [f"10.{index + 1}.0.0/16"],
            "default": index == 0}).raise_for_status()

    def add_host(number):
        region = REGIONS[number % len(REGIONS)]
        operator.post(f"{api}/regions/{region}/hosts", timeout=30, json={
            "name": f"{region}-{number}", "vcpus": HOST_VCPUS,
            "ram_mb": HOST_VCPUS * 4096}).raise_for_status()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(add_host, range(host_count)))
    operator.post(f"{api}/templates", json=TEMPLATE, timeout=30).raise_for_status()
    tenant_of = {}
    for index in range(TENANTS):
        operator.post(f"{api}/tenants", json={"name": f"tenant-{index}"},
                      timeout=30).raise_for_status()
        tenant_of[operator.post(f"{api}/tenants/tenant-{index}/tokens", json={},
                                timeout=30).json()["token"]] = f"tenant-{index}"
    tokens = list(tenant_of)
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
    print(f"filled: {count} vCDNs x {len(REGIONS)} regions on {host_count} hosts in "
          f"{time.perf_counter() - started:.0f} s; operations {states}", flush=True)
    return owned, tenant_of


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


# -- CPU per request against the floor ---------------------------------------------------------

#: the kinds of request measured, each sent --cpu-requests // divisor times per run
CPU_KINDS = (("get", 1), ("list", 4), ("quote", 4))
CPU_CLIENTS = 4


def cpu_seconds(pids):
    """``{pid: CPU seconds (user + system) used so far}`` of the live processes ``pids``."""
    return {pid: used for pid in pids if (used := proc.cpu_seconds(pid)) is not None}


class Backends:
    """The PostgreSQL server processes serving the database at ``url`` (read through
    /proc: the server runs on this machine)."""

    def __init__(self, url):
        self.connection = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"),
                                          autocommit=True)

    def pids(self):
        return [pid for (pid,) in self.connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()")]

    def close(self):
        self.connection.close()


def floor_request(kind, target, rng, ids):
    """``(method, url, body)`` of one request of ``kind`` to ``target`` (ours or the floor)."""
    prefix = f"{target['url']}/floor" if target["floor"] else f"{target['url']}/api/v1"
    if kind == "get":
        return "GET", f"{prefix}/vcdns/{rng.choice(ids)}", None
    if kind == "list":
        return "GET", f"{prefix}/vcdns", None
    return "POST", f"{prefix}/quotes", request_body("quote")


def send_all(target, kind, count, owned, tenant_of):
    """``count`` requests of ``kind`` to ``target`` from :data:`CPU_CLIENTS` clients, each
    on its own kept-alive connection as one tenant; the median wall time (s)."""
    tokens = list(owned)
    times = []

    def client(number):
        rng = random.Random(number)
        token = tokens[number % len(tokens)]
        http = session(token)
        params = {"tenant": tenant_of[token]} if target["floor"] else None
        for _ in range(count // CPU_CLIENTS):
            method, url, body = floor_request(kind, target, rng, owned[token])
            began = time.perf_counter()
            answer = http.request(method, url, json=body, params=params, timeout=60)
            times.append(time.perf_counter() - began)
            if answer.status_code != 200:
                raise RuntimeError(f"{method} {url}: {answer.status_code} {answer.text[:300]}")
    with concurrent.futures.ThreadPoolExecutor(CPU_CLIENTS) as pool:
        list(pool.map(client, range(CPU_CLIENTS)))
    return statistics.median(times)


def cpu_of_requests(target, kind, count, owned, tenant_of, backends):
    """``(process CPU s, PostgreSQL CPU s, median wall s, {process name: CPU s})`` per
    request of one batch (``target["pids"]``: ``{pid: process name}``)."""
    own_before, pg_pids = cpu_seconds(target["pids"]), backends.pids()
    pg_before = cpu_seconds(pg_pids)
    wall = send_all(target, kind, count, owned, tenant_of)
    own_after = cpu_seconds(target["pids"])
    pg_after = cpu_seconds(set(pg_pids) | set(backends.pids()))
    served = count // CPU_CLIENTS * CPU_CLIENTS
    by_name = {target["pids"][p]: (own_after[p] - own_before.get(p, 0)) / served
               for p in own_after}
    pg = sum(pg_after[p] - pg_before.get(p, 0) for p in pg_after)
    return sum(by_name.values()), pg / served, wall, by_name


def start_floor(stack, url):
    """The floor's process (:data:`FLOOR`) on a free port, answering; ``(Popen, url)``."""
    port = free_loopback_ports(1)[0]
    log = open(Path(stack.state_dir) / "floor.log", "ab")  # pylint: disable=consider-using-with
    process = subprocess.Popen([sys.executable, str(FLOOR), url, str(port)], env=stack.env,
                               stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if requests.get(f"{base}/healthz", timeout=2).ok:
                return process, base
        except requests.RequestException:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the floor did not start: see {stack.state_dir}/floor.log")
        time.sleep(0.1)


def profile(target, kind, count, owned, tenant_of, processes, directory):
    """One more batch of ``kind`` to ours with py-spy recording each of ``processes``
    (``{service: Popen}``) into ``directory/<service>-<kind>.txt``."""
    directory.mkdir(parents=True, exist_ok=True)
    spies = [subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record",
                               "--nonblocking", "--gil", "--format", "raw",  # CPU in Python
                               "--rate", "250", "--pid", str(process.pid),
                               "--output", str(directory / f"{service}-{kind}.txt")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for service, process in processes.items()]
    time.sleep(1)  # py-spy attached
    send_all(target, kind, count, owned, tenant_of)
    for spy in spies:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)


def cpu_per_request(stack, url, owned, tenant_of, args):
    """Ours against the floor, interleaved: ``{kind: {"ours": [(cpu, pg, wall)], "floor":
    [...]}}`` per run."""
    replica = stack.replicas[0]
    floor, floor_url = start_floor(replica, url)
    backends = Backends(url)
    targets = {"ours": {"url": replica.urls["api"], "floor": False,
                        "pids": {p.pid: name for name, p in replica.stack.processes.items()}},
               "floor": {"url": floor_url, "floor": True, "pids": {floor.pid: "floor"}}}
    found = {kind: {name: [] for name in targets} for kind, _ in CPU_KINDS}
    try:
        for kind, _ in CPU_KINDS:  # warm both: connections, caches, imports
            for target in targets.values():
                send_all(target, kind, 2 * CPU_CLIENTS, owned, tenant_of)
        for run in range(args.cpu_runs):
            for kind, divisor in CPU_KINDS:
                order = list(targets) if run % 2 == 0 else list(reversed(targets))
                for name in order:
                    found[kind][name].append(cpu_of_requests(
                        targets[name], kind, max(CPU_CLIENTS, args.cpu_requests // divisor),
                        owned, tenant_of, backends))
            print(f"CPU run {run + 1}: " + ", ".join(
                f"{kind} {found[kind]['ours'][-1][0] * 1000:.2f}+"
                f"{found[kind]['ours'][-1][1] * 1000:.2f} vs {found[kind]['floor'][-1][0] * 1000:.2f}+"
                f"{found[kind]['floor'][-1][1] * 1000:.2f} ms" for kind, _ in CPU_KINDS), flush=True)
        if args.profile:
            for kind, divisor in CPU_KINDS:
                profile(targets["ours"], kind, max(CPU_CLIENTS, args.cpu_requests // divisor),
                        owned, tenant_of, {s: replica.stack.processes[s] for s in ("api", "so")},
                        Path(args.profile))
    finally:
        backends.close()
        floor.terminate()
        floor.wait(30)
    return found


def report_cpu(found, args):
    print(f"\nCPU per request (ms; services + PostgreSQL backends), {args.vcdns} vCDNs, "
          f"{args.hosts} hosts; medians of {args.cpu_runs} interleaved runs, "
          f"{CPU_CLIENTS} clients")
    print(f"{'':26}{'ours':>16}{'floor':>16}{'ratio':>8}{'ratios by run':>24}"
          f"{'p50 wall ours/floor':>22}")
    labels = {"get": "GET /vcdns/{id}", "list": "GET /vcdns (100)",
              "quote": f"POST /quotes ({args.hosts} h)"}
    for kind, _ in CPU_KINDS:
        ours, floor = found[kind]["ours"], found[kind]["floor"]
        ratios = [(o[0] + o[1]) / (f[0] + f[1]) for o, f in zip(ours, floor)]

        def cell(runs):
            return (f"{statistics.median(r[0] + r[1] for r in runs) * 1000:.2f} "
                    f"({statistics.median(r[1] for r in runs) * 1000:.2f})")
        walls = (f"{statistics.median(r[2] for r in ours) * 1000:.1f}/"
                 f"{statistics.median(r[2] for r in floor) * 1000:.1f} ms")
        print(f"{labels[kind]:26}{cell(ours):>16}{cell(floor):>16}"
              f"{statistics.median(ratios):>7.2f}x{' '.join(f'{r:.2f}' for r in ratios):>24}"
              f"{walls:>22}")
    print("(in brackets: of which the PostgreSQL backends)")
    for kind, _ in CPU_KINDS:
        ours = found[kind]["ours"]
        print(f"ours by process, {kind} (ms, medians): " + ", ".join(
            f"{name} {statistics.median(r[3][name] for r in ours) * 1000:.2f}"
            for name in sorted(ours[0][3])))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vcdns", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--cpu-requests", type=int, default=400,
                        help="GET one vCDN per CPU run (lists and quotes: a quarter)")
    parser.add_argument("--cpu-runs", type=int, default=3)
    parser.add_argument("--cpu-only", action="store_true",
                        help="measure CPU per request only (no requests/s, no IM passes)")
    parser.add_argument("--profile", help="directory for py-spy profiles of API and SO")
    args = parser.parse_args()
    env = {"CDNAAS_IM_INTERVAL": "86400", "CDNAAS_LOG_LEVEL": "WARNING",
           "CDNAAS_DEPLOY_TIMEOUT": "600",  # the zone server beside any other stack's:
           "CDNAAS_LOCAL_ZONE_PORT": str(free_loopback_ports(1)[0])}
    runs = {}
    with postgres.server() as admin, postgres.fresh_database(admin) as url, \
            tempfile.TemporaryDirectory(prefix="cdnaas-control-plane-") as tmp:
        database = Database(url)
        with replicated_stack(url, Path(tmp) / "fill", extra_env=env, replicas=1,
                              timeout=120) as stack:
            owned, tenant_of = populate(stack, args.vcdns, args.hosts, database)
            cpu = cpu_per_request(stack, url, owned, tenant_of, args)
            if not args.cpu_only:
                runs["1 replica"] = measure(stack, owned, args)
        if args.cpu_only:
            database.dispose()
            report_cpu(cpu, args)
            return
        with replicated_stack(url, Path(tmp) / "two", extra_env=env, replicas=2,
                              mode="round-robin", timeout=120) as stack:
            runs["2 replicas"] = measure(stack, owned, args)
        with replicated_stack(url, Path(tmp) / "again", extra_env=env, replicas=1,
                              timeout=120) as stack:
            runs["1 replica (reference, again)"] = measure(stack, owned, args)
        database.dispose()
    report(runs, args)
    report_cpu(cpu, args)


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
