"""The HTTPS path at the balancer: our balancer against a hand-tuned nginx TLS balancer.

On the local driver (root): one region with one cache and its balancer of 1 vCPU each,
the vCDN serving HTTPS with a certificate kept in RO's secret store (as a tenant's is);
beside them on the same region bridge, with the same 1-vCPU quota, a **reference**: nginx
hand-tuned for this one job (TLS 1.3, HTTP/2, the same shared session cache, no access
log, a kept-alive pool to the same cache). Both balancers front our cache, warmed first,
so the difference measured is the balancer's. The targets take turns (their order rotates
each repetition), the balancer pinned to one CPU and the generator to the other
(:func:`cdnaas.ro.vim.local.loadgen.pinned`), from a client host of the region. Loads:

- ``h2``: h2load, HTTP/2 over TLS 1.3, ``--connections`` connections of 10 streams each;
- ``h1``: h2load ``--h1``, HTTP/1.1 over TLS 1.3, kept-alive connections;
- ``resumed``: one connection per request, each resuming the TLS session of the one
  before (a viewer's player coming back), from a Python client: it prints the share of
  handshakes the balancer resumed and the balancer's CPU per request; the client bounds
  the rate, so the ratio that counts there is CPU per request.

It prints, per load and object, ours/reference requests/s (min / median / max of the
repetitions), reference/ours CPU per request, and each target's failed requests.

    .venv/bin/python benchmarks/dataplane_https.py [--seconds 5] [--repetitions 3]
        [--connections 100] [--objects small,chunk-low] [--rps N]
"""
import argparse
import contextlib
import ipaddress
import os
import re
import socket
import ssl
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dataplane import (REFERENCE_HEAD, REFERENCE_HOST, measurement_sig, reference,  # noqa: E402
                       settle, spread)

from cdnaas.common import keyfiles  # noqa: E402
from cdnaas.db import migrate  # noqa: E402
from cdnaas.db.engine import Database  # noqa: E402
from cdnaas.origin.server import serve_in_thread  # noqa: E402
from cdnaas.ro import secrets  # noqa: E402
from cdnaas.ro.vim.local import cgroups, clients, loadgen, netns, network  # noqa: E402
from cdnaas.ro.vim.secret_backends import FernetBackend  # noqa: E402
from tests.support.certs import TestCA  # noqa: E402

LOADS = ("h2", "h1", "resumed")
HTTPS_PORT = 443
#: streams per HTTP/2 connection (a player fetches a segment and the next manifest at once)
STREAMS = 10

#: The reference balancer: TLS 1.3 and HTTP/2, the same session policy as ours (a shared
#: cache, no tickets), no log, a kept-alive pool to our cache.
REFERENCE_TLS_LB = REFERENCE_HEAD + """\
    server {{
        listen {address}:443 ssl http2 backlog=65535 reuseport;
        ssl_certificate {certificate};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.3;
        ssl_session_cache shared:ref:16m;
        ssl_session_timeout 1h;
        ssl_session_tickets off;
        location / {{
            proxy_pass http://caches;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_max_temp_file_size 0;
            proxy_buffer_size 16k;
            proxy_buffers 4 16k;
        }}
    }}
    upstream caches {{ server {cache}:80; keepalive {keepalive}; keepalive_requests 100000;
                     keepalive_timeout 2s; }}
}}
"""


def tls_sig(vcdn_id, origin_port, planned, store, issued):
    """The measurement SIG (:func:`dataplane.measurement_sig`) serving HTTPS with ``issued``,
    kept in RO's secret ``store`` as SO has a tenant's certificate kept."""
    sig = measurement_sig(vcdn_id, origin_port, planned)
    kept = store.store(vcdn_id, issued.chain_pem, issued.key_pem)
    sig.service = {"tls": {"certificate_ref": kept["ref"],
                           "fingerprint_sha256": issued.fingerprint}}
    return sig


