"""One idempotent pass over the active vCDNs, and the loop that schedules it.

Like Octavia's health manager, :func:`reconcile_once` looks at every ACTIVE
vCDN and, through the Service Orchestrator (changes) and the Resource
Orchestrator (the only component that reaches VNFs):

1. ends the vCDNs whose lease has passed;
2. reads each VNF's counters and health (RO: one request per :data:`~cdnaas.im.reading.CHUNK`
   vCDNs, which also brings the traffic of step 7), turns them into rates, the QoE estimate and
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

Readings (2, 7) of different chunks of vCDNs overlap on ``CDNAAS_IM_WORKERS`` threads:
they mostly wait for RO and the database; points and usage are written in bulk.

Replicas share the vCDNs (:mod:`cdnaas.im.shares`): a pass observes its replica's share
(steps 1-4, 6, 7 for those vCDNs); step 5, the host points and the purge of old points
are the leader's, which adds up the other replicas' latest summaries of their vCDNs. Decisions (3-5) are taken one vCDN after the
other, each on the hosts as the previous one left them.

Every change is an SO operation, recorded as a decision with the figures
that caused it. Running it twice in a row changes nothing the second time
that the first did not: a vCDN being changed is no longer ACTIVE, counters
restart after each change, and health is recorded only when it changes. The
clock is a parameter, so tests and the benchmark drive it.
"""
import concurrent.futures
import datetime as dt
import logging
import math
import threading
import time

from cdnaas.common import clock, config
from cdnaas.common.clients import RoClient, SidrClient, SoClient
from cdnaas.common.timeutil import isoformat, parse
from cdnaas.db import leases
from cdnaas.im import (collection, decisions, figures, gauges, healing, hosts, inventory,
                       policy_hook, power, quality_events, reading, series, shares, usage)
from cdnaas.im.reading import Seen  # noqa: F401 (what tests and plugins build)
from cdnaas.im.rapl import RaplMeter
from cdnaas.planning import qoe

LOG = logging.getLogger(__name__)


