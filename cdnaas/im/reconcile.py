"""One idempotent pass over the active vCDNs, and the loop that schedules it.

Like Octavia's health manager, :func:`reconcile_once` looks at every ACTIVE
vCDN and, through the Service Orchestrator (changes) and the Resource
Orchestrator (the only component that reaches VNFs):

1. ends the vCDNs whose lease has passed;
2. reads each VNF's counters and health (RO: one request per vCDN, which also
   brings the traffic of step 7), turns them into rates, the QoE estimate and
   each VNF's share of its host's power (RAPL where this machine has it, the
   host's power model otherwise), and appends the points of every cache,
   region, vCDN and host to the time series (one bulk insert);
3. heals VNFs failing their health checks (:mod:`cdnaas.im.healing`);
4. asks the flavor's policy hook what to scale and carries out the most
   urgent decision through SO;
5. switches off hosts that carry nothing and are not needed, and wakes hosts before
   they are, none twice within the dwell where it can help it (:mod:`cdnaas.im.hosts`:
   decided here, carried out by RO's power driver);
6. publishes the Prometheus gauges and drops points past their retention;
7. records each vCDN's usage per region and minute: the traffic its balancers logged
   since its cursor (read in step 2; the rest of a long backlog from RO), its viewer-,
   vCPU-seconds and energy (:mod:`cdnaas.im.usage`).

Readings (2, 7) of different vCDNs overlap on ``CDNAAS_IM_WORKERS`` threads: they
mostly wait for RO and the database. Decisions (3-5) are taken one vCDN after the
other, each on the hosts as the previous one left them.

Every change is an SO operation, recorded as a decision with the figures
that caused it. Running it twice in a row changes nothing the second time
that the first did not: a vCDN being changed is no longer ACTIVE, counters
restart after each change, and health is recorded only when it changes. The
clock is a parameter, so tests and the benchmark drive it.
"""
import concurrent.futures
import dataclasses
import datetime as dt
import logging
import math
import threading

from cdnaas.common import clock, config, errors
from cdnaas.common.clients import RoClient, SidrClient, SoClient
from cdnaas.common.timeutil import isoformat, parse
from cdnaas.db import leases
from cdnaas.im import (decisions, figures, flavors, gauges, healing, hosts, inventory, monitoring,
                       policy_hook, power, qoe, quality_events, series, usage)
from cdnaas.im.rapl import RaplMeter

LOG = logging.getLogger(__name__)

#: passes of history read per vCDN: with this pass's own, the policy's samples
HISTORY_PASSES = policy_hook.HISTORY_SAMPLES - 1


@dataclasses.dataclass
class Seen:
    """One ACTIVE vCDN as this pass read it."""

    vcdn: dict
    flavor: flavors.Flavor
    model: object
    readings: list
    previous: dict
    points: list = dataclasses.field(default_factory=list)
    #: RO's first traffic answer of this pass (:class:`cdnaas.im.usage.TrafficRead`)
    traffic: usage.TrafficRead | None = None
    #: ``{region: [series.Level, ...]}`` of its latest passes, oldest first; the pass
    #: adds its own once its points are taken (:func:`_close_histories`)
    history: dict = dataclasses.field(default_factory=dict)


