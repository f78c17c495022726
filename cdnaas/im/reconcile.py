"""One idempotent pass over the active vCDNs, and the loop that schedules it.

Like Octavia's health manager, :func:`reconcile_once` looks at every ACTIVE
vCDN and, through the Service Orchestrator (changes) and the Resource
Orchestrator (the only component that reaches VNFs):

1. ends the vCDNs whose lease has passed;
2. reads each VNF's counters and health (RO), turns them into rates, the
   QoE estimate and each VNF's share of its host's power (RAPL where this
   machine has it, the host's power model otherwise), and appends the
   points of every cache, region, vCDN and host to the time series;
3. replaces caches failing their health checks (:mod:`cdnaas.im.healing`);
4. asks the flavor's policy hook what to scale and carries out the most
   urgent decision through SO;
5. marks empty hosts for power-down, or lifts marks (:mod:`cdnaas.im.hosts`);
6. publishes the Prometheus gauges and drops points past their retention.

Every change is an SO operation, recorded as a decision with the figures
that caused it. Running it twice in a row changes nothing the second time
that the first did not: a vCDN being changed is no longer ACTIVE, counters
restart after each change, and health is recorded only when it changes. The
clock is a parameter, so tests and the benchmark drive it.
"""
import dataclasses
import datetime as dt
import logging
import threading

from sqlalchemy import select

from cdnaas.common import clock, config, errors
from cdnaas.common.clients import RoClient, SidrClient, SoClient
from cdnaas.common.timeutil import isoformat, parse
from cdnaas.im import (decisions, figures, flavors, gauges, healing, hosts, inventory, monitoring,
                       policy_hook, power, series)
from cdnaas.im.models import Action
from cdnaas.im.rapl import RaplMeter

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class Seen:
    """One ACTIVE vCDN as this pass read it."""

    vcdn: dict
    flavor: flavors.Flavor
    model: object
    readings: list
    previous: dict
    points: list = dataclasses.field(default_factory=list)


def reconcile_once(database, now=None, so=None, ro=None, sidr=None, meter=None):
    """One pass at ``now`` (default: the services' clock); return the decisions it recorded.

    :param so: :class:`SoClient`-like, ``ro``: :class:`RoClient`-like, ``sidr``:
        :class:`SidrClient`-like (defaults: the configured services).
    :param meter: a :class:`~cdnaas.im.rapl.RaplMeter` for this machine's power, if any.
    """
    now = now or clock.now()
    so, ro, sidr = so or SoClient(), ro or RoClient(), sidr or SidrClient()
    recorded, seen = [], []
    for vcdn in so.get("/so/v1/instances", params={"state": "ACTIVE"})["vcdns"]:
        try:
            if parse(vcdn["lease"]["end"]) <= now:
                recorded.append(_end_lease(database, so, vcdn, now))
                continue
            observed, health = _observe(database, ro, sidr, vcdn, now)
            seen.append(observed)
            if health:
                recorded.append(health)
        except (errors.CdnaasError, LookupError) as exc:  # one vCDN must not stop the pass
            LOG.warning("reconcile of %s failed: %s", vcdn["id"], exc)
            recorded.append(decisions.record(database, now, "reconcile", "error", str(exc), {},
                                             vcdn_id=vcdn["id"]))
    hosts_now = inventory.hosts(so)
    measured = {}
    if meter is not None and (watts := meter.watts()) is not None:
        measured[meter.host] = watts
    host_points, host_power = _power(database, seen, hosts_now, measured, now)
    with database.transaction() as session:
        series.write(session, now, [p for s in seen for p in s.points] + host_points)
        series.purge(session, now)
    for observed in seen:
        recorded += _act(database, so, now, observed, hosts_now, host_power)
    marks, marked = _mark_hosts(database, so, now, hosts_now, seen)
    gauges.publish([p for s in seen for p in s.points if p["scope"] in ("vcdn", "region")],
                   [(p["key"], hosts_now[p["key"]].region, p) for p in host_points], marked)
    return recorded + marks


# -- reading ------------------------------------------------------------------------------------

def _observe(database, ro, sidr, vcdn, now):
    """Read one vCDN; return its :class:`Seen` and the health decision, if health changed."""
    flavor = flavors.of(vcdn, sidr)
    health = ro.health(vcdn["id"])
    changed = _health_change(database, vcdn, health, now)
    with database.sessions() as session:
        previous = series.previous(session, vcdn["id"])
    by_name = {key: row for (scope, key), row in previous.items() if scope in ("cache", "vnf")}
    readings = monitoring.readings(monitoring.fetch(ro, vcdn["id"]),
                                   {v["name"]: v["healthy"] for v in health["vnfs"]}, by_name)
    return Seen(vcdn=vcdn, flavor=flavor, model=flavor.model(), readings=readings,
                previous=previous), changed


