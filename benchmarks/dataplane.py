"""The data plane at the limit: our cache and our balancer path against a hand-tuned nginx.

On the local driver (root): one region with one cache and its balancer, each of 1 vCPU
(a cgroup CPU quota), planned for the largest connection count measured; beside them on
the same region bridge, in a namespace of its own with the same 1-vCPU quota, a
**reference**: nginx hand-tuned for this one job (a caching reverse proxy of the same
origin, access log off, open-file cache, large limits). wrk runs from a client namespace
of the region through the driver's own load generator (:mod:`cdnaas.ro.vim.local.loadgen`:
the measured VNF on the first CPU, wrk on the other), for each object of the sample origin
(43 B, 73 KB, 435 KB, warmed first: every measured answer is a HIT, which the origin's
fetch counts confirm) and for ``range-1m``, 1 MiB byte ranges of a 100 MiB object (each
request the same range, across two of our cache's 1 MiB slices, answered 206: the hand-
tuned nginx keeps the object whole and cuts the range from it), at each connection count,
the targets taking turns (their order rotates each repetition):

- ``cache``: our cache direct;
- ``reference``: the hand-tuned nginx direct;
- ``lb``: our balancer in front of our cache (the viewers' path);
- ``ref-lb``: a hand-tuned balancer (``proxy_pass`` with a kept-alive pool, no log) in
  front of the reference: the floor of the balancer path on this machine (each cache
  has one balancer, as in a vCDN; before each run both caches are let shed the idle
  connections a balancer's pool kept from the run before).

It prints, per object and connection count, cache/reference requests/s per repetition
(min/median/max), the balancer's own CPU seconds per request (its cgroup) against the
hand-tuned one's, throughput through the balancer over the cache direct, every
target's socket errors and non-2xx answers, and its runs at the kernel's TCP memory
limit; then what the error logs say. One kernel holds the send queues of every target
and the receive queues of the generator's connections: at 10,000 connections of 435 KB
the answers in flight (4.35 GB) can outgrow its TCP memory (``tcp_mem``, about 9% of
RAM); a run that reaches it prunes and drops in every namespace, target or not.

    .venv/bin/python benchmarks/dataplane.py [--seconds 5] [--repetitions 3]
        [--connections 100,1000,10000] [--objects small,chunk-low,chunk-hd,range-1m]
"""
import argparse
import contextlib
import ipaddress
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cdnaas.common.sig import Origin, RegionPlan, ServiceInstanceGraph, Vnf  # noqa: E402
from cdnaas.origin.server import OBJECTS, serve_in_thread  # noqa: E402
from cdnaas.ro.vim import management  # noqa: E402
from cdnaas.ro.vim.base import LoadTest  # noqa: E402
from cdnaas.ro.vim.local import cgroups, clients, loadgen, network, processes  # noqa: E402
from cdnaas.vnf import sizing, tools  # noqa: E402
from cdnaas.vnf import sizing, tools

#: what is measured per name of ``--objects``: ``(path, first byte, bytes)`` asked per
#: request (first byte and bytes 0: the whole object)
MEASURED = {**{name.rsplit("/", 1)[1]: (name, 0, 0) for name in OBJECTS},
            "range-1m": ("/large/100m.bin", (50 << 20) + (512 << 10), 1 << 20)}
REGION = "bench"
CLIENT_PREFIX = "10.77.0.0/16"
TARGETS = ("cache", "reference", "lb", "ref-lb")
REFERENCE_HOST = 200  # .200 of the region subnet; .201 the reference balancer
#: bytes per second a cache of one vCPU sends here (about), to size runs (:func:`run_seconds`)
WAVE_BYTES_PER_SECOND = 1e9
MAX_SECONDS = 20.0
#: a run whose kernel TCP memory peaked at this share of ``tcp_mem``'s limit was at the limit
LIMIT_SHARE = 0.8

#: What every hand-tuned nginx shares: limits for this host, no access log, kept-alive
#: clients, the status page; its ``http`` block left open.
REFERENCE_HEAD = """\
user root;
worker_processes {workers};
worker_rlimit_nofile {files};
pid {prefix}/nginx.pid;
error_log {prefix}/logs/error.log warn;
events {{ worker_connections {connections}; }}
http {{
    server_tokens off;
    access_log off;
    keepalive_timeout 65s;
    keepalive_requests 100000;
    proxy_temp_path {prefix}/temp;
    client_body_temp_path {prefix}/temp;
    server {{ listen {address}:8081; location = /nginx_status {{ stub_status; }} }}
"""

#: What both hand-tuned nginx of HTTP share: the head, then a server on port 80.
REFERENCE_COMMON = REFERENCE_HEAD + """\
    server {{
        listen {address}:80 backlog=65535 reuseport;
        location / {{
            proxy_http_version 1.1;
            proxy_set_header Connection "";
"""