def reconcile_once(database, now=None, so=None, ro=None, sidr=None, meter=None, share=None,
                   memory=None):
    """One pass at ``now`` (default: the services' clock); return the decisions it recorded.

    :param so: :class:`SoClient`-like, ``ro``: :class:`RoClient`-like, ``sidr``:
        :class:`SidrClient`-like (defaults: the configured services).
    :param meter: a :class:`~cdnaas.im.rapl.RaplMeter` for this machine's power, if any.
    :param share: the :class:`~cdnaas.im.shares.Share` of the vCDNs this pass observes,
        whether it decides about hosts, and its peers' summaries (default: everything);
        its ``summary`` is set to what this pass saw (:func:`summary`).
    :param memory: this replica's :class:`~cdnaas.im.reading.Memory` of its previous
        pass, used for the vCDNs of shares it held then (None: read from the database).
    """
    now = now or clock.now()
    so, ro, sidr = so or SoClient(), ro or RoClient(), sidr or SidrClient()
    share = share or shares.everything()
    recorded, seen = [], []
    current = []
    for vcdn in so.instances(state="ACTIVE", brief=True):
        if not share.covers(vcdn.id):
            continue
        if parse(vcdn.lease.end) <= now:
            recorded.append(_end_lease(database, so, vcdn, now))
        else:
            current.append(vcdn)

    def remembered(vcdn_id):
        return memory.recall(vcdn_id) if memory and share.continued(vcdn_id) else None
    health_before = {v.id: memory.health(v.id) for v in current
                     if memory and share.continued(v.id)}
    with database.sessions() as session:
        health_before.update(decisions.latest_health(
            session, [v.id for v in current if health_before.get(v.id) is None]))
        changed = decisions.last_changes(session)
        cursors = usage.cursors(session, [v.id for v in current])

    chunks = [current[i:i + reading.CHUNK] for i in range(0, len(current), reading.CHUNK)]
    models = {}
    with _readers() as workers:
        for found in workers.map(lambda chunk: reading.read(database, ro, sidr, chunk,
                                                            remembered, cursors, models),
                                 chunks):
            for vcdn, observed in found:
                if isinstance(observed, str):  # one vCDN must not stop the pass
                    LOG.warning("reconcile of %s failed: %s", vcdn.id, observed)
                    recorded.append(decisions.record(database, now, "reconcile", "error",
                                                     observed, {}, vcdn_id=vcdn.id))
                    continue
                seen.append(observed)
                health = _health_change(database, vcdn, observed.health, now,
                                        health_before.get(vcdn.id))
                if health is not None:
                    recorded.append(health)
    hosts_now = inventory.hosts(so)
    measured = {}
    if share.leads and meter is not None and (watts := meter.watts()) is not None:
        measured[meter.host] = watts
    loads = _loads(seen, hosts_now)
    host_points, host_power = _power(database, seen, loads, hosts_now, measured, now,
                                     share.peers)
    _close_histories(seen, now)
    quality_events.report(so, seen)
    with database.transaction() as session:
        series.write(session, now, [p for s in seen for p in s.points]
                     + (host_points if share.leads else []))
        if share.leads:
            series.purge(session, now)
            usage.purge(session, now)
    if memory is not None:
        memory.keep(seen, now)
    chunks = [seen[i:i + reading.CHUNK] for i in range(0, len(seen), reading.CHUNK)]
    with _readers() as workers:
        list(workers.map(lambda chunk: usage.record_many(database, ro, chunk, now), chunks))
    states = policy_hook.HostStates(hosts_now, host_power)
    for observed in seen:
        recorded += _act(database, so, now, observed, changed.get(observed.vcdn.id, {}),
                         hosts_now, host_power, states)
    refused = {d["region"]: d["details"].get("error", "") for d in recorded
               if d["kind"] == "scale_out" and d["outcome"] == "refused" and d["region"]
               and d["details"].get("refused_for") == "capacity"}
    share.summary = summary(seen, loads, refused)
    marks, marked = [], None
    if share.leads:
        marks, marked = _power_hosts(database, so, ro, now, hosts_now, share.summary,
                                     share.peers)
    gauges.publish([p for s in seen for p in s.points if p["scope"] in ("vcdn", "region")],
                   [(p["key"], hosts_now[p["key"]].region, p) for p in host_points]
                   if share.leads else None, marked)
    return recorded + marks


def summary(seen, loads, refused):
    """What a pass saw of hosts and regions, for the leader of another pass to add up:
    ``{"hosts": {host: [vCPUs, weighted busy cores]}, "regions": region_parts(seen),
    "refused": {region: SO's answer}}`` (``loads``: :func:`_loads` of ``seen``)."""
    hosts_seen = {}
    for host, load in loads:
        found = hosts_seen.setdefault(host, [0, 0.0])
        found[0] += load.vcpus
        found[1] += load.weighted_cpu
    return {"hosts": hosts_seen, "regions": region_parts(seen), "refused": refused}


# -- reading ------------------------------------------------------------------------------------

def _readers():
    """The threads on which a pass reads its vCDNs (``CDNAAS_IM_WORKERS``)."""
    return concurrent.futures.ThreadPoolExecutor(max(1, config.setting("CDNAAS_IM_WORKERS")),
                                                  thread_name_prefix="im-read")


def _close_histories(seen, now):
    """Add this pass's region levels (its points, taken ``now``) to each ``Seen.history``."""
    for observed in seen:
        for point in observed.points:
            if point["scope"] == "region":
                observed.history.setdefault(point["key"], []).append(series.Level(
                    now, point["viewers"], point["mos"], point["vcpus"]))


