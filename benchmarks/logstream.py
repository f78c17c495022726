"""Log streaming on the local driver: what a dead collector costs a vCDN over a long
outage (10 minutes by default), against a vCDN that streams nothing, in the same run.

Two vCDNs side by side (1 region, a balancer and 2 caches, 1 vCPU each): **streamed**
sends its records to a syslog collector (TCP, in this process), **reference** has no log
streams. Each serves a cached 43 B object to wrk (a client namespace per vCDN, kept-alive
connections, as many requests as it can). Every measure is a pair of windows of
``--seconds``, one per vCDN, their order alternating, so whatever else the machine runs
weighs on both alike. Phases:

1. **before**: ``--rounds`` pairs with the collector alive;
2. **during**: the collector dead (its port closed, its connections reset) for
   ``--minutes``, pairs back to back; after each streamed window the shipper's counts
   (queued, dropped, kernel-dropped) and resident memory are read and the documented
   bound checked: at most ``CDNAAS_LOG_STREAM_QUEUE_RECORDS`` records queued plus the
   batch the sender holds for its next retry (:data:`cdnaas.ro.vim.logship.SYSLOG_BATCH`);
3. **after**: the collector back on the same port: seconds until a request made then
   reaches it, then ``--rounds`` pairs; the shipper's final counts must add up
   (received = sent + dropped + queued, short of the records a dying TCP connection
   held, which no sender can see).

Per phase it prints each vCDN's median requests/s, their ratio (streamed / reference,
1.0 = the same rate) and each balancer's CPU per request (its cgroup's CPU time over
the requests wrk counted), the figure this shared machine's noise moves least.

    .venv/bin/python benchmarks/logstream.py [--minutes 10] [--seconds 10] [--rounds 3]
"""
import argparse
import json
import os
import re
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import proc  # noqa: E402
from cdnaas.common import config  # noqa: E402
from cdnaas.common.sig import ServiceInstanceGraph  # noqa: E402
from cdnaas.delivery import logstreams  # noqa: E402
from cdnaas.origin.server import serve_in_thread  # noqa: E402
from cdnaas.ro.vim import logfiles, logship  # noqa: E402
from cdnaas.ro.vim.local import cgroups, clients, processes  # noqa: E402
from cdnaas.ro.vim.local.driver import LocalDriver  # noqa: E402
from tests.support.collectors import SyslogCollector, wait_for  # noqa: E402
from tests.support.sigs import sample_sig  # noqa: E402

TARGETS = ("streamed", "reference")


def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


def shipper_rss_kb(prefix):
    """Resident memory of the balancer's shipper (kB)."""
    return proc.memory_bytes(processes.pid_in(prefix / "logship.pid")) // 1024


def window(target, seconds, connections):
    """One wrk window at ``target``: its requests/s and the balancer's CPU us per request."""
    before = cgroups.cpu_usage_seconds(target.group)
    out = target.viewer.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", target.url],
                            timeout=seconds + 30)
    cpu = cgroups.cpu_usage_seconds(target.group) - before
    done = re.search(r"(\d+) requests in ([\d.]+)s", out)
    requests, elapsed = int(done[1]), float(done[2])
    return {"rps": requests / elapsed, "us": 1e6 * cpu / requests if requests else 0.0}


def pair(targets, index, seconds, connections):
    """A window at each target, the order alternating with ``index``."""
    order = TARGETS if index % 2 == 0 else TARGETS[::-1]
    return {name: window(targets[name], seconds, connections) for name in order}


def summary(pairs):
    """Median requests/s and CPU us per request per target, and the ratio of the medians."""
    found = {name: {"rps": round(median([p[name]["rps"] for p in pairs])),
                    "us": round(median([p[name]["us"] for p in pairs]), 1)}
             for name in TARGETS}
    found["ratio"] = round(found["streamed"]["rps"] / found["reference"]["rps"], 3)
    found["pair_ratios"] = [round(p["streamed"]["rps"] / p["reference"]["rps"], 2)
                            for p in pairs]
    return found


def deploy(driver, sig, address):
    """Deploy ``sig`` and describe its balancer as a target (URL, cgroup, state prefix)."""
    deployment = driver.deploy(sig)
    [balancer] = [v for v in deployment.vnfs if v.role == "load_balancer"]
    owner = deployment.resources["owner"]
    return deployment, SimpleNamespace(
        vnf=balancer, address=address, url=f"http://{balancer.address}/objects/small",
        group=f"{owner}_{deployment.deployment_id}_{balancer.name}",
        prefix=config.state_dir() / "local" / owner / sig.vcdn_id / balancer.name)


def graph(origin_port, streams=None):
    document = sample_sig(f"bench-logs-{uuid.uuid4().hex[:6]}", {"north": 2})
    document["origin"] = {"scheme": "http", "host": "127.0.0.1", "port": origin_port}
    for vnf in document["vnfs"]:
        vnf["vcpus"] = 1
    if streams:
        document["service"] = {"log_streams": logstreams.check(streams, "log_streams")}
    return ServiceInstanceGraph.from_dict(document)


