"""Signed-URL key rotation under load on the local driver: 1,000 viewers by default fetch
signed URLs through the balancers while the vCDN's signing keys rotate; nothing may be lost.

The five services on the local driver (:func:`deploy_time.local_stack`), one vCDN of 2
regions x 2 caches whose ``/video/`` paths need a token (``access.signed_urls``), the
video's first ``--segments`` low-quality segments (73 KB) prefetched. Viewers are split
between the regions, each region's in one client namespace (an address of the region's
client prefix), all of a region's in one asyncio loop in a thread that entered the
namespace: each viewer keeps one HTTP/1.1 connection to its region's balancer and asks
for the next segment every ``--interval`` seconds (at once when it is late), for
``--seconds`` at most or ``--requests`` per viewer at most.

Tokens come as a customer's backend would hand them out: signed through the API
(``POST .../signed-urls``, scope the ``/video/`` prefix, bound to the region's client
address), one per key and region; a viewer takes the current one when it starts and
again every ``--refresh`` seconds (a player fetching its manifest again), spread over
the viewers. A rotation, ``--rotations`` times, ``OLD`` to ``NEW`` with two keys active
in between:

1. **add**: PATCH ``keys: [OLD, NEW]``, until the operation is COMPLETED (every cache
   reloaded with both);
2. **switch**: tokens are signed with ``NEW`` from now; wait ``--refresh`` + 2 s so every
   viewer holds one;
3. **remove**: PATCH ``keys: [NEW]``, until COMPLETED; then ``--settle`` seconds.

Every request is counted: a status other than 200, a connection that fails, or a
response that does not come within 10 s is a lost request. A kept-alive connection the
server closed while idle is opened again and the request sent again, as browsers do
(counted as reconnects, not losses: :mod:`keepalive_viewers`). It prints requests, losses by kind, the achieved
request rate (overall and per phase), the requests that were in flight while a PATCH
ran, and this process's CPU time (the viewers' cost).

    .venv/bin/python benchmarks/key_rotation.py [--viewers 1000] [--interval 1]
        [--rotations 2] [--seconds 180]
"""
import argparse
import asyncio
import collections
import json
import os
import re
import secrets
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from deploy_time import REGIONS, local_stack  # noqa: E402
from keepalive_viewers import KeptAlive  # noqa: E402
from purge import wait  # noqa: E402

from cdnaas.calibration.viewers import raise_file_limit  # noqa: E402
from cdnaas.ro.vim.local import clients, netns  # noqa: E402

PREFIX = "/video/"
#: the segments the viewers play (73 KB each)
SEGMENT = "/video/low/seg-{n}.m4s"
#: the viewers' address in each region's client prefix
VIEWER_HOST = 40


class Tokens:
    """The token a viewer of each region takes now (the customer's backend), and the key
    that signed it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.current = {}

    def set(self, key_id, by_region):
        with self.lock:
            self.current = {region: (key_id, query) for region, query in by_region.items()}

    def get(self, region):
        with self.lock:
            return self.current[region]


class Tally:
    """Every request of a region's viewers: ``(began, ended, outcome, key id)``."""

    def __init__(self):
        self.requests = []
        self.reconnects = 0


async def _viewer(index, count, region, balancer, tokens, tally, args, stop_at):
    """One viewer: a segment every ``args.interval`` s on one kept-alive connection."""
    started = time.monotonic() + args.interval * index / count  # spread over one interval
    refresh_phase = args.refresh * index / count
    await asyncio.sleep(max(0.0, started - time.monotonic()))
    key_id, query = tokens.get(region)
    next_refresh = started + refresh_phase
    connection = KeptAlive(balancer)
    for number in range(args.requests):
        due = started + number * args.interval
        now = time.monotonic()
        if due >= stop_at[0] or now >= stop_at[0]:
            break
        if due > now:
            await asyncio.sleep(due - now)
        if time.monotonic() >= next_refresh:
            key_id, query = tokens.get(region)
            next_refresh += args.refresh
        path = SEGMENT.format(n=(index + number) % args.segments + 1)
        request = (f"GET {path}?{query} HTTP/1.1\r\nHost: {balancer}\r\n"
                   "User-Agent: cdnaas-rotation-bench\r\n\r\n").encode("ascii")
        began = time.monotonic()
        outcome = await connection.ask(request)
        tally.requests.append((began, time.monotonic(), outcome, key_id))
    connection.close()
    tally.reconnects += connection.reconnects