def reconcile_once(database, now=None, so=None, ro=None, sidr=None, meter=None):
    """One pass at ``now`` (default: the services' clock); return the decisions it recorded.

    :param so: :class:`SoClient`-like, ``ro``: :class:`RoClient`-like, ``sidr``:
        :class:`SidrClient`-like (defaults: the configured services).
    :param meter: a :class:`~cdnaas.im.rapl.RaplMeter` for this machine's power, if any.
    """
    now = now or clock.now()
    so, ro, sidr = so or SoClient(), ro or RoClient(), sidr or SidrClient()
    recorded, seen = [], []
    with database.sessions() as session:
        health_before = decisions.latest(session, "health")
        changed = decisions.last_changes(session)

    def read(vcdn):
        """``(Seen or None, decision or None)`` of one vCDN; its failure is recorded."""
        try:
            if parse(vcdn["lease"]["end"]) <= now:
                return None, _end_lease(database, so, vcdn, now)
            return _observe(database, ro, sidr, vcdn, now, health_before.get(vcdn["id"]))
        except (errors.CdnaasError, LookupError) as exc:  # one vCDN must not stop the pass
            LOG.warning("reconcile of %s failed: %s", vcdn["id"], exc)
            return None, decisions.record(database, now, "reconcile", "error", str(exc), {},
                                          vcdn_id=vcdn["id"])

    with _readers() as workers:
        for observed, decision in workers.map(read, so.instances(state="ACTIVE")):
            if observed is not None:
                seen.append(observed)
            if decision is not None:
                recorded.append(decision)
    hosts_now = inventory.hosts(so)
    measured = {}
    if meter is not None and (watts := meter.watts()) is not None:
        measured[meter.host] = watts
    host_points, host_power = _power(database, seen, hosts_now, measured, now)
    _close_histories(seen, now)
    quality_events.report(so, seen)
    with database.transaction() as session:
        series.write(session, now, [p for s in seen for p in s.points] + host_points)
        series.purge(session, now)
        usage.purge(session, now)
    with _readers() as workers:
        list(workers.map(lambda observed: usage.record(database, ro, observed, now), seen))
    for observed in seen:
        recorded += _act(database, so, now, observed, changed.get(observed.vcdn["id"], {}),
                         hosts_now, host_power)
    refused = {d["region"]: d["details"].get("error", "") for d in recorded
               if d["kind"] == "scale_out" and d["outcome"] == "refused" and d["region"]
               and d["details"].get("refused_for") == "capacity"}
    marks, marked = _power_hosts(database, so, ro, now, hosts_now, seen, refused)
    gauges.publish([p for s in seen for p in s.points if p["scope"] in ("vcdn", "region")],
                   [(p["key"], hosts_now[p["key"]].region, p) for p in host_points], marked)
    return recorded + marks


# -- reading ------------------------------------------------------------------------------------

def _readers():
    """The threads on which a pass reads its vCDNs (``CDNAAS_IM_WORKERS``)."""
    return concurrent.futures.ThreadPoolExecutor(max(1, config.setting("CDNAAS_IM_WORKERS")),
                                                  thread_name_prefix="im-read")


def _observe(database, ro, sidr, vcdn, now, health_before):
    """Read one vCDN (one RO request: health, figures and the first traffic since its
    usage cursor); return its :class:`Seen` and the health decision, if health changed
    since ``health_before`` (the latest recorded, an :class:`Action` or None)."""
    flavor = flavors.of(vcdn, sidr)
    with database.sessions() as session:
        previous = series.previous(session, vcdn["id"])
        history = series.region_history(session, vcdn["id"], HISTORY_PASSES)
        cursor = usage.cursor(session, vcdn["id"])
    answer = ro.readings(vcdn["id"], cursor)
    health = answer["health"]
    changed = _health_change(database, vcdn, health, now, health_before)
    by_name = {key: row for (scope, key), row in previous.items() if scope in ("cache", "vnf")}
    readings = monitoring.readings(answer["metrics"]["vnfs"],
                                   {v["name"]: v for v in health["vnfs"]}, by_name)
    return Seen(vcdn=vcdn, flavor=flavor, model=flavor.model(), readings=readings,
                previous=previous, history=history, traffic=usage.TrafficRead(
                    cursor, answer["traffic"], answer["traffic_error"])), changed


def _close_histories(seen, now):
    """Add this pass's region levels (its points, taken ``now``) to each ``Seen.history``."""
    for observed in seen:
        for point in observed.points:
            if point["scope"] == "region":
                observed.history.setdefault(point["key"], []).append(series.Level(
                    now, point["viewers"], point["mos"], point["vcpus"]))


def _health_change(database, vcdn, health, now, last):
    unhealthy = [v["name"] for v in health["vnfs"] if not v["healthy"]]
    status = "unhealthy" if unhealthy else "healthy"
    if last is not None and last.outcome == status and \
            last.details.get("unhealthy", []) == unhealthy:
        return None  # nothing changed since the last pass
    reason = f"{len(unhealthy)} VNF(s) failing health checks" if unhealthy \
        else "every VNF answers"
    return decisions.record(database, now, "health", status, reason,
                            {"unhealthy": unhealthy, "vnfs": health["vnfs"]}, vcdn_id=vcdn["id"])


