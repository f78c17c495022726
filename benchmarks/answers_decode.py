"""What the typed answers add to the IM's hot pass: building the records of 10,000 vCDNs'
SO brief view and RO readings, against decoding their JSON, in the same run.

Each pass the IM reads ``GET /so/v1/instances?brief=true`` and ``POST /ro/v1/readings``
(chunks of :data:`cdnaas.im.reading.CHUNK`) for every vCDN it observes. The bodies here
have the shape the services answer (two regions, five VNFs, a balancer's traffic minute
per region); the benchmark times, best of ``--repeat``:

- **decode**: ``orjson.loads`` of the bodies (what :class:`cdnaas.common.http.JsonClient`
  does before any record is built);
- **build**: :func:`cdnaas.common.answers.from_json` of every decoded vCDN and reading
  (:meth:`cdnaas.common.clients.SoClient.instances`,
  :meth:`~cdnaas.common.clients.RoClient.readings_many`);
- **read**: the pass's reads of the fields, from the records and from the dicts.

It prints each in ms per pass, build over decode, and the build's share of one CPU over
the pass period (10 s); it fails when build exceeds ``--floor`` times decode.

    flock /tmp/cdnaas-bench.lock .venv/bin/python benchmarks/answers_decode.py
"""
import argparse
import sys
import time

import orjson

from cdnaas.common.answers import Instance, Readings, from_json

PERIOD_SECONDS = 10


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
    """The least wall time of ``repeat`` runs of ``work()``, in ms."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vcdns", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--floor", type=float, default=1.0,
                        help="build may take at most this many times decode")
    args = parser.parse_args()
    bodies = [orjson.dumps({"vcdns": [brief(i) for i in range(args.vcdns)], "next": None}),
              orjson.dumps({"readings": [reading(i) for i in range(args.vcdns)]})]
    instances, readings = (orjson.loads(b) for b in bodies)

    def build():
        return ([from_json(Instance, v) for v in instances["vcdns"]],
                [from_json(Readings, r) for r in readings["readings"]])
    built_instances, built_readings = build()

    def read_records():
        for vcdn, answer in zip(built_instances, built_readings):
            (vcdn.id, vcdn.flavor, vcdn.template_version, vcdn.lease.end,
             [(r.name, r.quality) for r in vcdn.regions],
             [(v.name, v.healthy) for v in answer.health.vnfs],
             [(v.name, v.requests, v.cpu_seconds, v.read_at) for v in answer.metrics.vnfs])

    def read_dicts():
        for vcdn, answer in zip(instances["vcdns"], readings["readings"]):
            (vcdn["id"], vcdn["flavor"], vcdn["template_version"], vcdn["lease"]["end"],
             [(r["name"], r["quality"]) for r in vcdn["regions"]],
             [(v["name"], v["healthy"]) for v in answer["health"]["vnfs"]],
             [(v["name"], v["requests"], v["cpu_seconds"], v["read_at"])
              for v in answer["metrics"]["vnfs"]])

    decode = best(args.repeat, lambda: [orjson.loads(b) for b in bodies])
    built = best(args.repeat, build)
    on_records = best(args.repeat, read_records)
    on_dicts = best(args.repeat, read_dicts)
    ratio = built / decode
    print(f"{args.vcdns} vCDNs (brief view + readings), best of {args.repeat}:")
    print(f"  decode  {decode:8.1f} ms/pass")
    print(f"  build   {built:8.1f} ms/pass   ({ratio:.2f}x decode; "
          f"{built / (PERIOD_SECONDS * 1000):.2%} of one CPU at a pass per {PERIOD_SECONDS} s)")
    print(f"  read    {on_records:8.1f} ms/pass from records, {on_dicts:.1f} from dicts")
    print(f"floor: build <= {args.floor:.2f}x decode: {'ok' if ratio <= args.floor else 'FAILED'}")
    return 0 if ratio <= args.floor else 1


if __name__ == "__main__":
    sys.exit(main())