def _health_change(database, vcdn, health, now):
    unhealthy = [v["name"] for v in health["vnfs"] if not v["healthy"]]
    status = "unhealthy" if unhealthy else "healthy"
    with database.sessions() as session:
        last = session.scalar(select(Action).where(Action.instance_id == vcdn["id"],
                                                   Action.kind == "health")
                              .order_by(Action.id.desc()).limit(1))
    if last is not None and last.outcome == status and \
            last.details.get("unhealthy", []) == unhealthy:
        return None  # nothing changed since the last pass
    reason = f"{len(unhealthy)} VNF(s) failing health checks" if unhealthy \
        else "every VNF answers"
    return decisions.record(database, now, "health", status, reason,
                            {"unhealthy": unhealthy, "vnfs": health["vnfs"]}, vcdn_id=vcdn["id"])


def _power(database, seen, hosts_now, measured, now):
    """Each host's power and each VNF's share; fills every ``Seen.points``.

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
    host_power, host_points = {}, []
    for name, host in sorted(hosts_now.items()):
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

def _act(database, so, now, observed, hosts_now, host_power):
    """Heal first; otherwise carry out the policy's most urgent decision. Return what was recorded."""
    vcdn_id = observed.vcdn["id"]
    healed = healing.heal(database, so, now, observed)
    if healed:
        return [healed]
    try:
        chosen = policy_hook.decisions_for(database, now, observed, hosts_now, host_power)
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
        body = {"region": decision.region, "caches": decision.caches,
                "reason": decision.reason[:200]}
        return [decisions.through_so(
            database, now, vcdn_id, decision.kind,
            lambda b=body: so.post(f"/so/v1/instances/{vcdn_id}/scale", json=b),
            decision.reason, {**decision.inputs, "target_caches": decision.caches},
            region=decision.region)]
    return []


def _end_lease(database, so, vcdn, now):
    details = {"lease_end": vcdn["lease"]["end"], "now": isoformat(now)}
    return decisions.through_so(
        database, now, vcdn["id"], "terminate",
        lambda: so.delete(f"/so/v1/instances/{vcdn['id']}", params={"reason": "lease expired"}),
        f"lease ended at {vcdn['lease']['end']}", details)


def _mark_hosts(database, so, now, hosts_now, seen):
    """Set this pass's power-down marks; return their decisions and how many hosts are marked."""
    with database.sessions() as session:
        marked = {n for n, m in hosts.marks(session).items() if m.state == hosts.POWER_DOWN}
    changes = hosts.plan(hosts_now, marked, _soon_needed(so, now), _cache_sizes(seen))
    marked |= {c.host.name for c in changes if c.state == hosts.POWER_DOWN}
    marked -= {c.host.name for c in changes if c.state == hosts.ON}
    return hosts.apply(database, now, changes), len(marked)


def _soon_needed(so, now):
    """``{host: why}`` of hosts holding VNFs of vCDNs whose lease starts within the wake lead."""
    lead = dt.timedelta(seconds=config.float_setting("CDNAAS_IM_WAKE_LEAD_SECONDS", 600))
    needed = {}
    for vcdn in so.get("/so/v1/instances", params={"state": "SCHEDULED"})["vcdns"]:
        if parse(vcdn["lease"]["start"]) <= now + lead:
            sig = so.get(f"/so/v1/instances/{vcdn['id']}/sig")
            for vnf in sig["vnfs"]:
                needed.setdefault(vnf["host"], f"vCDN {vcdn['id']} starts at "
                                               f"{vcdn['lease']['start']}")
    return needed


def _cache_sizes(seen):
    sizes = {}
    for observed in seen:
        for reading in observed.readings:
            if reading.role == "cache":
                sizes[reading.region] = max(sizes.get(reading.region, 0), reading.vcpus)
    return sizes


class ReconcileLoop:
    """Runs :func:`reconcile_once` every ``CDNAAS_IM_INTERVAL`` seconds in a thread, on the
    services' clock (:mod:`cdnaas.common.clock`)."""

    def __init__(self, database):
        self.database = database
        self.meter = RaplMeter()
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def run_once(self):
        """One pass, never two at once (the loop and ``POST /im/v1/reconcile`` share it)."""
        with self._lock:
            return reconcile_once(self.database, meter=self.meter)

    def start(self):
        def loop():
            while not self._stop.wait(config.float_setting("CDNAAS_IM_INTERVAL", 10.0)):
                try:
                    self.run_once()
                except Exception:  # a peer may be down; the next pass retries
                    LOG.exception("reconcile pass failed")
        threading.Thread(target=loop, name="im-reconcile", daemon=True).start()

    def stop(self):
        self._stop.set()