def _health_change(database, vcdn, health, now, last):
    """Record ``vcdn``'s ``health`` (RO's answer) unless it is ``last``'s ``(outcome,
    unhealthy VNF names)``; return the decision recorded, if any."""
    status, unhealthy = reading.health_status(health)
    if last == (status, unhealthy):
        return None  # nothing changed since the last pass
    reason = f"{len(unhealthy)} VNF(s) failing health checks" if unhealthy \
        else "every VNF answers"
    return decisions.record(database, now, "health", status, reason,
                            {"unhealthy": unhealthy,
                             "vnfs": [v._asdict() for v in health.vnfs]},
                            vcdn_id=vcdn.id)


def _loads(seen, hosts_now):
    """``[(host, VnfLoad)]`` of every VNF of ``seen`` on a host of ``hosts_now``."""
    return [(reading.host, power.VnfLoad(
        key=(observed.vcdn.id, reading.name), vcpus=reading.vcpus, cpu=reading.cpu or 0.0,
        technology=observed.flavor.technology))
        for observed in seen for reading in observed.readings if reading.host in hosts_now]


def _power(database, seen, own, hosts_now, measured, now, peers=()):
    """Each host's power and each VNF's share; fills every ``Seen.points``. A host the IM
    has switched off (marked, and disabled in SO: the driver applied it) draws nothing.
    ``own``: :func:`_loads` of ``seen``; the VNFs other replicas observe count as their
    latest ``peers`` summaries say.

    :returns: ``(host points, {host: HostPower})``.
    """
    loads = {}
    for host, load in own:
        loads.setdefault(host, []).append(load)
    for number, peer in enumerate(peers):
        for host, (vcpus, busy) in peer.get("hosts", {}).items():
            if host in hosts_now:  # weighted already: no technology's overhead again
                loads.setdefault(host, []).append(power.VnfLoad(
                    key=("peer", number), vcpus=vcpus, cpu=busy, technology="weighted"))
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
        watts = {r.name: shares.get((observed.vcdn.id, r.name)) for r in observed.readings}
        observed.points = figures.vcdn_points(observed.vcdn.id, observed.readings, watts,
                                              observed.model, observed.previous, now)
    return host_points, host_power


# -- acting -------------------------------------------------------------------------------------

def _act(database, so, now, observed, changed, hosts_now, host_power, states):
    """Heal first; otherwise carry out the policy's most urgent decision (``changed``: its
    regions' latest started changes). Return what was recorded."""
    vcdn_id = observed.vcdn.id
    healed = healing.heal(database, so, now, observed)
    if healed:
        return [healed]
    try:
        chosen = policy_hook.decisions_for(now, observed, changed, hosts_now, host_power,
                                           states)
    except Exception as exc:  # a plugin's bug must not stop the pass
        LOG.exception("policy of flavor %s failed for %s", observed.vcdn.flavor, vcdn_id)
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
    details = {"lease_end": vcdn.lease.end, "now": isoformat(now)}
    return decisions.through_so(
        database, now, vcdn.id, "terminate",
        lambda: so.delete_instance(vcdn.id, reason="lease expired"),
        f"lease ended at {vcdn.lease.end}", details)


def _power_hosts(database, so, ro, now, hosts_now, own, peers):
    """This pass's power actions; return their decisions and how many hosts are off.

    :param own: the :func:`summary` of this pass (its vCDNs' region needs, the scale outs
        SO refused); ``peers``: the other replicas' latest summaries.
    """
    refused = {k: v for peer in peers for k, v in peer.get("refused", {}).items()} \
        | own["refused"]
    carried = ro.placement()
    since = hosts.track_empty(database, now, hosts_now, carried)
    with database.sessions() as session:
        marked = {n for n, m in hosts.marks(session).items() if m.state == hosts.POWER_DOWN}
        needs = region_needs(hosts_now, [own["regions"]]
                             + [peer.get("regions", {}) for peer in peers])
        waking = hosts.waking(session, now, config.setting("CDNAAS_IM_HOST_BOOT_SECONDS"))
        changed = hosts.last_changes(session, now)
    changes = hosts.plan(hosts_now, marked, _soon_needed(so, now), needs, carried, now, since,
                         refused, waking, changed)
    recorded = hosts.apply(database, now, changes, so, ro)
    with database.sessions() as session:
        off = sum(m.state == hosts.POWER_DOWN for m in hosts.marks(session).values())
    return recorded, off


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


