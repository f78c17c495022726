"""What the typed answers add to the IM's hot pass: reading 10,000 vCDNs' SO brief view and
RO readings as records, against reading them as dicts, in the same run.

Each pass the IM reads ``GET /so/v1/instances?brief=true`` and ``POST /ro/v1/readings``
(chunks of :data:`cdnaas.im.reading.CHUNK`) for every vCDN it observes. The bodies here
have the shape the services answer (two regions, five VNFs, a balancer's traffic minute
per region). The benchmark times, best of ``--repeat``, with the garbage collector on (most
of a record's cost is the collections its allocations bring about):

- **dicts**: the bodies decoded (``orjson``, as :class:`cdnaas.common.http.JsonClient`)
  and the fields the pass reads indexed, the answers kept for the pass, as before;
- **records**: the same with the records of :mod:`cdnaas.common.answers` built from the
  decoded bodies (:meth:`cdnaas.common.clients.SoClient.instances`,
  :meth:`~cdnaas.common.clients.RoClient.readings_many`) and read by attribute.

It prints both in ms per pass, their ratio, what the records add per vCDN and as a share
of one CPU over the pass period (10 s), and both again with the collector off; it fails
when records take more than ``--floor`` times dicts.

    flock /tmp/cdnaas-bench.lock .venv/bin/python benchmarks/answers_decode.py
"""
import argparse
import gc
import sys
import time

import orjson

from cdnaas.common.answers import Instance, Readings, many
from cdnaas.im.reading import CHUNK

PERIOD_SECONDS = 10
#: vCDNs per page of SO's list
PAGE = 1000


def brief(i):
    return {"id": f"vcdn-{i:05d}", "name": f"site-{i}", "tenant": "acme", "flavor": "video",
            "template_version": 1, "state": "ACTIVE",
            "lease": {"start": "2026-11-01T00:00:00+00:00", "end": "2027-11-01T00:00:00+00:00"},
            "regions": [{"name": r, "demand": 20000, "quality": {"min_mos": 4.0}}
                        for r in ("eu", "us")],
            "revision": 3}


def reading(i):
    vnfs = [(f"{r}-{role}-{n}", role, r) for r in ("eu", "us")
            for role, n in (("cache", 0), ("cache", 1), ("lb", 0))][:5]
    return {"id": f"vcdn-{i:05d}",
            "health": {"healthy": True, "vnfs": [
                {"name": n, "role": role, "region": r, "healthy": True, "detail": "ok"}
                for n, role, r in vnfs]},
            "metrics": {"id": f"vcdn-{i:05d}", "vnfs": [
                {"name": n, "role": role, "region": r, "host": "h-1", "vcpus": 2,
                 "read_at": 1.7e9, "active_connections": 40, "requests": 123456,
                 "cpu_seconds": 321.5} for n, role, r in vnfs]},
            "traffic": {"id": f"vcdn-{i:05d}", "cursor": "abc", "more": False, "regions": [
                {"region": r, "vnf": f"{r}-lb-0", "records": 60, "skipped": 0, "lost": False,
                 "minutes": [{"minute": "2026-11-29T00:00:00+00:00", "requests": 60,
                              "bytes_out": 6_000_000, "hits": 50, "misses": 10,
                              "status": {"2xx": 60}}]} for r in ("eu", "us")]},
            "traffic_error": None}


def best(repeat, work):
    """The least wall time of ``repeat`` runs of ``work()``, in ms (the garbage collector on,
    as in the IM; what a run keeps is dropped before the next)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        kept = work()
        times.append(time.perf_counter() - start)
        del kept
    return min(times) * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vcdns", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--floor", type=float, default=1.25,
                        help="a pass's reads with records may take at most this many times "
                             "the reads with dicts")
    args = parser.parse_args()
    pages = [orjson.dumps({"vcdns": [brief(i) for i in range(start, min(start + PAGE, args.vcdns))],
                           "next": None}) for start in range(0, args.vcdns, PAGE)]
    chunks = [orjson.dumps({"readings": [reading(i) for i in range(start, min(start + CHUNK,
                                                                                args.vcdns))]})
              for start in range(0, args.vcdns, CHUNK)]

    def with_dicts():
        """The reads as the IM made them before: the answers' dicts kept and indexed."""
        kept = []
        vcdns = [v for page in pages for v in orjson.loads(page)["vcdns"]]
        for body in chunks:
            for vcdn, answer in zip(vcdns, orjson.loads(body)["readings"]):
                kept.append((vcdn["id"], vcdn["flavor"], vcdn["lease"]["end"],
                             [(r["name"], r["quality"]) for r in vcdn["regions"]],
                             {v["name"]: v for v in answer["health"]["vnfs"]},
                             [(v["name"], v["requests"], v["cpu_seconds"], v["read_at"])
                              for v in answer["metrics"]["vnfs"]], answer["traffic"]))
        return kept

    def with_records():
        """The same reads through the typed answers, as the clients build them."""
        kept = []
        vcdns = [v for page in pages for v in many(Instance, orjson.loads(page)["vcdns"])]
        for body in chunks:
            for vcdn, answer in zip(vcdns, many(Readings, orjson.loads(body)["readings"])):
                kept.append((vcdn.id, vcdn.flavor, vcdn.lease.end,
                             [(r.name, r.quality) for r in vcdn.regions],
                             {v.name: v for v in answer.health.vnfs},
                             [(v.name, v.requests, v.cpu_seconds, v.read_at)
                              for v in answer.metrics.vnfs], answer.traffic))
        return kept

    before, after = best(args.repeat, with_dicts), best(args.repeat, with_records)
    ratio = after / before
    gc.disable()  # what is left without the collections the allocations bring about
    bare = best(args.repeat, with_dicts), best(args.repeat, with_records)
    gc.enable()
    print(f"{args.vcdns} vCDNs: SO's brief list ({PAGE} a page) and RO's readings "
          f"({CHUNK} a request), decoded and read, best of {args.repeat}:")
    print(f"  dicts    {before:8.1f} ms/pass")
    print(f"  records  {after:8.1f} ms/pass   ({ratio:.2f}x; "
          f"{(after - before) / args.vcdns * 1000:+.1f} us per vCDN, "
          f"{(after - before) / (PERIOD_SECONDS * 1000):+.2%} of one CPU at a pass per "
          f"{PERIOD_SECONDS} s)")
    print(f"  without the garbage collector: dicts {bare[0]:.1f} ms, records {bare[1]:.1f} ms "
          f"({(bare[1] - bare[0]) / args.vcdns * 1000:+.1f} us per vCDN)")
    print(f"floor: records <= {args.floor:.2f}x dicts: {'ok' if ratio <= args.floor else 'FAILED'}")
    return 0 if ratio <= args.floor else 1


if __name__ == "__main__":
    sys.exit(main())
