"""Log streaming on the local driver: what streaming costs a balancer, and what a dead
collector costs it over a long outage (10 minutes by default).

One vCDN (1 region, a balancer and 2 caches, 1 vCPU each) serves a cached 43 B object to
wrk (a client namespace, kept-alive connections, as many requests as it can). Phases,
each measure ``--seconds`` long, all in the same run:

1. ``--rounds`` times: no log streams (the reference), then streaming to a live syslog
   collector (TCP, on this machine), alternately (the vCDN updated between them);
2. the collector dead (its port closed) for ``--down`` seconds under the same load,
   measured in windows: requests/s, the shipper's queued, dropped and kernel-dropped
   records and its resident memory (bounded by ``CDNAAS_LOG_STREAM_QUEUE_RECORDS``);
3. the collector back: seconds until a request made then reaches it, a measure with
   streams, then one without (the reference again).

Requests/s are reported as ratios to the reference's median.

    .venv/bin/python benchmarks/logstream.py [--seconds 10] [--down 600] [--rounds 3]
"""
import argparse
import json
import os
import re
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cdnaas.common import config  # noqa: E402
from cdnaas.common.sig import ServiceInstanceGraph  # noqa: E402
from cdnaas.delivery import logstreams  # noqa: E402
from cdnaas.origin.server import serve_in_thread  # noqa: E402
from cdnaas.ro.vim import logfiles  # noqa: E402
from cdnaas.ro.vim.local import clients, processes  # noqa: E402
from cdnaas.ro.vim.local.driver import LocalDriver  # noqa: E402
from tests.support.collectors import SyslogCollector, wait_for  # noqa: E402
from tests.support.sigs import sample_sig  # noqa: E402


def wrk_rate(viewer, url, seconds, connections):
    """Requests/s wrk reached on ``url`` over ``seconds`` (one thread)."""
    out = viewer.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", url],
                     timeout=seconds + 30)
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def median(values):
    return sorted(values)[len(values) // 2]


def shipper_rss_kb(prefix):
    """Resident memory of the balancer's shipper (kB)."""
    pid = processes.pid_in(prefix / "logship.pid")
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        return int(next(line for line in status if line.startswith("VmRSS:")).split()[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=10, help="length of a measure")
    parser.add_argument("--down", type=int, default=600, help="seconds the collector is dead")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the local driver needs root")
    os.environ.setdefault("CDNAAS_ORIGIN_ALLOW", "127.0.0.1")
    origin, _thread = serve_in_thread("0.0.0.0", 0)
    collector = SyslogCollector()
    port = collector.port
    document = sample_sig(f"bench-logs-{uuid.uuid4().hex[:6]}", {"north": 2})
    document["origin"] = {"scheme": "http", "host": "127.0.0.1",
                          "port": origin.server_address[1]}
    for vnf in document["vnfs"]:
        vnf["vcpus"] = 1
    plain = ServiceInstanceGraph.from_dict(document)
    streamed = ServiceInstanceGraph.from_dict({**document, "service": {
        "log_streams": logstreams.check([{"type": "syslog", "address": f"127.0.0.1:{port}"}],
                                        "log_streams")}})
    driver = LocalDriver()
    deployment = driver.deploy(plain)
    report = {"seconds": args.seconds, "down": args.down, "connections": args.connections,
              "queue_records": logstreams.shipper_config([], "-")["queue_records"]}
    try:
        [balancer] = [v for v in deployment.vnfs if v.role == "load_balancer"]
        prefix = config.state_dir() / "local" / deployment.resources["owner"] / \
            plain.vcdn_id / balancer.name
        url = f"http://{balancer.address}/objects/small"
        with clients.client(plain.vcdn_id, "north", "10.1.0.40") as viewer:
            viewer.fetch(url)  # cached from now on
            reference, live = [], []
            for _round in range(args.rounds):
                reference.append(wrk_rate(viewer, url, args.seconds, args.connections))
                deployment = driver.update(deployment, streamed, previous=plain)
                live.append(wrk_rate(viewer, url, args.seconds, args.connections))
                if _round < args.rounds - 1:
                    deployment = driver.update(deployment, plain, previous=streamed)
            report["live_status"] = logfiles.stream_status(balancer)
            collector.close()
            windows, ends = [], time.monotonic() + args.down
            while time.monotonic() < ends:
                left = max(1, int(ends - time.monotonic()))
                rate = wrk_rate(viewer, url, min(args.seconds, left), args.connections)
                status = logfiles.stream_status(balancer)
                windows.append({"rate": rate, "queued": status["destinations"][0]["queued"],
                                "dropped": status["destinations"][0]["dropped"],
                                "kernel_dropped": status["kernel_dropped"],
                                "rss_kb": shipper_rss_kb(prefix)})
                print(json.dumps(windows[-1]), file=sys.stderr)
            report["down_windows"] = windows
            collector = SyslogCollector(port=port)
            started = time.monotonic()
            viewer.fetch(f"{url}?after=1")
            wait_for(lambda: any(r["u"] == "/objects/small?after=1" for r in collector.records()),
                     timeout=120)
            report["recovery_seconds"] = round(time.monotonic() - started, 1)
            report["after"] = wrk_rate(viewer, url, args.seconds, args.connections)
            report["final_status"] = logfiles.stream_status(balancer)
            deployment = driver.update(deployment, plain, previous=streamed)
            reference.append(wrk_rate(viewer, url, args.seconds, args.connections))
            report["reference"], report["live"] = reference, live
    finally:
        driver.terminate(deployment)
        collector.close()
        origin.shutdown()
    reference = median(report["reference"])
    rates = [w["rate"] for w in report["down_windows"]]
    report["ratios"] = {"live": round(median(report["live"]) / reference, 3),
                        "down_median": round(median(rates) / reference, 3),
                        "down_min": round(min(rates) / reference, 3),
                        "after": round(report["after"] / reference, 3)}
    report["max_rss_kb"] = max(w["rss_kb"] for w in report["down_windows"])
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
