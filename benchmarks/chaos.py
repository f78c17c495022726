"""Chaos soak on the local driver: viewers fetch cached objects through the balancers of
two vCDNs while API operations run and faults strike the services, the VNFs' processes
and (on PostgreSQL) the database; then the invariants are checked.

The five services of the embedded default (one SQLite file each; ``--postgres``: one
database of a throwaway PostgreSQL cluster), started as an operator starts them
(``cdnaas up --detach``) on the local driver, the IM every ``--im-interval`` s. Two
vCDNs (A and B) of the qoe-video flavor in eu-west and us-east, their ``--segments``
video segments (73 KB) prefetched. For ``--minutes``:

- **viewers** (``--viewers``, split over 2 vCDNs x 2 regions, each group from a client
  namespace of its region: :class:`keepalive_viewers.Load`): each keeps an HTTP/1.1
  connection to its region's balancer and asks for the next segment every
  ``--interval`` s;
- **operations**, one every ``--operation-every`` s (0.5-1.5 times it): the demand of a
  region of A or B up or down (a cache added or removed), a purge of A's or B's segments,
  a third vCDN (C) created or deleted; each followed to its end;
- **faults**, one every ``--fault-every`` s (:mod:`chaos_faults`): ``kill -9`` of a
  service then ``cdnaas up --detach``, ``kill -9`` of a cache's master or worker, a
  balancer's master or a dnsmasq of A or B, and on PostgreSQL a database restart.

Then the viewers stop, operations still running get ``--settle`` s to end, the ledger
(:func:`tests.support.ledger.assert_ledger`: SO's reservations = RO's VNFs = what runs)
is checked once no operation runs, every vCDN is deleted and what is left of the stack's
RO is listed (leaks). It prints the viewers' requests and errors (each with the fault
before it, the time since and what was changing then: the stream's operations, the IM's
heals and scales), the operations by final state, the faults with their heal times
(fault to healthy again: RO's health, the services' answers; the IM's heal decision),
the VNFs' error logs, the ledger, the leaks and this machine's load. The stack, its
VNFs, the client namespaces and the PostgreSQL cluster are removed at the end, on Ctrl-C
too (``--keep FOLDER`` keeps the services' logs there).

    .venv/bin/python benchmarks/chaos.py [--minutes 10] [--viewers 320] [--interval 1]
        [--fault-every 30] [--postgres] [--keep FOLDER]
"""
import argparse
import bisect
import collections
import contextlib
import dataclasses
import datetime as dt
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.chaos_faults import Faults, run_faults  # noqa: E402
from benchmarks.chaos_operations import DEMANDS, Operations, body, run_operations  # noqa: E402
from benchmarks.keepalive_viewers import Load  # noqa: E402
from benchmarks.key_rotation import vnf_errors  # noqa: E402
from cdnaas.api.tokens import bootstrap_token  # noqa: E402
from cdnaas.calibration.viewers import raise_file_limit  # noqa: E402
from cdnaas.cli import stack as stacks  # noqa: E402
from cdnaas.common import errors, timeutil  # noqa: E402
from cdnaas.common.clients import RoClient  # noqa: E402
from cdnaas.db.engine import Database  # noqa: E402
from cdnaas.origin.server import serve_in_thread  # noqa: E402
from cdnaas.ro.vim.local import clients, network  # noqa: E402
from cdnaas.so import states  # noqa: E402
from tests.support import ledger, postgres  # noqa: E402
from tests.support.api import Api  # noqa: E402

#: ``(name, client prefix, default)`` of the regions; viewers of region k come from 10.k.0.x
REGIONS = (("eu-west", "10.1.0.0/16", True), ("us-east", "10.2.0.0/16", False))
TEMPLATE = Path(__file__).resolve().parents[1] / "plugins/qoe_video/template.yaml"
SEGMENT = "/video/low/seg-{n}.m4s"