def _power(database, seen, hosts_now, measured, now):
    """Each host's power and each VNF's share; fills every ``Seen.points``. A host the IM
    has switched off (marked, and disabled in SO: the driver applied it) draws nothing.

    :returns: ``(host points, {host: HostPower})``.
    """
    loads = {}
    for observed in seen:
        for reading in observed.readings:
            if reading.host in hosts_now:
                loads.setdefault(reading.host, []).append(power.VnfLoad(
                    key=(observed.vcdn["id"], reading.name), vcpus=reading.vcpus,
                    cpu=reading.cpu or 0.0, technology=observed.flavor.technology))
    with database.sessions() as session:
        before = series.previous_hosts(session)
        marks = hosts.marks(session)
    host_power, host_points = {}, []
    for name, host in sorted(hosts_now.items()):
        if hosts.switched_off(host, marks.get(name)) and name not in loads:
            found = power.HostPower(watts=0.0, utilisation=0.0, source="model", shares={})
        else:  # (SO places nothing on a host the IM had switched off: see cdnaas.im.hosts)
            found = power.host_power(host.idle_watts, host.peak_watts, host.vcpus,
                                     host.reserved_vcpus, loads.get(name, []), measured.get(name))
        host_power[name] = found
        host_points.append({"scope": "host", "vcdn_id": None, "key": name,
                            "cpu": found.utilisation * host.vcpus, "vcpus": host.vcpus,
                            "watts": found.watts, "source": found.source,
                            "energy_wh": figures.energy_wh(before.get(name), found.watts, now)})
    shares = {key: watts for found in host_power.values() for key, watts in found.shares.items()}
    for observed in seen:
        watts = {r.name: shares.get((observed.vcdn["id"], r.name)) for r in observed.readings}
        observed.points = figures.vcdn_points(observed.vcdn["id"], observed.readings, watts,
                                              observed.model, observed.previous, now)
    return host_points, host_power


# -- acting -------------------------------------------------------------------------------------

def _act(database, so, now, observed, changed, hosts_now, host_power):
    """Heal first; otherwise carry out the policy's most urgent decision (``changed``: its
    regions' latest started changes). Return what was recorded."""
    vcdn_id = observed.vcdn["id"]
    healed = healing.heal(database, so, now, observed)
    if healed:
        return [healed]
    try:
        chosen = policy_hook.decisions_for(now, observed, changed, hosts_now, host_power)
    except Exception as exc:  # a plugin's bug must not stop the pass
        LOG.exception("policy of flavor %s failed for %s", observed.vcdn["flavor"], vcdn_id)
        return [decisions.record(database, now, "reconcile", "error",
                                 f"the flavor's policy failed: {type(exc).__name__}: {exc}", {},
                                 vcdn_id=vcdn_id)]
    for decision in chosen:
        with database.sessions() as session:
            if decisions.recently_refused(session, now, vcdn_id, decision.region, decision.kind,
                                          decision.caches):
                continue
        return [decisions.through_so(
            database, now, vcdn_id, decision.kind,
            lambda d=decision: so.scale(vcdn_id, d.region, d.caches, d.reason[:200]),
            decision.reason, {**decision.inputs, "target_caches": decision.caches},
            region=decision.region)]
    return []


def _end_lease(database, so, vcdn, now):
    details = {"lease_end": vcdn["lease"]["end"], "now": isoformat(now)}
    return decisions.through_so(
        database, now, vcdn["id"], "terminate",
        lambda: so.delete_instance(vcdn["id"], reason="lease expired"),
        f"lease ended at {vcdn['lease']['end']}", details)


