"""The IM pass shared by replicas: its cost per vCDN for 1,000 and 10,000 vCDNs with one
and two IM replicas, on the noop driver and one PostgreSQL, against a floor.

A throwaway PostgreSQL cluster (:mod:`tests.support.postgres`) holds every service's
tables. One replica of API, SO, SIDR and RO runs throughout; a few vCDNs (``--seed``)
are made through the API, the rest are their rows copied in bulk into SO's and RO's
tables with new ids, names and hosts (``--hosts`` hosts over three regions): the IM
reads them all through SO and RO as it reads any vCDN. Then, for each count, the IM
runs with one and with two replicas (their own processes, the periodic passes every
``--interval`` s) for ``--periods`` periods after a warm-up, and the benchmark prints:

- **wall per pass** and **wall per vCDN** (each replica's passes, their mean, from the
  IM's ``/metrics``), and whether every pass ended within its period;
- **CPU per vCDN**: all the IM replicas' CPU (``/proc``) over the vCDNs they observed,
  and SO's, RO's and PostgreSQL's beside it; each replica's CPU share;
- **observed each period**: the vCDNs with a point in every period (``im_samples``), and
  the periods any replica missed (``cdnaas_im_periods_missed_total``);
- **scaling when CPU is not shared**: one replica's CPU per pass over the busier of two
  replicas' (what two replicas on CPUs of their own would make of it: 2.0 at most), the
  CPU of each replica's process during its passes (``cdnaas_im_pass_cpu_seconds``) over
  the vCDNs they observed, so that passes longer than the window count whole;
- **the floor**: one process with no service of ours reading the same rows (the ACTIVE
  instances, their deployments, each vCDN's latest points) and writing the same number
  of points in bulk, its CPU and PostgreSQL's per vCDN.

    .venv/bin/python benchmarks/im_pass.py [--vcdns 1000,10000] [--periods 4] [--rounds 3]
"""
import argparse
import datetime
import json
import math
import os
import re
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
import requests
from psycopg.types.json import Json

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import proc  # noqa: E402
from cdnaas.im.shares import SHARES  # noqa: E402
from tests.support import postgres  # noqa: E402
from tests.support.stack import replicated_stack  # noqa: E402

REGIONS = ("eu", "us", "asia")
LEASE = {"end": "2099-01-01T00:00:00Z"}
#: a qoe-video flavor of one 1-vCPU VNF per role: readings, QoE estimate and policy run
#: for every vCDN, and no policy decision changes one (nothing to scale to)
TEMPLATE = {"flavor": "imbench", "version": 1, "plugin": "qoe-video", "technology": "container",
            "model": "models/container.yaml", "quality_targets": ["min_mos"],
            "description": "IM benchmark: one VNF per role and region",
            "vnfs": {role: {"image": "cdnaas-vnf", "instances": {"min": 1, "max": 1},
                            "vcpus": {"min": 1, "max": 1}, "ram_mb": {"min": 256, "max": 256},
                            "config_templates": []}
                     for role in ("cache", "load_balancer", "dns")}}
HOST = re.compile(r'"host": "([a-z]+-[0-9]+)"')
#: tables copied per vCDN, and the column holding its id
COPIED = (("so_instances", "id"), ("so_reservations", "instance_id"),
          ("so_operations", "instance_id"), ("ro_deployments", "id"))


def http(token=None):
    session = requests.Session()
    session.trust_env = False
    if token:
        session.headers["Authorization"] = f"Bearer {token}"
    return session


# -- filling the database -----------------------------------------------------------------------