@dataclasses.dataclass
class Params:
    """What a soak does; times in seconds."""

    seconds: float = 600.0
    viewers: int = 320
    interval: float = 1.0          # between a viewer's requests
    operation_every: float = 10.0
    fault_every: float = 30.0
    postgres: bool = False
    segments: int = 30
    im_interval: float = 3.0
    drain: float = 10.0            # CDNAAS_LOCAL_DRAIN_SECONDS
    heal_limit: int = 1000         # CDNAAS_IM_HEAL_LIMIT: every fault is healed
    heal_bound: float = 120.0      # a fault not healed by then is reported so
    settle: float = 180.0          # for operations to end, the ledger and the deletions
    seed: int = None


@dataclasses.dataclass
class ChaosStack:
    """The detached stack: its environment, state dir and service URLs, and (once it runs)
    the operator's :class:`Api`, SO's database and an RO client, as the ledger needs."""

    env: dict
    state_dir: Path
    urls: dict
    api: Api = None
    so_db: Database = None
    ro: RoClient = None

    def up(self):
        """``cdnaas up --detach``: start the services that are down; None, or what failed."""
        try:
            done = subprocess.run(stacks.cli_command("up", "--detach", "--timeout", "120"),
                                  env=self.env, capture_output=True, text=True, timeout=180,
                                  check=False)
        except subprocess.TimeoutExpired:
            return "cdnaas up --detach did not return within 180 s"
        if done.returncode:
            return f"cdnaas up --detach failed ({done.returncode}): {done.stderr[-600:]}"
        return None

    def vnf_root(self, vcdn_id):
        """The local driver's folder of ``vcdn_id``'s VNFs."""
        return self.state_dir / "local" / ledger.owner(self) / vcdn_id


@contextlib.contextmanager
def detached_stack(state_dir, database_url, params):
    """The five services on the local driver with ``cdnaas up --detach`` (``database_url``:
    None for the embedded SQLite files); yield a :class:`ChaosStack`; then stop every
    process the stack's pid file names and remove every VNF of its RO."""
    overlay = stacks.free_port_env(state_dir)
    overlay.update({
        "CDNAAS_DATABASE_URL": database_url, "CDNAAS_VIM_DRIVER": "local",
        "CDNAAS_IM_INTERVAL": str(params.im_interval),
        "CDNAAS_IM_HEAL_LIMIT": str(params.heal_limit),
        "CDNAAS_LOCAL_DRAIN_SECONDS": str(params.drain),
        "CDNAAS_ORIGIN_ALLOW": "127.0.0.1", "CDNAAS_LOG_LEVEL": "INFO",
        "CDNAAS_CONFIG": str(state_dir / "cli-config.yaml"), "CDNAAS_TOKEN": None,
        # the stack makes its own keys in its state dir
        "CDNAAS_SERVICE_KEY_FILE": None, "CDNAAS_SECRET_KEY_FILE": None,
        "CDNAAS_WEBHOOK_KEY_FILE": None})
    env = stacks.child_environment(overlay)
    stack = ChaosStack(env, Path(state_dir), stacks.urls_of(env))
    try:
        failed = stack.up()
        if failed:
            raise RuntimeError(f"the stack did not start: {failed}")
        database = Database(stacks.database_url_of(env, "api"))
        try:
            stack.api = Api(stack.urls["api"], bootstrap_token(database, "admin"))
        finally:
            database.dispose()
        stack.so_db = Database(stacks.database_url_of(env, "so"))
        stack.ro = RoClient(base_url=stack.urls["ro"], key_file=stack.state_dir / "service.key",
                            timeout=10)
        yield stack
    finally:
        if stack.so_db is not None:
            stack.so_db.dispose()
        stacks.stop_recorded(state_dir)
        subprocess.run(stacks.cli_command("local", "cleanup", "--all"), env=env,
                       capture_output=True, timeout=300, check=False)


def catalogue(api):
    """The regions, two hosts of 16 vCPUs in each, and the qoe-video flavor."""
    for name, prefix, default in REGIONS:
        api.ok("POST", "/regions", 201, json={"name": name, "client_prefixes": [prefix],
                                              "default": default})
        for number in (1, 2):
            api.ok("POST", f"/regions/{name}/hosts", 201, json={
                "name": f"{name}-{number}", "vcpus": 16, "ram_mb": 65536})
    api.ok("POST", "/templates", 201, data=TEMPLATE.read_bytes(),
           headers={"Content-Type": "application/yaml"})