#: The reference cache: a caching reverse proxy of the same origin, nothing else.
REFERENCE_CACHE = REFERENCE_COMMON + """\
            proxy_pass http://origin;
            proxy_cache ref;
            proxy_cache_key $request_uri;
            proxy_cache_lock on;
            proxy_cache_valid 200 10m;
        }}
    }}
    sendfile on;
    tcp_nopush on;
    open_file_cache max=10000 inactive=60s;
    open_file_cache_valid 60s;
    open_file_cache_errors off;
    proxy_cache_path {prefix}/cache levels=1:2 keys_zone=ref:16m max_size=1024m inactive=60m use_temp_path=off;
    upstream origin {{ server {origin}; keepalive 32; }}
}}
"""

#: The reference balancer: a proxy with a kept-alive pool to the reference, nothing else.
REFERENCE_LB = REFERENCE_COMMON + """\
            proxy_pass http://caches;
            proxy_max_temp_file_size 0;
            proxy_buffer_size 16k;
            proxy_buffers 4 16k;
        }}
    }}
    upstream caches {{ server {cache}:80; keepalive {keepalive}; keepalive_requests 100000;
                     keepalive_timeout 2s; }}
}}
"""


def measurement_sig(vcdn_id, origin_port, planned):
    def vnf(name, role):
        return Vnf(name=name, role=role, region=REGION, host="bench-host", vcpus=1,
                   ram_mb=1024, image="cdnaas-vnf")
    return ServiceInstanceGraph(
        vcdn_id=vcdn_id, flavor="static", template_version=1,
        hostname=f"{vcdn_id}.bench.invalid", origin=Origin("http", "127.0.0.1", origin_port),
        default_region=REGION,
        regions=[RegionPlan(name=REGION, zone=None, vim_region=None,
                            client_prefixes=[CLIENT_PREFIX], demand=planned,
                            quality={"min_mos": 3.6})],
        vnfs=[vnf("cache-0", "cache"), vnf("lb", "load_balancer"), vnf("dns", "dns")])