def region_parts(seen):
    """``{region: {figure: value}}``: what the vCDNs ``seen`` add to their regions' needs
    (:func:`region_needs`), as JSON: vCPUs observed, the biggest cache, surplus caches,
    growth while a host boots, room owed up to the declared demands (None: unbounded),
    the recent highs beyond now. Parts of disjoint vCDNs add up (:func:`_add_parts`)."""
    boot = config.setting("CDNAAS_IM_HOST_BOOT_SECONDS")
    settle = max(1, config.setting("CDNAAS_IM_HOST_IDLE_PASSES"))
    return _add_parts(_vcdn_parts(observed, boot, settle) for observed in seen)


def _vcdn_parts(observed, boot, settle):
    """The :func:`region_parts` of one vCDN (``boot``: a host's boot seconds; ``settle``:
    the passes whose highest viewers count)."""
    parts = {}
    for reading in observed.readings:
        part = parts.setdefault(reading.region, {})
        part["observed"] = part.get("observed", 0) + reading.vcpus
    for region in observed.vcdn.regions:
        name = region.name
        caches = [r for r in observed.readings if r.region == name and r.role == "cache"]
        if not caches:
            continue
        part = parts.setdefault(name, {})
        part["biggest"] = max(r.vcpus for r in caches)
        target = (region.quality or {}).get("min_mos")
        model = observed.model
        if target is None or model is None:
            continue
        per_vcpu = model.max_load_for_mos(min(target + NEED_MARGIN, model.best_mos))
        points = observed.history.get(name, [])[-(2 * TREND_SAMPLES + 1):]
        if not per_vcpu or not points:
            continue
        needed = (points[-1].viewers or 0) / per_vcpu
        highest = max(p.viewers or 0 for p in observed.history[name][-settle:]) / per_vcpu
        # vCPUs the viewers needed at their highest of the last passes beyond now
        part["dips"] = highest - needed
        # positive: surplus caches; negative: caches missing (a scale out to come)
        part["surplus"] = sum(r.vcpus for r in caches) - needed
        part["growth"] = _rise(points) * boot / per_vcpu
        # no vCDN is owed room beyond the demand its customer declared (past it, the
        # region is served as best it can be: no cap)
        room = (region.demand or 0) / per_vcpu - needed
        part["owed"] = room if room >= 0 else None
    return parts


def _add_parts(all_parts):
    """The :func:`region_parts` of several disjoint sets of vCDNs added up."""
    total = {}
    for parts in all_parts:
        for name, part in parts.items():
            into = total.setdefault(name, {})
            for figure, value in part.items():
                if figure == "biggest":
                    into[figure] = max(into.get(figure, 0), value)
                elif figure == "owed":
                    before = into.get(figure, 0)
                    into[figure] = None if value is None or before is None else before + value
                else:
                    into[figure] = into.get(figure, 0) + value
    return total