def created(api, bodies, bound):
    """Create the vCDNs of ``bodies`` (``{label: body}``) at once; their views once ACTIVE."""
    accepted = {label: api.ok("POST", "/vcdns", 202, json=b) for label, b in bodies.items()}
    for label, answer in accepted.items():
        operation = api.wait(answer["operation"]["id"], bound)
        assert operation["state"] == "COMPLETED", (label, operation)
    return {label: api.ok("GET", f"/vcdns/{answer['vcdn']['id']}")
            for label, answer in accepted.items()}


# -- viewers --------------------------------------------------------------------------------

@contextlib.contextmanager
def viewers(vcdns, params):
    """Start ``params.viewers`` viewers split over every region of ``vcdns`` (``{label:
    view}``), each group in a client namespace of its region; yield ``{group: Load}``
    (group: ``"A eu-west"``); stop them and remove the namespaces."""
    prefixes = {name: index + 1 for index, (name, _prefix, _default) in enumerate(REGIONS)}
    groups = [(label, vcdn, region) for label, vcdn in sorted(vcdns.items())
              for region in vcdn["regions"]]
    paths = [SEGMENT.format(n=n + 1) for n in range(params.segments)]
    loads, threads = {}, []
    with contextlib.ExitStack() as hosts:
        for index, (label, vcdn, region) in enumerate(groups):
            count = params.viewers // len(groups) + (index < params.viewers % len(groups))
            host = hosts.enter_context(clients.client(
                vcdn["id"], region["name"], f"10.{prefixes[region['name']]}.0.{40 + index}"))
            load = Load(host.namespace, region["load_balancer"],
                        vcdn["entry_point"]["hostname"], paths, count, params.interval,
                        seconds=params.seconds + 60)
            loads[f"{label} {region['name']}"] = load
            threads.append(threading.Thread(target=load.run, name=f"viewers {label}",
                                            daemon=True))
            threads[-1].start()
        try:
            yield loads
        finally:
            for load in loads.values():
                load.stop()
            for thread in threads:
                thread.join(30)


# -- after the soak -------------------------------------------------------------------------

def vcdn_ids(api):
    """Ids of the vCDNs the API lists, or None while it does not answer."""
    try:
        answer = api.call("GET", "/vcdns")
    except requests.RequestException:
        return None
    return [v["id"] for v in answer.json()["vcdns"]] if answer.status_code == 200 else None


def quiet(api):
    """Whether no operation of any vCDN is open (the IM's heals and scales included)."""
    ids = vcdn_ids(api)
    if ids is None:
        return False
    try:
        for vcdn_id in ids:
            answer = api.call("GET", f"/vcdns/{vcdn_id}/operations")
            if answer.status_code != 200 or any(o["state"] in states.OPEN
                                                for o in answer.json()["operations"]):
                return False
    except requests.RequestException:
        return False
    return True


def im_changes(api, vcdns):
    """``[(wall time, what)]`` of the changes the IM started on ``vcdns`` (``{label: id}``):
    heals and scales, which run beside the operations of the stream."""
    found = []
    for label, vcdn_id in vcdns.items():
        for kind in ("heal", "scale_out", "scale_in"):
            with contextlib.suppress(requests.RequestException, ValueError, KeyError):
                for decision in api.call("GET", f"/vcdns/{vcdn_id}/decisions",
                                         params={"kind": kind}).json()["decisions"]:
                    if decision["outcome"] == "started":
                        found.append((timeutil.parse(decision["created_at"]),
                                      f"IM {kind} {label} {decision['region']}"))
    return sorted(found)


def checked_ledger(stack, bound):
    """``(None, looks)`` once the ledger holds while no operation runs, within ``bound`` s;
    else ``(why not, looks)``. The IM may start a heal or a scale at any time, so a look
    that finds the ledger broken is repeated a few seconds later."""
    deadline, problem, looks = time.monotonic() + bound, "never quiet", 0
    while True:
        if quiet(stack.api):
            looks += 1
            try:
                ledger.assert_ledger(stack)
                return None, looks
            except (AssertionError, errors.CdnaasError) as exc:
                problem = f"{type(exc).__name__}: {exc}"[:2000]
        if time.monotonic() >= deadline:
            return problem, looks
        time.sleep(2)


