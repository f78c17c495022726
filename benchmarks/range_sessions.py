"""Byte-range video sessions at a vCDN's planned load, on the local driver: do players that
seek into one file per quality (DASH ``SegmentBase``/``mediaRange``, HLS
``EXT-X-BYTERANGE``) play without a stall through the caches the plan sized for them?

The five services on the local driver (:func:`deploy_time.local_stack`), one vCDN of the
two regions planned for ``--demand`` concurrent viewers in each (the plan chooses the
caches), its caches cold. Then, at once in both regions for ``--seconds``, ``--demand``
players per region from a client namespace of the region (one
:class:`~cdnaas.calibration.viewers.Simulation` each, the region's players in one event
loop): the first region's play the DASH manifest's ranges, the second's the HLS
playlist's, every segment a ``Range`` request into the quality's one file, each player
starting at its own place in the file and requesting the next segment as its buffer asks
(``--chunk-seconds`` of video per segment). It prints per region the requests, errors,
non-206 answers, stalled windows and seconds, latency percentiles, and the bytes the
origin sent against the bytes the players received (slices: a range costs the origin at
most the slices it touches, once).

    .venv/bin/python benchmarks/range_sessions.py [--demand 250] [--seconds 64]
        [--representation hd]
"""
import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from deploy_time import REGIONS, local_stack  # noqa: E402
from purge import wait  # noqa: E402

from cdnaas.calibration import viewers  # noqa: E402
from cdnaas.ro.vim.local import clients, netns  # noqa: E402

#: what each region's players play: the DASH manifest, then the HLS playlist of a quality
MANIFESTS = ("/video/manifest-ranges.mpd", "/video/{quality}/media.m3u8")
VIEWER_HOST = 41
WINDOW_SECONDS = 16.0


def play(namespace, balancer, manifest, seed, args, found):
    """``args.demand`` players of ``manifest`` at ``balancer``, from ``namespace``, starting
    at places drawn with ``seed``."""
    with netns.entered(namespace):
        text = viewers.fetch_manifest(balancer, 80, manifest)
        ranges = viewers.manifest_ranges(text, manifest, args.representation)
        found[manifest] = viewers.Simulation(
            balancer, 80, None, viewers=args.demand, seconds=args.seconds,
            chunk_seconds=args.chunk_seconds, window_seconds=WINDOW_SECONDS, seed=seed,
            ranges=ranges).run()


def summary(report):
    """What a region's players saw: counts, stalls and latencies of one simulation."""
    windows = [w for viewer in report["windows"] for w in viewer]
    return {"requests": report["requests"], "errors": report["errors"],
            "non_2xx": report["non_2xx"], "windows": len(windows),
            "stalled_windows": sum(1 for w in windows if w[0]),
            "stall_seconds": round(sum(w[1] for w in windows), 3),
            "latency_ms": report["latency_ms"], "players_cpu_seconds": report["cpu_seconds"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demand", type=int, default=250, help="viewers per region")
    parser.add_argument("--seconds", type=float, default=64.0)
    parser.add_argument("--chunk-seconds", type=float, default=2.0)
    parser.add_argument("--representation", default="hd")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the local driver needs root")
    with local_stack() as (_stack, session, api, origin_url):
        body = {"name": "range-sessions", "flavor": "bench-2", "origin": origin_url,
                "regions": [{"name": r[0], "demand": args.demand, "quality": {"min_mos": 3.6}}
                            for r in REGIONS],
                "lease": {"end": "2099-01-01T00:00:00Z"}}
        accepted = session.post(f"{api}/vcdns", json=body, timeout=30)
        accepted.raise_for_status()
        wait(session, api, accepted)
        vcdn_id = accepted.json()["vcdn"]["id"]
        vcdn = session.get(f"{api}/vcdns/{vcdn_id}", timeout=10).json()
        origin_before = requests.get(f"{origin_url}/_bytes", timeout=10).json()
        found, threads = {}, []
        manifests = [m.format(quality=args.representation) for m in MANIFESTS]
        with clients.client(vcdn_id, vcdn["regions"][0]["name"], f"10.1.0.{VIEWER_HOST}") as one, \
                clients.client(vcdn_id, vcdn["regions"][1]["name"], f"10.2.0.{VIEWER_HOST}") as two:
            started = time.monotonic()
            for seed, (region, host, manifest) in enumerate(zip(vcdn["regions"], (one, two),
                                                                manifests)):
                threads.append(threading.Thread(target=play, args=(
                    host.namespace, region["load_balancer"], manifest, seed, args, found)))
                threads[-1].start()
            for thread in threads:
                thread.join()
            elapsed = time.monotonic() - started
        origin_after = requests.get(f"{origin_url}/_bytes", timeout=10).json()
        session.delete(f"{api}/vcdns/{vcdn_id}", timeout=30)
    origin_bytes = sum(origin_after.values()) - sum(origin_before.values())
    print(json.dumps({
        "demand_per_region": args.demand, "representation": args.representation,
        "caches": {r["name"]: r["caches"] for r in vcdn["regions"]},
        "seconds": round(elapsed, 1), "origin_bytes": origin_bytes,
        "regions": {manifest: summary(report) for manifest, report in found.items()}},
        indent=1))


if __name__ == "__main__":
    main()