def _power_hosts(database, so, ro, now, hosts_now, seen, refused):
    """This pass's power actions; return their decisions and how many hosts are off.

    :param refused: ``{region: SO's answer}`` of scale outs SO refused this pass.
    """
    carried = _carried(ro)
    since = hosts.track_empty(database, now, hosts_now, carried)
    with database.sessions() as session:
        marked = {n for n, m in hosts.marks(session).items() if m.state == hosts.POWER_DOWN}
        needs = region_needs(seen, hosts_now)
        waking = hosts.waking(session, now, config.setting("CDNAAS_IM_HOST_BOOT_SECONDS"))
        changed = hosts.last_changes(session, now)
    changes = hosts.plan(hosts_now, marked, _soon_needed(so, now), needs, carried, now, since,
                         refused, waking, changed)
    recorded = hosts.apply(database, now, changes, so, ro)
    with database.sessions() as session:
        off = sum(m.state == hosts.POWER_DOWN for m in hosts.marks(session).values())
    return recorded, off


def _carried(ro):
    """``{host: ["deployment/VNF", ...]}`` of every deployment RO has not deleted."""
    carried = {}
    for deployment in ro.deployments(live=True):
        for vnf in deployment["vnfs"]:
            if vnf.get("host"):
                carried.setdefault(vnf["host"], []).append(f"{deployment['id']}/{vnf['name']}")
    return carried


#: MOS above the target at which a region's caches are counted as needed (the level the
#: qoe-video policy scales out below); caches beyond it are surplus
NEED_MARGIN = 0.2
#: samples of a region's smoothed viewers whose every rise counts (noise rarely rises so
#: many times in a row, a surge does; as the qoe-video policy's trend). Two woke hosts on
#: noise: on the day's trace they were switched 43-83 times instead of 19
TREND_SAMPLES = 3


def _rise(points):
    """Viewers per second a region gains: the smallest rise between the last
    :data:`TREND_SAMPLES` + 1 smoothed points (none unless every one rises)."""
    smoothed = []
    for point in points:
        smoothed.append(qoe.smooth(smoothed[-1] if smoothed else None, point.viewers or 0.0))
    if len(points) <= TREND_SAMPLES:
        return 0.0
    rises = [b - a for a, b in zip(smoothed[-TREND_SAMPLES - 1:-1], smoothed[-TREND_SAMPLES:])]
    seconds = (points[-1].at - points[-2].at).total_seconds()
    return max(0.0, min(rises)) / seconds if seconds > 0 else 0.0


def region_needs(seen, hosts_now):
    """``{region: hosts.RegionNeed}``: what each region's hosts must hold (see
    :mod:`cdnaas.im.hosts`): reservations less the observed vCDNs' surplus caches (plus
    the caches they lack), and a headroom (:func:`cdnaas.im.hosts.headroom`: a share of
    that demand, at least the floor) and what a rise adds while a host boots; that rise
    counts no further than the vCDNs' declared demands (room beyond the contract is not
    owed; a region past it is not capped). The same at the highest viewers of the last
    ``CDNAAS_IM_HOST_IDLE_PASSES`` passes is what the hosts left on must hold for one to
    sleep (a dip of noise does not switch a host off that the next pass needs)."""
    boot = config.setting("CDNAAS_IM_HOST_BOOT_SECONDS")
    settle = max(1, config.setting("CDNAAS_IM_HOST_IDLE_PASSES"))
    reserved, surplus, biggest, growth, observed_vcpus, owed = {}, {}, {}, {}, {}, {}
    dips = {}  # vCPUs the viewers needed at their highest of the last passes beyond now
    for host in hosts_now.values():
        reserved[host.region] = reserved.get(host.region, 0) + host.reserved_vcpus
    for observed in seen:
        for reading in observed.readings:
            observed_vcpus[reading.region] = observed_vcpus.get(reading.region, 0) + reading.vcpus
        for region in observed.vcdn["regions"]:
            name = region["name"]
            caches = [r for r in observed.readings if r.region == name and r.role == "cache"]
            if not caches:
                continue
            biggest[name] = max(biggest.get(name, 0), max(r.vcpus for r in caches))
            target = region["quality"].get("min_mos")
            model = observed.model
            if target is None or model is None:
                continue
            per_vcpu = model.max_load_for_mos(min(target + NEED_MARGIN, model.best_mos))
            points = observed.history.get(name, [])[-(2 * TREND_SAMPLES + 1):]
            if not per_vcpu or not points:
                continue
            rise = _rise(points)
            needed = (points[-1].viewers or 0) / per_vcpu
            highest = max(p.viewers or 0 for p in observed.history[name][-settle:]) / per_vcpu
            dips[name] = dips.get(name, 0) + highest - needed
            # positive: surplus caches; negative: caches missing (a scale out to come)
            surplus[name] = surplus.get(name, 0) + sum(r.vcpus for r in caches) - needed
            growth[name] = growth.get(name, 0) + rise * boot / per_vcpu
            # no vCDN is owed room beyond the demand its customer declared (past it, the
            # region is served as best it can be: no cap)
            room = region.get("demand", 0) / per_vcpu - needed
            owed[name] = owed.get(name, 0) + room if room >= 0 else math.inf
    demands = {name: max(0.0, total - surplus.get(name, 0.0)) for name, total in reserved.items()}

    def required(name, demand):
        return demand + hosts.headroom(demand, biggest.get(name, 0)) \
            + min(growth.get(name, 0.0), owed.get(name, math.inf))
    return {name: hosts.RegionNeed(
        demand_vcpus=demands[name],
        headroom_vcpus=required(name, demands[name]) - demands[name],
        settled_vcpus=required(name, demands[name] + dips.get(name, 0.0)),
        details={"reserved_vcpus": total, "surplus_vcpus": round(surplus.get(name, 0.0), 2),
                 "recent_high_vcpus": round(demands[name] + dips.get(name, 0.0), 2),
                 "growth_vcpus": round(growth.get(name, 0.0), 2), "host_boot_seconds": boot,
                 "declared_room_vcpus": round(owed[name], 2)
                 if math.isfinite(owed.get(name, math.inf)) else None},
        hold=total > observed_vcpus.get(name, 0), unit_vcpus=biggest.get(name, 1))
        for name, total in reserved.items()}