def deleted_all(stack, bound):
    """Delete every vCDN (again while one is busy), within ``bound`` s; return the leaks:
    ``{kind: [names]}`` of what is left of the stack's RO (and of client namespaces on
    its vCDNs' bridges)."""
    deadline, seen = time.monotonic() + bound, set()
    while time.monotonic() < deadline:
        ids = vcdn_ids(stack.api)
        if ids == []:
            break
        seen.update(ids or ())
        for vcdn_id in ids or ():
            with contextlib.suppress(requests.RequestException):
                stack.api.call("DELETE", f"/vcdns/{vcdn_id}")  # 409 while busy, 202 or again
        time.sleep(1)
    while True:  # a completed removal has removed everything; a little time for the kernel
        left = {kind: names for kind, names in ledger.leftovers(stack).items() if names}
        clients_left = [ns for ns in network.list_namespaces() if any(
            ns.startswith(f"{clients.CLIENT_PREFIX}{vcdn_id}_") for vcdn_id in seen)]
        if clients_left:
            left["client namespaces"] = clients_left
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(1)


# -- the soak -------------------------------------------------------------------------------

@dataclasses.dataclass
class Result:
    """What a soak measured (times in seconds, monotonic ones relative to the load's start)."""

    params: Params
    seed: int
    seconds: float
    loads: dict            # {group: Load}
    faults: list           # chaos_faults.Fault, ``at`` relative
    operations: list       # Operation, ``at`` and ``ended`` relative
    im_changes: list       # [(at, what)]: the IM's heals and scales
    ledger: str            # None: it held
    ledger_looks: int
    leaks: dict
    load_average: tuple    # (before, after): 1-minute load averages
    cpu: float             # this process's CPU time during the soak (the viewers, mostly)
    failures: list         # what went wrong in the soak's own loops (nothing, normally)
    vnf_errors: dict       # {VNF: {message: count}} of their error logs, before deletion

    @property
    def outcomes(self):
        total = collections.Counter()
        for load in self.loads.values():
            total.update(load.outcomes)
        return total

    @property
    def errors(self):
        """``[(at, group, outcome, path)]`` of every request not answered 200, in time order."""
        return sorted(((at, group, outcome, path) for group, load in self.loads.items()
                       for at, outcome, path in load.losses), key=lambda error: error[0])

    @property
    def stuck(self):
        return [o for o in self.operations if o.operation_id and o.state not in states.TERMINAL]

    def fault_before(self, at):
        """The last fault struck before ``at``, or None."""
        index = bisect.bisect_right([f.at for f in self.faults], at)
        return self.faults[index - 1] if index else None

    def changing(self, at, window=10.0):
        """What changed the vCDNs around ``at``: the operations of the stream then open and
        the IM's changes started within ``window`` s before it."""
        return [o.label for o in self.operations if o.operation_id and o.at <= at
                and (o.ended is None or o.ended >= at)] + \
            [what for when, what in self.im_changes if at - window <= when <= at]