def h2load(host, target, load, path, connections, seconds, hostname, rps=None):
    """Run h2load from client ``host`` at ``target`` for ``seconds`` (``rps``: requests per
    second per connection, None: as many as it can); return its figures."""
    argv = ["h2load", f"--connect-to={target.address}:{HTTPS_PORT}", "-c", str(connections),
            "-D", f"{seconds:g}", "--warm-up-time=1",
            *(["--h1"] if load == "h1" else ["-m", str(STREAMS)]),
            *([f"--rps={rps:g}"] if rps else []),
            f"https://{hostname}{path}"]
    with loadgen.pinned(cgroups.pids(target.group), 1) as cpus:
        status, out, err, _cpu, _ran = host.run_measured(argv, seconds + 30, cpus)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, "
                     r"(\d+) failed, (\d+) errored", out)
    if status != 0 or not done:
        raise RuntimeError(f"h2load failed ({status}): {err or out}")
    protocol = re.search(r"Application protocol: (\S+)", out)
    tls = re.search(r"TLS Protocol: (\S+)", out)
    return {"requests": int(done[2]), "failed": int(done[3]) + int(done[4]),
            "seconds": seconds, "protocol": protocol and protocol[1], "tls": tls and tls[1]}


def resumed(host, target, path, seconds, hostname, ca_file):
    """One TLS connection per request from ``host`` at ``target`` for ``seconds``, each
    offering the session of the one before; return the requests, failures and resumptions."""
    context = ssl.create_default_context(cafile=ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    request = f"GET {path} HTTP/1.1\r\nHost: {hostname}\r\nConnection: close\r\n\r\n".encode()
    counts = {"requests": 0, "failed": 0, "resumed": 0, "seconds": seconds}
    session, deadline = None, time.monotonic() + seconds
    with netns.entered(host.namespace), loadgen.pinned(cgroups.pids(target.group), 1):
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((target.address, HTTPS_PORT), timeout=5) as raw, \
                        context.wrap_socket(raw, server_hostname=hostname,
                                            session=session) as tls:
                    tls.sendall(request)
                    answer = b"".join(iter(lambda: tls.recv(65536), b""))
                    ok = answer.startswith(b"HTTP/1.1 200")
                    counts["resumed"] += tls.session_reused
                    session = tls.session
            except OSError:
                ok = False
            counts["requests" if ok else "failed"] += 1
    return counts


def measure(host, target, load, path, connections, seconds, hostname, ca_file, rps=None):
    before = cgroups.cpu_usage_seconds(target.group)
    if load == "resumed":
        run = resumed(host, target, path, seconds, hostname, ca_file)
    else:
        run = h2load(host, target, load, path, connections, seconds, hostname, rps)
    cpu = cgroups.cpu_usage_seconds(target.group) - before
    return {**run, "rps": run["requests"] / run["seconds"],
            "us": 1e6 * cpu / run["requests"] if run["requests"] else 0}


def report(results, loads, objects):
    print("\n| load | object | ours / reference req/s | reference / ours CPU per request | "
          "ours, reference CPU us/request (median) | failed ours/reference | "
          "resumed handshakes ours/reference |")
    print("|---|---|---|---|---|---|---|")
    for load in loads:
        for path in objects:
            runs = results[(load, path)]

            def ratios(top, bottom, field):
                return [a[field] / b[field] for a, b in zip(runs[top], runs[bottom])
                        if a[field] and b[field]]

            def median(name):
                values = sorted(run["us"] for run in runs[name])
                return values[len(values) // 2] if values else 0

            def share(name):
                total = sum(run["requests"] for run in runs[name])
                return f"{sum(run.get('resumed', 0) for run in runs[name]) / total:.0%}" \
                    if load == "resumed" and total else "-"
            print(f"| {load} | {path} | {spread(ratios('ours', 'reference', 'rps'))} | "
                  f"{spread(ratios('reference', 'ours', 'us'))} | "
                  f"{median('ours'):.0f}, {median('reference'):.0f} | "
                  f"{sum(r['failed'] for r in runs['ours'])}/"
                  f"{sum(r['failed'] for r in runs['reference'])} | "
                  f"{share('ours')}/{share('reference')} |")


@contextlib.contextmanager
def secret_store(state):
    """RO's secret store over a SQLite database in ``state`` (migrated), as RO makes it."""
    url = f"sqlite:///{state}/ro.sqlite"
    migrate.upgrade("ro", url)
    keyfiles.ensure_secret_key()
    database = Database(url)
    try:
        yield secrets.SecretStore(database, FernetBackend())
    finally:
        database.dispose()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--objects", default="small,chunk-low")
    parser.add_argument("--loads", default=",".join(LOADS))
    parser.add_argument("--rps", type=float,
                        help="requests/s per connection (h2, h1): a fixed load below saturation, "
                             "where CPU per request is the ratio that counts and the machine's "
                             "other work moves it less")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("the local driver needs root")
    objects = [f"/objects/{name}" for name in args.objects.split(",")]
    loads = args.loads.split(",")
    state = Path(tempfile.mkdtemp(prefix="cdnaas-bench-state-"))
    os.environ.setdefault("CDNAAS_STATE_DIR", str(state))
    os.environ["CDNAAS_SECRET_KEY_FILE"] = str(state / "secrets.key")
    os.environ["CDNAAS_ORIGIN_ALLOW"] = "127.0.0.1"
    from cdnaas.ro.vim.local.driver import LocalDriver  # noqa: E402 (after the environment)

    ca = TestCA("CDNaaS benchmark root")
    origin, _thread = serve_in_thread("0.0.0.0", 0)
    vcdn_id = f"dp-{uuid.uuid4().hex[:6]}"
    issued = ca.issue([f"{vcdn_id}.bench.invalid"])
    ca_file = state / "root.pem"
    ca_file.write_text(ca.root_pem)
    key_folder = Path(tempfile.mkdtemp(prefix="cdnaas-bench-tls-"))
    (key_folder / "chain.pem").write_text(issued.chain_pem)
    (key_folder / "key.pem").write_text(issued.key_pem)
    os.chmod(key_folder / "key.pem", 0o600)
    started = time.monotonic()
    with secret_store(state) as store:
        driver = LocalDriver()
        driver.secrets = store
        sig = tls_sig(vcdn_id, origin.server_address[1], args.connections * STREAMS,
                      store, issued)
        deployment = driver.deploy(sig)
        try:
            owner = deployment.resources["owner"]
            vnfs = {v.name: v for v in deployment.vnfs}
            group = f"{owner}_{deployment.deployment_id}_"
            ours = SimpleNamespace(**vars(vnfs["lb"]), group=group + "lb")
            cache = SimpleNamespace(**vars(vnfs["cache-0"]), group=group + "cache-0")
            with reference(deployment, owner, "ref-tls", REFERENCE_HOST + 2, REFERENCE_TLS_LB,
                           2 * args.connections, cache=cache.address,
                           certificate=key_folder / "chain.pem",
                           key=key_folder / "key.pem") as ref, \
                    clients.client(deployment.deployment_id, ours.region,
                                   _generator_address(deployment, ours)) as host:
                targets = {"ours": ours, "reference": ref}
                for path in objects:  # warm the cache: every measured answer is a HIT
                    measure(host, ours, "h1", path, 1, 1, sig.hostname, str(ca_file))
                results = {(load, path): {name: [] for name in targets}
                           for load in loads for path in objects}
                for repetition in range(args.repetitions):
                    order = list(targets)[repetition % 2:] + list(targets)[:repetition % 2]
                    for load in loads:
                        for path in objects:
                            for name in order:
                                settle(cache)
                                run = measure(host, targets[name], load, path,
                                              args.connections, args.seconds, sig.hostname,
                                              str(ca_file), args.rps)
                                results[(load, path)][name].append(run)
                                print(f"rep {repetition + 1} {load} {path} {name}: "
                                      f"{run['rps']:,.0f} req/s, failed {run['failed']}, "
                                      f"{run['us']:.0f} CPU us/request"
                                      + (f", {run.get('protocol')} {run.get('tls')}"
                                         if load != "resumed" else
                                         f", resumed {run['resumed']}/{run['requests']}"),
                                      flush=True)
                report(results, loads, objects)
        finally:
            driver.terminate(deployment)
            origin.shutdown()
            origin.server_close()
    print(f"\n{time.monotonic() - started:.0f} s, {args.seconds:g} s per run, "
          f"{args.repetitions} repetitions, {args.connections} connections, targets "
          "interleaved (order rotating)")


def _generator_address(deployment, vnf):
    """The generator's address on ``vnf``'s region subnet: its last host, as loadgen's."""
    _bridge, subnet = network.find_bridge(deployment.deployment_id, vnf.region)
    return ipaddress.ip_network(subnet).broadcast_address - 1


if __name__ == "__main__":
    main()
