"""Resident memory of each service with 10,000 vCDNs and 1,000 hosts in its database
(the noop driver, one throwaway PostgreSQL), after a pass of typical requests.

The database is filled fast: the regions, hosts, tenants and ``--templates`` vCDNs go
through the API (so every row is as a service writes it), then SQL copies those vCDNs
in bulk (their SO instance, reservations and operations, their RO deployment; ids and
names made unique, reservations spread over each region's hosts) up to ``--vcdns``.
The pass then asks what customers and the IM ask: GET a vCDN, list a tenant's vCDNs,
GET an operation, quotes, a vCDN created and deleted, and one IM pass over every vCDN.
Printed: each service's resident set (VmRSS from /proc, its process and children) once
started, after the fill and after the pass, and its peak (VmHWM).

    .venv/bin/python benchmarks/memory.py [--vcdns 10000] [--hosts 1000]
"""
import argparse
import concurrent.futures
import sys
import tempfile
import time
from pathlib import Path

import requests
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import control_plane  # noqa: E402
from benchmarks import proc  # noqa: E402
from cdnaas.cli.stack import read_pid_file  # noqa: E402
from cdnaas.db.engine import Database  # noqa: E402
from tests.support import postgres  # noqa: E402
from tests.support.stack import running_stack  # noqa: E402

HOST_VCPUS = 128
TENANTS = 10
request_body, session = control_plane.request_body, control_plane.session

REGIONS = (*control_plane.REGIONS, "africa")  # control_plane's vCDNs ask for the first three