def soak(params, workdir=None, say=print):
    """Run the soak ``params`` describes in ``workdir`` (a temporary folder if None, removed
    after); return its :class:`Result`. Everything it started is stopped and removed before
    it returns or raises."""
    seed = params.seed if params.seed is not None else random.randrange(1_000_000)
    if raise_file_limit(params.viewers + 512) < params.viewers + 512:
        raise RuntimeError(f"{params.viewers} viewers need more open files than this process may")
    with contextlib.ExitStack() as cleanup:
        work = Path(workdir or cleanup.enter_context(
            tempfile.TemporaryDirectory(prefix="cdnaas-chaos-")))
        origin, _thread = serve_in_thread("0.0.0.0", 0)
        cleanup.callback(origin.server_close)
        cleanup.callback(origin.shutdown)
        cluster = database_url = None
        if params.postgres:
            cluster = cleanup.enter_context(postgres.cluster())
            database_url = cleanup.enter_context(postgres.fresh_database(cluster.url))
        say(f"starting the stack ({'PostgreSQL' if cluster else 'SQLite'}, seed {seed})")
        stack = cleanup.enter_context(detached_stack(work / "state", database_url, params))
        catalogue(stack.api)
        origin_url = f"http://127.0.0.1:{origin.server_address[1]}"
        demands = {name: DEMANDS[0] for name, _prefix, _default in REGIONS}
        vcdns = created(stack.api, {label: body(f"chaos-{label.lower()}", origin_url, demands)
                                    for label in ("A", "B")}, params.settle)
        for vcdn in vcdns.values():
            stack.api.wait(stack.api.ok("POST", f"/vcdns/{vcdn['id']}/prefetches", 202, json={
                "paths": [SEGMENT.format(n=n + 1) for n in range(params.segments)]}
            )["operation"]["id"], params.settle)
        faults = Faults(stack, {label: v["id"] for label, v in vcdns.items()},
                        random.Random(seed + 1), params.heal_bound, cluster)
        operations = Operations(stack.api, vcdns, origin_url, random.Random(seed))
        stop, failures = threading.Event(), []
        load_before, cpu_before = os.getloadavg()[0], time.process_time()
        say(f"soak: {params.viewers} viewers, {params.seconds:.0f} s, an operation every "
            f"~{params.operation_every:g} s, a fault every {params.fault_every:g} s")
        with viewers(vcdns, params) as loads:
            started, started_wall = time.monotonic(), dt.datetime.now(dt.timezone.utc)
            workers = [threading.Thread(target=run_operations, daemon=True, args=(
                           operations, stop, params.operation_every, random.Random(seed + 2),
                           failures)),
                       threading.Thread(target=run_faults, daemon=True,
                                        args=(faults, stop, params.fault_every, failures))]
            for worker in workers:
                worker.start()
            try:
                stop.wait(params.seconds)
            finally:
                stop.set()
                for worker in workers:
                    worker.join(params.settle)
        seconds = time.monotonic() - started
        cpu, load_after = time.process_time() - cpu_before, os.getloadavg()[0]
        say("soak over: waiting for heals and operations to end")
        faults.join(params.heal_bound)
        operations.settle(params.settle)
        problem, looks = checked_ledger(stack, params.settle)
        changes = [((at - started_wall).total_seconds(), what) for at, what in im_changes(
            stack.api, {label: v["id"] for label, v in vcdns.items()})]
        say("the VNFs' error logs:")
        logged = vnf_errors(stack.state_dir / "local")
        say("deleting every vCDN")
        leaks = deleted_all(stack, params.settle)
        for item in faults.struck + operations.sent:
            item.at -= started
        for operation in operations.sent:
            operation.ended = operation.ended and operation.ended - started
        for load in loads.values():
            load.losses = [(at - started, outcome, path) for at, outcome, path in load.losses]
        return Result(params, seed, seconds, loads, faults.struck, operations.sent, changes,
                      problem, looks, leaks, (load_before, load_after), cpu, failures, logged)


# -- the report -----------------------------------------------------------------------------

def spread(values):
    """``min / median / max`` of ``values`` (seconds), or ``-``."""
    if not values:
        return "-"
    return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f} s"