def seed(stack, count, hosts):
    """Regions, ``hosts`` hosts, the template, a tenant and ``count`` vCDNs through the API;
    return their ids once ACTIVE."""
    api = f"{stack.urls['api']}/api/v1"
    operator = http(stack.operator_token)
    regions = [{"name": r, "client_prefixes": [f"10.{n}.0.0/16"], "default": n == 1}
               for n, r in enumerate(REGIONS, 1)]
    for body in regions:
        operator.post(f"{api}/regions", json=body, timeout=30).raise_for_status()
    for number in range(hosts):  # each region's first host is "<region>-0"
        region = REGIONS[number % len(REGIONS)]
        host = {"name": f"{region}-{number // len(REGIONS)}", "vcpus": 128, "ram_mb": 1 << 19}
        operator.post(f"{api}/regions/{region}/hosts", json=host,
                      timeout=30).raise_for_status()
    operator.post(f"{api}/templates", json=TEMPLATE, timeout=30).raise_for_status()
    operator.post(f"{api}/tenants", json={"name": "bench"}, timeout=30).raise_for_status()
    tenant = http(operator.post(f"{api}/tenants/bench/tokens", json={},
                                timeout=30).json()["token"])
    made = []
    for number in range(count):
        answer = tenant.post(f"{api}/vcdns", timeout=120, json={
            "name": f"seed{number}", "flavor": "imbench",
            "origin": "http://origin.example.com:8080", "lease": LEASE,
            "regions": [{"name": r, "demand": 10, "quality": {"min_mos": 3.6}}
                        for r in REGIONS]})
        answer.raise_for_status()
        made.append(answer.json()["vcdn"]["id"])
    for vcdn_id in made:
        while tenant.get(f"{api}/vcdns/{vcdn_id}", timeout=30).json()["state"] != "ACTIVE":
            time.sleep(0.2)
    return made


def fill(url, seeds, count):
    """Copy the seeds' rows until ``count`` vCDNs are ACTIVE: each copy a new id, name,
    hostname and noop resource ids, its VNFs moved to another host of their region."""
    with psycopg.connect(url) as conn:
        have = conn.execute("SELECT count(*) FROM so_instances WHERE state = 'ACTIVE'"
                            ).fetchone()[0]
        hosts = {}
        for name, region in conn.execute("SELECT name, region_name FROM so_hosts"):
            hosts.setdefault(region, []).append(name)
        rows = {}
        for table, column in COPIED:
            cursor = conn.execute(f"SELECT * FROM {table} WHERE {column} = ANY(%s)",  # noqa: S608
                                  [seeds])
            names = [d.name for d in cursor.description]
            rows[table] = (names, [dict(zip(names, row)) for row in cursor])
        copies = {table: [] for table, _ in COPIED}
        for number in range(have, count):
            source = seeds[number % len(seeds)]
            replace = {source: str(uuid.uuid4()),
                       f'"seed{seeds.index(source)}"': f'"v{number}"',
                       f"seed{seeds.index(source)}.": f"v{number}."}
            for table, column in COPIED:
                names, found = rows[table]
                for row in found:
                    if row[column] != source:
                        continue
                    copies[table].append([str(uuid.uuid4()) if n == "id" != column else
                                          _copied(row[n], replace, number, hosts)
                                          for n in _columns(table, column, rows)])
        for table, column in COPIED:
            names = _columns(table, column, rows)
            with conn.cursor() as cursor:
                cursor.executemany(
                    f"INSERT INTO {table} ({', '.join(names)}) "  # noqa: S608
                    f"VALUES ({', '.join(['%s'] * len(names))})", copies[table])
        conn.commit()


def _columns(table, column, rows):
    """The columns of ``table`` a copy sets: all but a serial ``id``."""
    names, found = rows[table]
    return [n for n in names if n != "id" or not isinstance(found[0]["id"], int)]


def _copied(value, replace, number, hosts):
    """``value`` of a seed's column for copy ``number``."""
    if isinstance(value, (dict, list)):
        text = json.dumps(value)
        for old, new in replace.items():
            text = text.replace(old, new)
        text = HOST.sub(lambda m: f'"host": "{_host(m[1], number, hosts)}"', text)
        text = text.replace('"noop-', f'"noop{number}-')
        return Json(json.loads(text))
    if isinstance(value, str):
        for old, new in replace.items():
            value = value.replace(old.strip('"'), new.strip('"'))
        if value.rpartition("-")[0] in hosts:  # a reservation's host
            value = _host(value, number, hosts)
    return value