@contextlib.contextmanager
def reference(deployment, owner, name, host, template, sockets, **values):
    """A hand-tuned nginx of 1 vCPU at ``.host`` of the region subnet, in its own namespace
    (a host on the region bridge) and CPU group, with workers enough for ``sockets``
    under this host's open-file limit; removed after."""
    _bridge, subnet = network.find_bridge(deployment.deployment_id, REGION)
    address = ipaddress.ip_network(subnet).network_address + host
    prefix = Path(tempfile.mkdtemp(prefix=f"cdnaas-bench-{name}-"))
    files = processes.open_file_limit()  # this host's: all the reference can have
    connections = files - 1024
    workers = -(-sockets * 11 // 10 // connections)
    text = template.format(prefix=prefix, address=address, files=files, workers=workers,
                           connections=connections, keepalive=connections // 2, **values)
    tools.prepare_nginx_prefix(str(prefix))
    (prefix / "nginx.conf").write_text(text)
    group = f"{owner}_{deployment.deployment_id}_{name}"
    with clients.client(deployment.deployment_id, REGION, address) as space:
        cgroups.create(group, 1)
        try:
            processes.start_nginx(space.namespace, str(prefix), str(prefix / "nginx.conf"))
            processes.wait_until(lambda: management.answers_http(str(address)), name)
            cgroups.adopt(group, processes.pid_in(prefix / "nginx.pid"))
            yield SimpleNamespace(name=name, address=str(address), region=REGION, vcpus=1,
                                  group=group, prefix=prefix)
        finally:
            cgroups.remove(group)


def run_seconds(seconds, connections, size):
    """How long a run lasts: ``seconds``, or longer where each connection waits its turn
    for long (at 10,000 connections of 435 KB objects every answer takes seconds, and a
    run must cover several of those waves), at most :data:`MAX_SECONDS`."""
    wave = connections * size / WAVE_BYTES_PER_SECOND
    return min(MAX_SECONDS, max(seconds, 4 * wave))


def kernel_tcp():
    """``(orphaned sockets, TCP memory in MB)`` of this machine's kernel (every namespace)."""
    with open("/proc/net/sockstat", encoding="ascii") as handle:
        fields = next(line for line in handle if line.startswith("TCP:")).split()
    return int(fields[fields.index("orphan") + 1]), _megabytes(int(fields[fields.index("mem") + 1]))


def kernel_tcp_limit_mb():
    """The kernel's TCP memory in MB at which it starts refusing buffers (``tcp_mem``'s
    third value): past it, queues are pruned and segments dropped in every namespace."""
    with open("/proc/sys/net/ipv4/tcp_mem", encoding="ascii") as handle:
        return _megabytes(int(handle.read().split()[2]))


def _megabytes(pages):
    """``pages`` of this machine's memory in MB (the kernel counts TCP memory in pages)."""
    return pages * os.sysconf("SC_PAGE_SIZE") >> 20


@contextlib.contextmanager
def tcp_memory_peak(interval=0.2):
    """Yield a dict whose ``"mb"`` is, once the block is done, the most TCP memory the
    kernel held while it ran (sampled every ``interval`` s)."""
    peak, done = {"mb": kernel_tcp()[1]}, threading.Event()

    def sample():
        while not done.wait(interval):
            peak["mb"] = max(peak["mb"], kernel_tcp()[1])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()


def settle(*vnfs, timeout=60.0):
    """Wait (at most ``timeout`` s) until ``vnfs`` hold almost no connections and the
    kernel holds almost no TCP memory: a balancer's pool of idle connections to its cache
    from the run before closes after its idle time, and a run must not start with them,
    nor with the buffers of the run before still queued (one kernel's TCP memory serves
    every target and the generator here: at 10,000 connections of large objects, what
    one run leaves would starve the next)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        held = [management.stub_status(vnf.address) for vnf in vnfs]
        orphans, megabytes = kernel_tcp()
        if all(status is None or status["active"] < 100 for status in held) and \
                orphans < 100 and megabytes < 64:
            return
        time.sleep(0.5)


def answer_bytes(name):
    """The body bytes of one answer to the requests of ``name`` (:data:`MEASURED`)."""
    path, _first, count = MEASURED[name]
    return count or OBJECTS[path]


def measure(deployment, target, name, connections, seconds):
    path, first, count = MEASURED[name]
    seconds = run_seconds(seconds, connections, answer_bytes(name))
    with tcp_memory_peak() as peak:
        report = loadgen.run(deployment, target, target.group,
                             LoadTest("http", path, connections, seconds,
                                      range_start=first, range_bytes=count))
    cpu = report.target_cpu_seconds
    return {"rps": report.requests_per_second, "requests": report.requests,
            "errors": report.errors, "non_2xx": report.non_2xx, "cpu": cpu,
            "us": 1e6 * cpu / report.requests if cpu and report.requests else 0,
            "isolated": report.isolated, "tcp_mb": peak["mb"]}


def spread(values):
    values = sorted(values)
    if not values:
        return "-"
    return f"{values[0]:.2f} / {statistics.median(values):.2f} / {values[-1]:.2f}"


def report(results, objects, connection_counts):
    """The table: ratios per repetition (paired in the order measured) as min / median / max."""
    print("\n| object | connections | cache / reference req/s | reference / cache CPU per "
          "request | cache, reference req/s (median) | lb / cache direct req/s | "
          "lb, ref-lb CPU us/request (median) | lb / ref-lb req/s | "
          "errors cache/ref/lb/ref-lb | non-2xx cache/ref/lb/ref-lb | "
          "runs at the kernel's TCP memory limit cache/ref/lb/ref-lb |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    limit = kernel_tcp_limit_mb()
    for path in objects:
        for connections in connection_counts:
            runs = results[(path, connections)]

            def ratios(top, bottom, field="rps"):
                return [a[field] / b[field] for a, b in zip(runs[top], runs[bottom])
                        if a[field] and b[field]]

            def median(name, field):
                values = [run[field] for run in runs[name] if run[field]]
                return statistics.median(values) if values else 0

            def per_target(count):
                return "/".join(str(sum(count(run) for run in runs[name])) for name in TARGETS)

            label = f"{answer_bytes(path):,} B" + (" range" if MEASURED[path][2] else "")
            print(f"| {label} | {connections:,} | {spread(ratios('cache', 'reference'))} | "
                  f"{spread(ratios('reference', 'cache', 'us'))} | "
                  f"{median('cache', 'rps'):,.0f}, {median('reference', 'rps'):,.0f} | "
                  f"{spread(ratios('lb', 'cache'))} | "
                  f"{median('lb', 'us'):.1f}, {median('ref-lb', 'us'):.1f} | "
                  f"{spread(ratios('lb', 'ref-lb'))} | {per_target(lambda run: run['errors'])} | "
                  f"{per_target(lambda run: run['non_2xx'])} | "
                  f"{per_target(lambda run: run['tcp_mb'] >= LIMIT_SHARE * limit)} |")
    print(f"\n(a run at the limit: the kernel's TCP memory, which every target and the "
          f"generator here share, reached {LIMIT_SHARE:.0%} of its {limit:,} MB (tcp_mem); "
          f"past it the kernel prunes queues and drops segments in every namespace, and "
          f"the late answers are the machine's, not the target's)")


def error_log_lines(prefix, *phrases):
    try:
        text = (Path(prefix) / "logs" / "error.log").read_text(errors="replace")
    except OSError:
        return {}
    return {phrase: text.count(phrase) for phrase in phrases}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--connections", default="100,1000,10000")
    parser.add_argument("--objects", default="small,chunk-low,chunk-hd,range-1m")
    parser.add_argument("--targets", default=",".join(TARGETS))
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("the local driver needs root")
    connection_counts = [int(c) for c in args.connections.split(",")]
    objects = args.objects.split(",")
    unknown = sorted(set(objects) - set(MEASURED))
    if unknown:
        sys.exit(f"unknown objects {', '.join(unknown)}: choose from {', '.join(MEASURED)}")
    targets = args.targets.split(",")
    os.environ.setdefault("CDNAAS_STATE_DIR", tempfile.mkdtemp(prefix="cdnaas-bench-state-"))
    os.environ["CDNAAS_ORIGIN_ALLOW"] = "127.0.0.1"
    from cdnaas.ro.vim.local.driver import LocalDriver  # noqa: E402 (after the environment)

    origin, _thread = serve_in_thread("0.0.0.0", 0)
    driver = LocalDriver()
    sig = measurement_sig(f"dp-{uuid.uuid4().hex[:6]}", origin.server_address[1],
                          max(connection_counts))
    started = time.monotonic()
    deployment = driver.deploy(sig)
    owner = deployment.resources["owner"]
    try:
        vnfs = {v.name: v for v in deployment.vnfs}
        group = f"{owner}_{deployment.deployment_id}_"
        cache = SimpleNamespace(**vars(vnfs["cache-0"]), group=group + "cache-0")
        lb = SimpleNamespace(**vars(vnfs["lb"]), group=group + "lb")
        gateway = network.region_gateway(cache.address)
        most = max(connection_counts)
        with reference(deployment, owner, "reference", REFERENCE_HOST, REFERENCE_CACHE, most,
                       origin=f"{gateway}:{origin.server_address[1]}") as ref, \
                reference(deployment, owner, "ref-lb", REFERENCE_HOST + 1, REFERENCE_LB,
                          2 * most, cache=ref.address) as ref_lb:
            by_name = {"cache": cache, "reference": ref, "lb": lb, "ref-lb": ref_lb}
            for path in objects:  # warm: every later answer is a HIT
                for name in ("cache", "reference"):
                    measure(deployment, by_name[name], path, 1, 1)
            fetched = dict(origin.stats())
            results = {(p, c): {name: [] for name in TARGETS} for p in objects
                       for c in connection_counts}
            for repetition in range(args.repetitions):
                order = targets[repetition % len(targets):] + targets[:repetition % len(targets)]
                for path in objects:
                    for connections in connection_counts:
                        for name in order:
                            settle(cache, ref)
                            run = measure(deployment, by_name[name], path, connections,
                                          args.seconds)
                            results[(path, connections)][name].append(run)
                            print(f"rep {repetition + 1} {path} c={connections} {name}: "
                                  f"{run['rps']:,.0f} req/s, errors {run['errors']}, "
                                  f"non-2xx {run['non_2xx']}, {run['us']:.1f} CPU us/request, "
                                  f"kernel TCP memory at most {run['tcp_mb']:,} MB",
                                  flush=True)
            misses = {MEASURED[p][0]: origin.stats().get(MEASURED[p][0], 0)
                      - fetched.get(MEASURED[p][0], 0) for p in objects}
            for missing in set(TARGETS) - set(targets):  # not measured this time
                for runs in results.values():
                    runs[missing] = [{"rps": 0, "requests": 0, "errors": 0, "non_2xx": 0,
                                      "cpu": None, "us": 0, "tcp_mb": 0}] * args.repetitions
            report(results, objects, connection_counts)
            print(f"\norigin fetches during the measurement (0: HITs only): {misses}")
            limits = sizing.nginx_limits(sizing.planned_connections(sig, vnfs["cache-0"]),
                                            1, max_files=processes.open_file_limit())
            print(f"cache and balancer planned for {max(connection_counts):,} connections: "
                  f"{limits} (open files per process here: {processes.open_file_limit()})")
            root = Path(os.environ["CDNAAS_STATE_DIR"]) / "local" / owner / sig.vcdn_id
            for name, prefix in (("cache", root / "cache-0"), ("lb", root / "lb"),
                                 ("reference", ref.prefix), ("ref-lb", ref_lb.prefix)):
                print(f"{name} error log: " + str(error_log_lines(
                    prefix, "worker_connections are not enough", "upstream timed out",
                    "Too many open files", "Cannot assign requested address",
                    "upstream prematurely closed", "[error]", "[crit]", "[alert]")))
    finally:
        driver.terminate(deployment)
        origin.shutdown()
        origin.server_close()
    print(f"\n{time.monotonic() - started:.0f} s, wrk {args.seconds:g} s per run, "
          f"{args.repetitions} repetitions, targets interleaved (order rotating)")


if __name__ == "__main__":
    main()