def wait(http, api, operation_id, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        operation = http.get(f"{api}/operations/{operation_id}", timeout=30).json()
        if operation["state"] not in ("PENDING", "PROCESSING"):
            return operation
        time.sleep(0.1)
    raise SystemExit(f"operation {operation_id} did not end within {timeout} s")


# -- filling the database -----------------------------------------------------------------------

def fill_api(stack, hosts, templates):
    """Regions, ``hosts`` hosts, the flavor, tenants and ``templates`` vCDNs through the
    API; return ``({tenant token: [vcdn ids]}, [template vCDN names])``."""
    api = f"{stack.urls['api']}/api/v1"
    operator = session(stack.operator_token)
    per_region = hosts // len(REGIONS)
    for index, region in enumerate(REGIONS):
        operator.post(f"{api}/regions", timeout=30, json={
            "name": region, "client_prefixes": [f"10.{index + 1}.0.0/16"],
            "default": index == 0}).raise_for_status()

    def add_host(number):
        region = REGIONS[number // per_region]
        session(stack.operator_token).post(
            f"{api}/regions/{region}/hosts", timeout=60,
            json={"name": f"{region}-{number % per_region}", "vcpus": HOST_VCPUS,
                  "ram_mb": HOST_VCPUS * 4096}).raise_for_status()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(add_host, range(per_region * len(REGIONS))))
    operator.post(f"{api}/templates", json=control_plane.TEMPLATE, timeout=30).raise_for_status()

    def tenant_token(index):
        """A token of tenant ``tenant-<index>``, made first."""
        name = f"tenant-{index}"
        operator.post(f"{api}/tenants", json={"name": name}, timeout=30).raise_for_status()
        return operator.post(f"{api}/tenants/{name}/tokens", json={}, timeout=30).json()["token"]
    tokens = [tenant_token(index) for index in range(TENANTS)]
    names = [f"t{k}z" for k in range(templates)]
    for name in names:
        http = session(tokens[int(name[1:-1]) % TENANTS])
        accepted = http.post(f"{api}/vcdns", json=request_body(name), timeout=60)
        accepted.raise_for_status()
        if wait(http, api, accepted.json()["operation"]["id"])["state"] != "COMPLETED":
            raise SystemExit(f"template vCDN {name} failed")
    return tokens, names, per_region


def fill_sql(database, count, names, per_region):
    """Copy the vCDNs ``names`` in SQL up to ``count`` vCDNs; copy ``g`` is of template
    ``g % len(names)``, with ids ending in ``g`` (hex) and names ending in ``g``."""
    copies = count - len(names)
    new_id = "left({0}, 24) || lpad(to_hex(g), 12, '0')"
    # JSON columns: the template's id and name replaced by the copy's
    def json(column):
        return (f"replace(replace(s.{column}::text, t.id, {new_id.format('t.id')}), "
                f"t.name, t.name || g)::json")
    host = (f"regexp_replace(s.host_name, '[0-9]+$', ((substring(s.host_name from '[0-9]+$')"
            f"::int + g) % {per_region})::text)")
    with database.engine.begin() as connection:
        columns = {table: [row[0] for row in connection.execute(text(
            "SELECT column_name FROM information_schema.columns WHERE table_name = :t "
            "ORDER BY ordinal_position"), {"t": table})]
            for table in ("so_instances", "so_operations", "so_reservations", "ro_deployments")}
        special = {
            "so_instances": ({"id": new_id.format("s.id"), "name": "s.name || g"}, "s.id"),
            "so_operations": ({"id": new_id.format("s.id"),
                               "instance_id": new_id.format("s.instance_id")}, "s.instance_id"),
            "so_reservations": ({"instance_id": new_id.format("s.instance_id"),
                                 "host_name": host}, "s.instance_id"),
            "ro_deployments": ({"id": new_id.format("s.id")}, "s.id")}
        json_columns = {"sig", "entry_point", "region_endpoints", "service", "steps",
                        "previous_sig", "request", "deployment"}
        for table, (exprs, key) in special.items():
            names_in = [c for c in columns[table] if not (table == "so_reservations"
                                                           and c == "id")]
            select = ", ".join(exprs.get(c) or (json(c) if c in json_columns else f"s.{c}")
                               for c in names_in)
            connection.execute(text(
                f"WITH t AS (SELECT id, name, (row_number() OVER (ORDER BY name)) - 1 AS k "
                f"FROM so_instances WHERE name = ANY(:names)) "
                f"INSERT INTO {table} ({', '.join(names_in)}) SELECT {select} "
                f"FROM {table} s JOIN t ON {key} = t.id "
                f"JOIN generate_series(1, :copies) g ON g % :templates = t.k"),
                {"names": names, "copies": copies, "templates": len(names)})
        connection.execute(text("ANALYZE"))
        found = connection.execute(text("SELECT count(*) FROM so_instances")).scalar()
    return found


# -- the pass -----------------------------------------------------------------------------------

def typical_pass(stack, tokens, database):
    """What customers and the IM ask of a stack, a little of each; return the seconds
    of each kind."""
    api = f"{stack.urls['api']}/api/v1"
    with database.engine.connect() as connection:
        owned = {}
        for vcdn_id, tenant in connection.execute(text(
                "SELECT id, tenant FROM so_instances ORDER BY random() LIMIT 400")):
            owned.setdefault(tenant, []).append(vcdn_id)
        operations = [row[0] for row in connection.execute(text(
            "SELECT id FROM so_operations ORDER BY random() LIMIT 100"))]
    by_tenant = {f"tenant-{index}": token for index, token in enumerate(tokens)}
    operator = session(stack.operator_token)
    times = {}

    def timed(kind, action):
        began = time.perf_counter()
        action()
        times[kind] = time.perf_counter() - began

    def gets():
        for tenant, ids in owned.items():
            http = session(by_tenant[tenant])
            for vcdn_id in ids:
                http.get(f"{api}/vcdns/{vcdn_id}", timeout=60).raise_for_status()

    def lists():
        for token in tokens * 5:
            session(token).get(f"{api}/vcdns", timeout=60).raise_for_status()

    def operation_views():
        for operation_id in operations:
            operator.get(f"{api}/operations/{operation_id}", timeout=60)

    def quotes():
        http = session(tokens[0])
        for _ in range(20):
            http.post(f"{api}/quotes", json=request_body("quote"), timeout=60).raise_for_status()

    def create_delete():  # by the operator: the tenants own more vCDNs than their quota
        http = operator
        for number in range(5):
            accepted = http.post(f"{api}/vcdns", json=request_body(f"pass{number}"), timeout=60)
            accepted.raise_for_status()
            wait(http, api, accepted.json()["operation"]["id"])
            deleted = http.delete(f"{api}/vcdns/{accepted.json()['vcdn']['id']}", timeout=60)
            wait(http, api, deleted.json()["operation"]["id"])

    def im_pass():
        requests.post(f"{stack.urls['im']}/im/v1/reconcile", timeout=1800,
                      headers=stack.service_headers("benchmark")).raise_for_status()
    timed("400 GET /vcdns/{id}", gets)
    timed("50 GET /vcdns", lists)
    timed("100 GET /operations/{id}", operation_views)
    timed("20 quotes", quotes)
    timed("5 vCDNs created and deleted", create_delete)
    timed("1 IM pass", im_pass)
    return times


# -- memory -------------------------------------------------------------------------------------

def _tree(pid):
    """``pid`` and its descendants."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").iterdir():
            children = (task / "children").read_text().split()
            todo += [int(child) for child in children]
    return found


def memory(stack):
    """``{service: (RSS bytes, peak RSS bytes)}`` of the stack's processes (and children)."""
    found = {}
    for service, recorded in read_pid_file(stack.state_dir)["services"].items():
        tree = _tree(recorded["pid"])
        found[service] = (sum(proc.memory_bytes(p) for p in tree),
                          sum(proc.memory_bytes(p, "VmHWM") for p in tree))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vcdns", type=int, default=10000)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--templates", type=int, default=20,
                        help="vCDNs created through the API, then copied in SQL")
    args = parser.parse_args()
    env = {"CDNAAS_IM_INTERVAL": "86400", "CDNAAS_LOG_LEVEL": "WARNING",
           "CDNAAS_DEPLOY_TIMEOUT": "600"}
    with postgres.server() as admin, postgres.fresh_database(admin) as url, \
            tempfile.TemporaryDirectory(prefix="cdnaas-memory-") as tmp:
        database = Database(url)
        with running_stack(url, tmp, extra_env=env, timeout=120) as stack:
            started = memory(stack)
            began = time.perf_counter()
            tokens, names, per_region = fill_api(stack, args.hosts, args.templates)
            through_api = time.perf_counter() - began
            count = fill_sql(database, args.vcdns, names, per_region)
            print(f"filled: {args.hosts} hosts and {len(names)} vCDNs through the API in "
                  f"{through_api:.0f} s, {count} vCDNs in all after SQL copies in "
                  f"{time.perf_counter() - began - through_api:.1f} s", flush=True)
            filled = memory(stack)
            times = typical_pass(stack, tokens, database)
            print("the pass: " + ", ".join(f"{kind} {seconds:.1f} s"
                                           for kind, seconds in times.items()))
            after = memory(stack)
        database.dispose()
    mib = 1024 * 1024
    print(f"{'service':8} {'started':>9} {'filled':>9} {'after pass':>11} {'peak':>9}  (MiB)")
    for service in after:
        print(f"{service:8} {started[service][0] / mib:9.1f} {filled[service][0] / mib:9.1f} "
              f"{after[service][0] / mib:11.1f} {after[service][1] / mib:9.1f}")
    print(f"{'all':8} {sum(v[0] for v in started.values()) / mib:9.1f} "
          f"{sum(v[0] for v in filled.values()) / mib:9.1f} "
          f"{sum(v[0] for v in after.values()) / mib:11.1f}")


if __name__ == "__main__":
    main()