def _host(name, number, hosts):
    """The host of copy ``number`` in place of the seed's ``name``: every host of the region
    in turn (none left empty, which the IM would switch off during the measurement)."""
    names = hosts[name.rpartition("-")[0]]
    return names[(number + names.index(name)) % len(names)]


# -- measuring ----------------------------------------------------------------------------------

class Postgres:
    """The throwaway cluster's CPU: its postmaster, live backends and reaped ones."""

    def __init__(self, cluster):
        self.pid = int((cluster.data / "postmaster.pid").read_text().split()[0])

    def cpu(self):
        total = proc.cpu_seconds(self.pid, children=True)
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and proc.parent(entry.name) == self.pid:
                total += proc.cpu_seconds(entry.name) or 0.0
        return total


def scrape(replica):
    """``{metric: value}`` of an IM replica's ``/metrics`` (the pass figures)."""
    found = {}
    answer = http().get(f"{replica.urls['im']}/metrics", timeout=30,
                        headers=replica.service_headers("metrics"))
    answer.raise_for_status()
    for line in answer.text.splitlines():
        if line.startswith("cdnaas_im_pass_") or line.startswith("cdnaas_im_periods_missed") \
                or line.startswith("cdnaas_im_shares_held"):
            name, _, value = line.rpartition(" ")
            found[name] = float(value)
    return found


def until_boundary(interval, margin=0.2):
    """Sleep to ``margin`` s before the next period's start; return that start."""
    start = (math.floor(time.time() / interval) + 1) * interval
    time.sleep(max(0.0, start - margin - time.time()))
    return start


def snapshot(pids, pg, replicas):
    return ({name: proc.cpu_seconds(pid) for name, pid in pids.items()}, pg.cpu(),
            [scrape(r) for r in replicas])