def region_needs(hosts_now, parts):
    """``{region: hosts.RegionNeed}``: what each region's hosts must hold (see
    :mod:`cdnaas.im.hosts`): reservations less the observed vCDNs' surplus caches (plus
    the caches they lack), and a headroom (:func:`cdnaas.im.hosts.headroom`: a share of
    that demand, at least the floor) and what a rise adds while a host boots; that rise
    counts no further than the vCDNs' declared demands (room beyond the contract is not
    owed; a region past it is not capped). The same at the highest viewers of the last
    ``CDNAAS_IM_HOST_IDLE_PASSES`` passes is what the hosts left on must hold for one to
    sleep (a dip of noise does not switch a host off that the next pass needs).

    :param parts: the :func:`region_parts` of disjoint sets of vCDNs (this pass's, and
        those other replicas observe), added up here.
    """
    boot = config.setting("CDNAAS_IM_HOST_BOOT_SECONDS")
    parts = _add_parts(parts)

    def figure(name, key, default=0.0):
        return parts.get(name, {}).get(key, default)
    reserved = {}
    for host in hosts_now.values():
        reserved[host.region] = reserved.get(host.region, 0) + host.reserved_vcpus
    surplus = {name: figure(name, "surplus") for name in parts if "surplus" in parts[name]}
    growth = {name: figure(name, "growth") for name in parts if "growth" in parts[name]}
    biggest = {name: figure(name, "biggest", 0) for name in parts if "biggest" in parts[name]}
    dips = {name: figure(name, "dips") for name in parts if "dips" in parts[name]}
    observed_vcpus = {name: figure(name, "observed", 0) for name in parts}
    owed = {name: math.inf if parts[name]["owed"] is None else parts[name]["owed"]
            for name in parts if "owed" in parts[name]}
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
        if parse(vcdn.lease.start) <= now + lead:
            sig = so.sig(vcdn.id)
            for vnf in sig["vnfs"]:
                needed.setdefault(vnf["host"], f"vCDN {vcdn.id} starts at "
                                               f"{vcdn.lease.start}")
    return needed


class ReconcileLoop:
    """Runs :func:`reconcile_once` at the start of every period of ``CDNAAS_IM_INTERVAL``
    seconds (periods counted from the epoch, so replicas share them) in a thread, over
    this replica's share of the vCDNs (:mod:`cdnaas.im.shares`); a pass that ends in a
    later period starts the next at once, the periods in between counted as missed
    (``cdnaas_im_periods_missed_total``).

    Replicas: every IM sharing one PostgreSQL observes its share each period; of them
    only the leader (the holder of an advisory lock, :class:`cdnaas.db.leases.Leadership`)
    decides about hosts; when the leader dies its connection, and so the lock, goes, and
    the next replica to look leads.
    """

    def __init__(self, database):
        self.database = database
        self.meter = RaplMeter()
        self.leadership = leases.Leadership(database, "im-reconcile")
        self.shares = shares.Shares(database)
        self.memory = reading.Memory()
        self.passes = 0  # passes this replica ran
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def run_once(self):
        """One pass over this replica's share, never two at once (the loop and
        ``POST /im/v1/reconcile`` share it)."""
        with self._lock:
            share = self.shares.begin(self.leadership.lead())
            began, cpu, now = time.monotonic(), time.process_time(), clock.now()
            with collection.paused(self.passes + 1):
                found = reconcile_once(self.database, now=now, meter=self.meter, share=share,
                                       memory=self.memory)
            self.shares.end(share, now)
            self.passes += 1
            gauges.passed(time.monotonic() - began, time.process_time() - cpu, len(self.memory),
                          len(share.held))
            return found

    def start(self):
        def loop():
            period = None
            while not self._stop.is_set():
                interval = config.setting("CDNAAS_IM_INTERVAL")
                current = math.floor(time.time() / interval)
                if period is not None and current > period + 1:
                    LOG.warning("the pass of period %d ended %d period(s) late: none missed "
                                "but the last", period, current - period)
                    gauges.PERIODS_MISSED.inc(current - period - 1)
                if period is None or current == period:  # wait for the next period
                    if self._stop.wait((current + 1) * interval - time.time()):
                        break
                    current += 1
                period = current
                try:
                    self.run_once()
                except Exception:  # a peer may be down; the next pass retries
                    LOG.exception("reconcile pass failed")
        threading.Thread(target=loop, name="im-reconcile", daemon=True).start()

    def stop(self):
        self._stop.set()
        self.leadership.resign()
        with self._lock:
            self.shares.leave()