def report(result, say=print):
    """Print what ``result`` measured; return it as a JSON-able summary."""
    outcomes = result.outcomes
    requests_sent = sum(outcomes.values())
    errors_seen = result.errors
    say(f"{result.params.viewers} viewers for {result.seconds:.0f} s (seed {result.seed}): "
        f"{requests_sent:,} requests ({requests_sent / max(result.seconds, 1e-9):,.0f}/s), "
        f"{len(errors_seen)} errors {dict((k, v) for k, v in outcomes.items() if k != 200)}; "
        f"sent again on a new connection after an idle close: "
        f"{sum(load.reconnects for load in result.loads.values())}")
    groups = collections.defaultdict(list)  # {(fault, group, outcome): [seconds since it]}
    for at, group, outcome, _path in errors_seen:
        fault = result.fault_before(at)
        named = f"{fault.kind} {fault.target} at {fault.at:.0f} s" if fault else "no fault"
        groups[(named, group, outcome)].append((at - (fault.at if fault else 0.0), at))
    for (fault, group, outcome), found in sorted(groups.items(), key=lambda g: -len(g[1]))[:20]:
        changing = result.changing(found[0][1])
        say(f"  {len(found)} x {outcome} ({group}) after {fault}: "
            f"{spread([since for since, _at in found])} after it"
            f"{'; changing then: ' + ', '.join(changing) if changing else ''}")
    states_seen = collections.Counter(o.state or o.answer for o in result.operations)
    say(f"operations: {len(result.operations)} sent, by final state: {dict(states_seen)}")
    say(f"the IM's changes meanwhile: "
        f"{dict(collections.Counter(what.split()[1] for _at, what in result.im_changes))}")
    for operation in result.operations:
        if operation.state != states.COMPLETED:
            say(f"  {operation.at:6.0f} s {operation.label}: {operation.state or operation.answer}"
                f"{': ' + str(operation.error)[:160] if operation.error else ''}")
    say(f"faults: {len(result.faults)}")
    by_kind = collections.defaultdict(list)
    for fault in result.faults:
        by_kind[fault.kind].append(fault)
        healed = f"healed in {fault.healed:.1f} s" if fault.healed is not None else \
            "NOT healed"
        decided = f", IM heal decision after {fault.decided:.1f} s" \
            if fault.decided is not None else ""
        say(f"  {fault.at:6.0f} s {fault.kind} {fault.target}: {healed}{decided}"
            f"{' (' + fault.error + ')' if fault.error else ''}")
    for kind, struck in sorted(by_kind.items()):
        say(f"  {kind}: {len(struck)}, healed in "
            f"{spread([f.healed for f in struck if f.healed is not None])}")
    say(f"ledger: {'holds' if result.ledger is None else 'BROKEN: ' + result.ledger} "
        f"({result.ledger_looks} look(s) once quiet)")
    say(f"leaks after deleting every vCDN: {result.leaks or 'none'}")
    for failure in result.failures:
        say(f"the soak's own loops: {failure}")
    say(f"load average (1 min) {result.load_average[0]:.1f} before, "
        f"{result.load_average[1]:.1f} after; this process's CPU {result.cpu:.0f} s "
        f"({100 * result.cpu / max(result.seconds, 1e-9):.0f}% of a core)")
    return {"seed": result.seed, "viewers": result.params.viewers,
            "seconds": round(result.seconds), "requests": requests_sent,
            "errors": len(errors_seen), "outcomes": {str(k): v for k, v in outcomes.items()},
            "operations": dict(states_seen), "stuck": len(result.stuck),
            "faults": {k: [None if f.healed is None else round(f.healed, 1) for f in v]
                       for k, v in by_kind.items()},
            "ledger": result.ledger, "leaks": result.leaks, "failures": result.failures,
            "im_changes": len(result.im_changes),
            "load_average": [round(x, 1) for x in result.load_average]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = Params()
    parser.add_argument("--minutes", type=float, default=defaults.seconds / 60)
    parser.add_argument("--viewers", type=int, default=defaults.viewers)
    parser.add_argument("--interval", type=float, default=defaults.interval,
                        help="seconds between a viewer's requests")
    parser.add_argument("--operation-every", type=float, default=defaults.operation_every)
    parser.add_argument("--fault-every", type=float, default=defaults.fault_every)
    parser.add_argument("--postgres", action="store_true",
                        help="the services on a throwaway PostgreSQL cluster")
    parser.add_argument("--segments", type=int, default=defaults.segments)
    parser.add_argument("--im-interval", type=float, default=defaults.im_interval)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--keep", metavar="FOLDER", help="run in FOLDER and keep its logs")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the local driver needs root")
    params = Params(seconds=args.minutes * 60, viewers=args.viewers, interval=args.interval,
                    operation_every=args.operation_every, fault_every=args.fault_every,
                    postgres=args.postgres, segments=args.segments,
                    im_interval=args.im_interval, seed=args.seed)

    def on_signal(_signum, _frame):
        raise KeyboardInterrupt  # stop and clean up as on Ctrl-C

    signal.signal(signal.SIGTERM, on_signal)
    print(json.dumps(report(soak(params, args.keep))))


if __name__ == "__main__":
    main()