def measure(core, cluster, url, tmp, count, replicas, args):
    """Run ``replicas`` IMs for the warm-up and ``args.periods`` periods; their figures."""
    env = {"CDNAAS_IM_INTERVAL": str(args.interval), "CDNAAS_LOG_LEVEL": "WARNING",
           "CDNAAS_SERVICE_KEY_FILE": str(core.key_file)}
    for service in ("api", "so", "sidr", "ro"):
        env[f"CDNAAS_{service.upper()}_URL"] = core.urls[service]
    pg = Postgres(cluster)
    with replicated_stack(url, Path(tmp) / f"im-{count}-{replicas}", extra_env=env,
                          replicas=replicas, services=("im",), timeout=120) as im:
        pids = {f"im{n}": r.stack.processes["im"].pid for n, r in enumerate(im.replicas)}
        pids.update({service: core.replicas[0].stack.processes[service].pid
                     for service in ("so", "ro")})
        deadline = time.monotonic() + 120 + args.warmup * args.interval * 20
        settled = None  # passes of each replica once every share is held, by all of them
        while True:
            found = snapshot(pids, pg, im.replicas)[2]
            passes = [s.get("cdnaas_im_pass_seconds_count", 0) for s in found]
            held = [s.get("cdnaas_im_shares_held", 0) for s in found]
            if settled is None and min(held) > 0 and sum(held) == SHARES:
                settled = passes
            if settled and min(p - s for p, s in zip(passes, settled)) >= args.warmup:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"no warm-up: {found}")
            time.sleep(args.interval)  # a scrape makes every vCDN's gauges: not too often
        start = until_boundary(args.interval)
        before = snapshot(pids, pg, im.replicas)
        time.sleep(max(0.0, start + args.periods * args.interval - 0.2 - time.time()))
        after = snapshot(pids, pg, im.replicas)
    with psycopg.connect(url.replace("+psycopg", "")) as conn:
        per_period = [n for (n,) in conn.execute(
            "SELECT count(DISTINCT vcdn_id) FROM im_samples WHERE scope = 'vcdn' "
            "AND at >= to_timestamp(%s) AND at < to_timestamp(%s) "
            "GROUP BY floor(extract(epoch FROM at) / %s) ORDER BY min(at)",
            [start, start + args.periods * args.interval, args.interval])]
        points = conn.execute("SELECT count(*) FROM im_samples WHERE at >= to_timestamp(%s) "
                              "AND at < to_timestamp(%s) AND scope <> 'host'",
                              [start, start + args.periods * args.interval]).fetchone()[0]
    found = {"per period": per_period, "points per vCDN": points / max(1, sum(per_period)),
             "postgres": after[1] - before[1]}
    for name in pids:
        found[name] = after[0][name] - before[0][name]
    found["replicas"] = []
    for one, two in zip(before[2], after[2]):
        passes = two["cdnaas_im_pass_seconds_count"] - one["cdnaas_im_pass_seconds_count"]
        found["replicas"].append({
            "passes": passes, "vcdns": two["cdnaas_im_pass_vcdns_total"]
            - one["cdnaas_im_pass_vcdns_total"],
            "wall": (two["cdnaas_im_pass_seconds_sum"] - one["cdnaas_im_pass_seconds_sum"])
            / max(1, passes),
            "cpu": two["cdnaas_im_pass_cpu_seconds_total"]
            - one["cdnaas_im_pass_cpu_seconds_total"],
            "missed": two["cdnaas_im_periods_missed_total"]
            - one["cdnaas_im_periods_missed_total"]})
    # observations of the passes that ended in the window (a pass longer than the period
    # may start before it)
    found["observed"] = sum(r["vcdns"] for r in found["replicas"])
    print(f"measured {count} vCDNs, {replicas} IM replica(s): {found}", flush=True)
    return found