def run_region(namespace, region, balancer, viewers, first, tokens, tally, args, stop_at):
    """The viewers ``first .. first + viewers - 1`` of ``region``, in its namespace."""
    with netns.entered(namespace):
        asyncio.run(_viewers(region, balancer, viewers, first, tokens, tally, args, stop_at))


async def _viewers(region, balancer, viewers, first, tokens, tally, args, stop_at):
    await asyncio.gather(*[_viewer(first + i, args.viewers, region, balancer, tokens, tally,
                                   args, stop_at) for i in range(viewers)])


def key(key_id):
    return {"id": key_id, "secret": f"bench-{key_id}-" + secrets.token_hex(16)}


def access(keys):
    return {"signed_urls": {"paths": [PREFIX], "keys": keys}}


def sign_all(session, api, vcdn_id, key_id, regions):
    """A token per region for ``key_id`` through the API, scope ``/video/``, bound to the
    region's viewer address."""
    found = {}
    for region in regions:
        answer = session.post(f"{api}/vcdns/{vcdn_id}/signed-urls", timeout=30, json={
            "path": SEGMENT.format(n=1), "prefix": PREFIX, "key_id": key_id,
            "expires_in": 3600, "client": f"{region['viewer']}/32"})
        answer.raise_for_status()
        found[region["name"]] = answer.json()["query"]
    return found


def patched(session, api, vcdn_id, keys):
    """PATCH the vCDN's keys; ``(sent, completed)`` monotonic times once COMPLETED."""
    sent = time.monotonic()
    accepted = session.patch(f"{api}/vcdns/{vcdn_id}", json={"access": access(keys)},
                             timeout=30)
    accepted.raise_for_status()
    wait(session, api, accepted)
    return sent, time.monotonic()


def rotate(session, api, vcdn_id, regions, tokens, first, args, marks):
    """The rotations (see the module doc) from the vCDN's key ``first``; ``marks`` gets
    ``(label, sent, completed)`` of each step (monotonic times)."""
    keys = [first]
    time.sleep(args.settle)
    for turn in range(1, args.rotations + 1):
        old, new = keys[-1], key(f"k{turn}")
        sent, done = patched(session, api, vcdn_id, [old, new])
        marks.append((f"add k{turn}", sent, done))
        tokens.set(new["id"], sign_all(session, api, vcdn_id, new["id"], regions))
        switched = time.monotonic()
        marks.append((f"switch to k{turn}", switched, switched))
        time.sleep(args.refresh + 2)
        sent, done = patched(session, api, vcdn_id, [new])
        marks.append((f"remove k{turn - 1}", sent, done))
        keys = [new]
        time.sleep(args.settle)


def report(tallies, marks, started, ended, cpu, args):
    requests = sorted(r for tally in tallies for r in tally.requests)
    outcomes = collections.Counter(str(r[2]) for r in requests)
    lost = len(requests) - outcomes.get("200", 0)
    span = max(ended - started, 1e-9)
    print(f"{args.viewers} viewers ({', '.join(f'{len(t.requests):,}' for t in tallies)} "
          f"requests per region), {args.rotations} rotation(s), a segment every "
          f"{args.interval:g} s, tokens taken again every {args.refresh:g} s")
    print(f"requests: {len(requests):,} in {span:.1f} s = {len(requests) / span:,.0f} req/s; "
          f"lost: {lost} ({dict(outcomes)}); reconnects of idle connections: "
          f"{sum(t.reconnects for t in tallies)}")
    latencies = sorted(r[1] - r[0] for r in requests)
    if latencies:
        print(f"response time: median {1000 * latencies[len(latencies) // 2]:.1f} ms, "
              f"99th percentile {1000 * latencies[int(0.99 * (len(latencies) - 1))]:.1f} ms, "
              f"worst {1000 * latencies[-1]:.1f} ms")
    for label, sent, done in marks:
        during = [r for r in requests if r[0] < done and r[1] > sent]
        print(f"  {label:14s} at {sent - started:6.1f} s, took {done - sent:5.2f} s: "
              f"{len(during):,} requests in flight meanwhile, "
              f"{sum(r[2] != 200 for r in during)} lost; keys used "
              f"{dict(collections.Counter(r[3] for r in during))}")
    if marks and started + args.seconds < marks[-1][2]:
        print("the load ended before the last rotation: raise --seconds")
    quiet = [r for r in requests if not any(r[0] < done and r[1] > sent
                                            for _label, sent, done in marks)]
    print(f"  outside every step: {len(quiet):,} requests, "
          f"{sum(r[2] != 200 for r in quiet)} lost (the load's own losses, no key changing); "
          f"refused 403 (a token not accepted) in all: {outcomes.get('403', 0)}")
    print(f"viewers' CPU: {cpu:.1f} s ({100 * cpu / span:.0f}% of one core)")
    return {"viewers": args.viewers, "requests": len(requests), "lost": lost,
            "lost_outside_steps": sum(r[2] != 200 for r in quiet),
            "outcomes": dict(outcomes), "rate": round(len(requests) / span),
            "marks": [(label, round(sent - started, 2), round(done - sent, 2))
                      for label, sent, done in marks]}