def outage(targets, args, bound, report):
    """Pairs of windows while the collector is dead; the shipper's counts after each."""
    pairs, ends = [], time.monotonic() + 60 * args.minutes
    while time.monotonic() < ends:
        seconds = max(1, min(args.seconds, int(ends - time.monotonic()) // 2))
        pairs.append(pair(targets, len(pairs), seconds, args.connections))
        status = logfiles.stream_status(targets["streamed"].vnf)
        queued = status["destinations"][0]["queued"]
        pairs[-1]["shipper"] = {"queued": queued,
                                "dropped": status["destinations"][0]["dropped"],
                                "kernel_dropped": status["kernel_dropped"],
                                "received": status["received"],
                                "rss_kb": shipper_rss_kb(targets["streamed"].prefix)}
        if queued > bound:
            report["violations"].append(f"{queued} records queued, over the bound {bound}")
        print(json.dumps(pairs[-1]), file=sys.stderr, flush=True)
    return pairs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0,
                        help="minutes the collector is dead")
    parser.add_argument("--seconds", type=int, default=10, help="length of a window")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="pairs before and after")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the local driver needs root")
    os.environ.setdefault("CDNAAS_ORIGIN_ALLOW", "127.0.0.1")
    origin, _thread = serve_in_thread("0.0.0.0", 0)
    collector = SyslogCollector()
    port = collector.port
    bound = logstreams.shipper_config([], "-")["queue_records"] + logship.SYSLOG_BATCH
    report = {"minutes": args.minutes, "seconds": args.seconds,
              "connections": args.connections, "queue_records": bound, "violations": []}
    driver, deployments, targets, viewers = LocalDriver(), [], {}, []
    started = time.monotonic()
    try:
        for name, streams in (("streamed", [{"type": "syslog", "address": f"127.0.0.1:{port}"}]),
                              ("reference", None)):
            sig = graph(origin.server_address[1], streams)
            deployment, targets[name] = deploy(driver, sig, "10.1.0.40")
            deployments.append(deployment)
            viewers.append(clients.client(sig.vcdn_id, "north", "10.1.0.40"))
            targets[name].viewer = viewers[-1].__enter__()
            targets[name].viewer.fetch(targets[name].url)  # cached from now on
        for target in targets.values():  # the cgroup's CPU counts from the first reading
            cgroups.cpu_usage_seconds(target.group)
        before = [pair(targets, i, args.seconds, args.connections) for i in range(args.rounds)]
        live = logfiles.stream_status(targets["streamed"].vnf)
        report["live_status"] = live
        collector.close()
        down_at = time.monotonic()
        during = outage(targets, args, bound, report)
        report["down_seconds"] = round(time.monotonic() - down_at, 1)
        collector = SyslogCollector(port=port)
        recovered = time.monotonic()
        marker = targets["streamed"].url + "?after=1"
        targets["streamed"].viewer.fetch(marker)
        wait_for(lambda: any(r["u"] == "/objects/small?after=1" for r in collector.records()),
                 timeout=120)
        report["recovery_seconds"] = round(time.monotonic() - recovered, 1)
        after = [pair(targets, i, args.seconds, args.connections) for i in range(args.rounds)]
        final = logfiles.stream_status(targets["streamed"].vnf)
        report["final_status"] = final
        report["records_after_recovery"] = len(collector.messages)
        destination = final["destinations"][0]
        report["unaccounted"] = final["received"] - (
            destination["sent"] + destination["dropped"] + destination["queued"])
    finally:
        for viewer in viewers:
            viewer.__exit__(None, None, None)
        for deployment in deployments:
            driver.terminate(deployment)
        collector.close()
        origin.shutdown()
    report["phases"] = {"before": summary(before), "during": summary(during),
                        "after": summary(after)}
    report["down_windows"] = during
    report["max_rss_kb"] = max(p["shipper"]["rss_kb"] for p in during)
    report["max_queued"] = max(p["shipper"]["queued"] for p in during)
    report["wall_seconds"] = round(time.monotonic() - started)
    print(json.dumps(report, indent=1))
    print(f"\n{args.minutes:g} min outage, windows of {args.seconds} s, "
          f"{args.connections} connections:")
    for phase, found in report["phases"].items():
        print(f"  {phase:7s} streamed {found['streamed']['rps']:,} req/s "
              f"({found['streamed']['us']} CPU us/request), reference "
              f"{found['reference']['rps']:,} req/s ({found['reference']['us']} us): "
              f"ratio {found['ratio']} over {len(found['pair_ratios'])} pairs")
    destination = final["destinations"][0]
    print(f"  shipper: received {final['received']:,}, sent {destination['sent']:,}, dropped "
          f"{destination['dropped']:,} (queue bound {bound:,}, at most {report['max_queued']:,} "
          f"queued, RSS at most {report['max_rss_kb'] / 1024:.1f} MB), kernel-dropped "
          f"{final['kernel_dropped']:,}, unaccounted {report['unaccounted']:,}; first record "
          f"{report['recovery_seconds']} s after recovery, "
          f"{report['records_after_recovery']:,} records received after it")
    print(f"  bound violations: {len(report['violations'])}")


if __name__ == "__main__":
    main()