def floor(url, pg, passes=3):
    """CPU per vCDN (this process's and PostgreSQL's) of a minimal pass without us: the
    ACTIVE instances and their deployment records read, each vCDN's latest points and
    cursor read, the same number of points written (a temporary table like the IM's) and
    a usage row per vCDN region upserted. Medians of ``passes``."""
    results = []
    with psycopg.connect(url.replace("+psycopg", "")) as conn:
        conn.execute("CREATE TEMP TABLE floor_samples (LIKE im_samples INCLUDING ALL)")
        conn.execute("CREATE TEMP TABLE floor_usage (LIKE im_usage INCLUDING ALL)")
        for number in range(passes):
            began, pg_began = time.process_time(), pg.cpu()
            vcdns = conn.execute("SELECT id, regions, sig FROM so_instances "
                                 "WHERE state = 'ACTIVE'").fetchall()
            ids = [v[0] for v in vcdns]
            deployments = dict(conn.execute(
                "SELECT id, deployment FROM ro_deployments WHERE id = ANY(%s) "
                "AND status = 'ACTIVE'", [ids]).fetchall())
            latest = conn.execute(
                "SELECT s.* FROM im_samples s JOIN (SELECT vcdn_id, max(at) AS at FROM "
                "im_samples WHERE vcdn_id = ANY(%s) AND scope = 'vcdn' GROUP BY vcdn_id) l "
                "ON s.vcdn_id = l.vcdn_id AND s.at = l.at", [ids]).fetchall()
            conn.execute("SELECT vcdn_id, cursor FROM im_usage_cursors WHERE vcdn_id = ANY(%s)",
                         [ids]).fetchall()
            at = dt_now(number)
            with conn.cursor() as cursor:
                with cursor.copy("COPY floor_samples (at, scope, vcdn_id, key, cpu, vcpus) "
                                 "FROM STDIN") as copy:
                    for vcdn_id, _regions, _sig in vcdns:
                        for vnf in deployments[vcdn_id]["vnfs"]:
                            copy.write_row((at, "vnf", vcdn_id, vnf["name"], 0.0, vnf["vcpus"]))
                        for region in REGIONS:
                            copy.write_row((at, "region", vcdn_id, region, 0.0, 3))
                        copy.write_row((at, "vcdn", vcdn_id, "", 0.0, 9))
                cursor.executemany(
                    "INSERT INTO floor_usage (vcdn_id, region, minute, vcpu_seconds) "
                    "VALUES (%s, %s, %s, 30) ON CONFLICT (vcdn_id, region, minute) DO UPDATE "
                    "SET vcpu_seconds = floor_usage.vcpu_seconds + excluded.vcpu_seconds",
                    [(v[0], r, at) for v in vcdns for r in REGIONS])
            conn.commit()
            results.append({"script": (time.process_time() - began) / len(ids),
                            "postgres": (pg.cpu() - pg_began) / len(ids),
                            "points": len(latest)})
    return {key: sorted(r[key] for r in results)[len(results) // 2]
            for key in ("script", "postgres")}


def dt_now(number):
    """A minute for the floor's pass ``number`` (its rows: one minute per pass)."""
    return datetime.datetime.fromtimestamp(60 * (number + 1), datetime.timezone.utc)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vcdns", default="1000,10000", help="counts, comma-separated")
    parser.add_argument("--replicas", default="1,2", help="IM replicas, comma-separated")
    parser.add_argument("--periods", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=2, help="passes of each replica, once "
                        "the shares are settled, before measuring")
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--hosts", type=int, default=300)
    parser.add_argument("--seed", type=int, default=6, help="vCDNs made through the API")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each replica count, "
                        "taking turns (the table shows the last; the scaling of every round "
                        "and their median follow it)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))  # clusters stopped
    env = {"CDNAAS_LOG_LEVEL": "WARNING", "CDNAAS_IM_INTERVAL": "86400"}
    runs, floors, rounds = {}, {}, {}
    with postgres.cluster() as cluster, postgres.fresh_database(cluster.url) as url, \
            tempfile.TemporaryDirectory(prefix="cdnaas-im-pass-") as tmp:
        with replicated_stack(url, Path(tmp) / "core", extra_env=env, replicas=1,
                              services=("api", "so", "sidr", "ro"), timeout=120) as core:
            seeds = seed(core, args.seed, args.hosts)
            print(f"seeded: {args.hosts} hosts, {len(seeds)} vCDNs through the API", flush=True)
            for count in (int(c) for c in args.vcdns.split(",")):
                fill(url.replace("+psycopg", ""), seeds, count)
                print(f"filled: {count} vCDNs", flush=True)
                for _round in range(args.rounds):
                    for replicas in (int(r) for r in args.replicas.split(",")):
                        runs[(count, replicas)] = measure(core, cluster, url, tmp, count,
                                                          replicas, args)
                        rounds.setdefault(count, []).append((replicas, runs[(count, replicas)]))
                floors[count] = floor(url, Postgres(cluster))
                print(f"floor at {count} vCDNs: {floors[count]}", flush=True)
    report(runs, floors, args)
    report_rounds(rounds)


def report(runs, floors, args):
    print(f"\nIM pass, noop driver, one PostgreSQL, {args.hosts} hosts, 3 regions per vCDN, "
          f"period {args.interval:.0f} s, {args.periods} periods measured per column "
          f"(os.cpu_count() = {os.cpu_count()})")
    names = [f"{count} x{replicas}" for count, replicas in runs]
    print(f"{'vCDNs x IM replicas':34}" + "".join(f"{n:>14}" for n in names))

    def row(label, values):
        print(f"{label:34}" + "".join(f"{v:>14}" for v in values))
    figures = list(runs.values())
    row("pass wall, mean (s)", ["/".join(f"{r['wall']:.2f}" for r in f["replicas"])
                                for f in figures])
    row("pass wall per vCDN (ms)", [
        f"{max(r['wall'] for r in f['replicas']) / (count / replicas) * 1000:.2f}"
        for (count, replicas), f in runs.items()])
    row("periods missed", [f"{sum(r['missed'] for r in f['replicas']):.0f}" for f in figures])
    row("observed every period", [
        "yes" if len(f["per period"]) == args.periods and min(f["per period"]) >= count
        else f"no: {len(f['per period'])} of {args.periods}" if len(f["per period"]) < args.periods
        else f"no: {min(f['per period'])}/{count}" for (count, _r), f in runs.items()])
    row("IM CPU per vCDN (ms)", [f"{_im(f) / f['observed'] * 1000:.2f}" for f in figures])
    row("  per replica, per period (s)", [
        "/".join(f"{f[f'im{n}'] / args.periods:.1f}" for n in range(replicas))
        for (_c, replicas), f in runs.items()])
    row("  per replica, its passes' (ms)", [
        "/".join(f"{r['cpu'] / max(1, r['vcdns']) * 1000:.2f}" for r in f["replicas"])
        for f in figures])
    for service in ("ro", "so", "postgres"):
        row(f"{service} CPU per vCDN (ms)", [f"{f[service] / f['observed'] * 1000:.2f}"
                                             for f in figures])
    row("all CPU per vCDN (ms)", [f"{_all(f) / f['observed'] * 1000:.2f}" for f in figures])
    row("floor CPU per vCDN (ms)", [
        f"{(floors[c]['script'] + floors[c]['postgres']) * 1000:.2f}" for c, _r in runs])
    row("ours / floor", [f"{_all(f) / f['observed'] / (floors[c]['script'] + floors[c]['postgres']):.1f}"
                         for (c, _r), f in runs.items()])
    for count in sorted({c for c, _r in runs}):
        if (count, 1) in runs and (count, 2) in runs:
            scaling = _scaling(count, runs[(count, 1)], runs[(count, 2)])
            print(f"{count} vCDNs: two replicas on CPUs of their own would observe "
                  f"{scaling:.2f}x the vCDNs one does per second of its CPU (the CPU of "
                  f"a pass over half of them on the busier replica against a pass over all "
                  f"on one, from the passes ended in the window)")


def _scaling(count, one, two):
    """What two replicas on CPUs of their own would observe against one: one replica's
    pass CPU over all the vCDNs against the busier of two over half of them."""
    [alone], pair = one["replicas"], two["replicas"]
    busier = max(r["cpu"] / r["vcdns"] * count / 2 for r in pair)
    return alone["cpu"] / alone["vcdns"] * count / busier


def report_rounds(rounds):
    """Each round's pass CPU per vCDN of one and of two replicas and the scaling from it
    (a round: one replica's run and the two replicas' run after it), and the median."""
    for count, measured in rounds.items():
        pairs = [(one, two) for (n, one), (m, two) in zip(measured, measured[1:])
                 if (n, m) == (1, 2)]
        if len(pairs) < 2:
            continue
        figures = [_scaling(count, one, two) for one, two in pairs]
        for number, ((one, two), scaling) in enumerate(zip(pairs, figures), 1):
            cpu = ["/".join(f"{r['cpu'] / max(1, r['vcdns']) * 1000:.2f}"
                            for r in found["replicas"]) for found in (one, two)]
            print(f"{count} vCDNs, round {number}: pass CPU per vCDN one replica {cpu[0]} ms, "
                  f"two {cpu[1]} ms: {scaling:.2f}x")
        print(f"{count} vCDNs: two replicas on CPUs of their own, median of {len(figures)} "
              f"rounds: {sorted(figures)[len(figures) // 2]:.2f}x")


def _im(found):
    return sum(v for k, v in found.items() if k.startswith("im"))


def _all(found):
    return _im(found) + found["ro"] + found["so"] + found["postgres"]


if __name__ == "__main__":
    main()