def _soon_needed(so, now):
    """``{host: why}`` of hosts holding VNFs of vCDNs whose lease starts within the wake lead."""
    lead = dt.timedelta(seconds=config.setting("CDNAAS_IM_WAKE_LEAD_SECONDS"))
    needed = {}
    for vcdn in so.instances(state="SCHEDULED"):
        if parse(vcdn["lease"]["start"]) <= now + lead:
            sig = so.sig(vcdn["id"])
            for vnf in sig["vnfs"]:
                needed.setdefault(vnf["host"], f"vCDN {vcdn['id']} starts at "
                                               f"{vcdn['lease']['start']}")
    return needed


#: seconds ``POST /im/v1/reconcile`` waits for a pass running on another replica to end
PASS_WAIT_SECONDS = 300.0


class ReconcileLoop:
    """Runs :func:`reconcile_once` every ``CDNAAS_IM_INTERVAL`` seconds in a thread, on the
    services' clock (:mod:`cdnaas.common.clock`).

    Replicas: of the IMs sharing one PostgreSQL only the leader (the holder of an
    advisory lock, :class:`cdnaas.db.leases.Leadership`) runs the periodic pass, so a
    pass runs once per period whatever the number of replicas; when the leader dies its
    connection, and so the lock, goes, and the next replica to look leads. Every pass,
    periodic or asked for, holds a second lock, so none overlaps another replica's.
    """

    def __init__(self, database):
        self.database = database
        self.meter = RaplMeter()
        self.leadership = leases.Leadership(database, "im-reconcile")
        self.passes = 0  # passes this replica ran
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def run_once(self):
        """One pass, never two at once (the loop and ``POST /im/v1/reconcile`` share it,
        across replicas too)."""
        with self._lock:
            try:
                with self.leadership.exclusive(PASS_WAIT_SECONDS):
                    self.passes += 1
                    return reconcile_once(self.database, meter=self.meter)
            except TimeoutError as exc:
                raise errors.CdnaasError(f"no reconcile pass now: {exc}") from exc

    def start(self):
        def loop():
            while not self._stop.wait(config.setting("CDNAAS_IM_INTERVAL")):
                if not self.leadership.lead():
                    continue  # another replica leads: its passes are this period's
                try:
                    self.run_once()
                except Exception:  # a peer may be down; the next pass retries
                    LOG.exception("reconcile pass failed")
        threading.Thread(target=loop, name="im-reconcile", daemon=True).start()

    def stop(self):
        self._stop.set()
        self.leadership.resign()