def vnf_errors(state_dir):
    """``{VNF: {message: count}}`` of the error logs of the vCDN's VNFs (what nginx said
    about any request it could not answer), the message without its time and ids."""
    found = {}
    for log in sorted(state_dir.rglob("logs/error.log")):
        counts = collections.Counter(
            re.sub(r"^\S+ \S+ \[(\w+)\] \d+#\d+: \*?\d* ?", r"[\1] ", line).split(
                ", client:")[0].strip()
            for line in log.read_text(errors="replace").splitlines())
        if counts:
            found[log.parent.parent.name] = dict(counts.most_common(5))
            print(f"  {log.parent.parent.name}: {dict(counts.most_common(5))}")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--viewers", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=1.0,
                        help="seconds between a viewer's requests")
    parser.add_argument("--requests", type=int, default=1000, help="at most, per viewer")
    parser.add_argument("--seconds", type=float, default=180.0, help="at most, for the load")
    parser.add_argument("--rotations", type=int, default=2)
    parser.add_argument("--refresh", type=float, default=10.0,
                        help="seconds between a viewer's token refreshes")
    parser.add_argument("--settle", type=float, default=10.0,
                        help="seconds of load before the first and after each rotation")
    parser.add_argument("--segments", type=int, default=60)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the local driver needs root")
    if raise_file_limit(args.viewers + 256) < args.viewers + 256:
        raise SystemExit(f"{args.viewers} viewers need more open files than this process may")
    first = key("k0")
    with local_stack() as (stack, session, api, origin_url):
        body = {"name": "rotation-bench", "flavor": "bench-2", "origin": origin_url,
                "regions": [{"name": r[0], "demand": 1000, "quality": {"min_mos": 3.6}}
                            for r in REGIONS],
                "lease": {"end": "2099-01-01T00:00:00Z"}, "access": access([first])}
        accepted = session.post(f"{api}/vcdns", json=body, timeout=30)
        accepted.raise_for_status()
        wait(session, api, accepted)
        vcdn_id = accepted.json()["vcdn"]["id"]
        vcdn = session.get(f"{api}/vcdns/{vcdn_id}", timeout=10).json()
        regions = [{"name": r["name"], "balancer": r["load_balancer"],
                    "viewer": f"10.{i + 1}.0.{VIEWER_HOST}"}
                   for i, r in enumerate(vcdn["regions"])]
        wait(session, api, session.post(f"{api}/vcdns/{vcdn_id}/prefetches", timeout=30, json={
            "paths": [SEGMENT.format(n=n + 1) for n in range(args.segments)]}))
        tokens = Tokens()
        tokens.set("k0", sign_all(session, api, vcdn_id, "k0", regions))
        marks, tallies, threads = [], [Tally() for _ in regions], []
        with clients.client(vcdn_id, regions[0]["name"], regions[0]["viewer"]) as one, \
                clients.client(vcdn_id, regions[1]["name"], regions[1]["viewer"]) as two:
            started = time.monotonic()
            stop_at = [started + args.seconds]  # brought forward once the rotations end
            cpu_before = time.process_time()
            share = args.viewers // len(regions)
            for index, (region, host) in enumerate(zip(regions, (one, two))):
                count = share if index < len(regions) - 1 else args.viewers - share * index
                threads.append(threading.Thread(target=run_region, args=(
                    host.namespace, region["name"], region["balancer"], count, share * index,
                    tokens, tallies[index], args, stop_at)))
                threads[-1].start()
            try:
                rotate(session, api, vcdn_id, regions, tokens, first, args, marks)
            finally:
                stop_at[0] = min(stop_at[0], time.monotonic())
                for thread in threads:
                    thread.join()
            ended = time.monotonic()
            cpu = time.process_time() - cpu_before
        found = report(tallies, marks, started, ended, cpu, args)
        found["vnf_errors"] = vnf_errors(Path(stack.state_dir))
        session.delete(f"{api}/vcdns/{vcdn_id}", timeout=30)
    print(json.dumps(found))


if __name__ == "__main__":
    main()
