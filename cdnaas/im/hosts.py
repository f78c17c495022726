"""Host power actions: switching off hosts that carry nothing and are not needed, and waking
them before they are.

The IM decides; RO acts (``POST /ro/v1/hosts/{host}/power``, through the host power
driver ``CDNAAS_POWER_DRIVER``: RO is the only part that reaches infrastructure); SO
stops placing on a host while it is off (the IM sets the host ``enabled: false`` before
switching it off, and ``true`` again once it is on, or at once when the driver only
recorded the action: a host that stays on keeps taking VNFs). Each pass, per region:

- **capacity**: the vCPUs of the region's hosts that are on, less free pieces smaller
  than its biggest cache (they hold no cache);
- **demand**: the vCPUs the region's VNFs need now: everything reserved on its hosts,
  less the *surplus* of the vCDNs observed (cache vCPUs beyond what holds the viewers
  at the policy's scale-out level, :func:`cdnaas.im.reconcile.region_needs`), plus
  the cache vCPUs they lack: a surplus cache does not keep a host on, a lacking one
  does;
- **headroom**: spare vCPUs kept on hosts that are on (:func:`headroom`): a share of
  the demand (``CDNAAS_IM_HEADROOM_SHARE``, default 0.12), at least
  ``CDNAAS_IM_HEADROOM_VCPUS`` (default 0; when set, at least the region's biggest
  cache), plus the vCPUs a rising demand adds while a host boots
  (``CDNAAS_IM_HOST_BOOT_SECONDS``), that
  rise counting no further than the demand the vCDNs' customers declared (room beyond
  the contract is not owed);
- **wake** (``power_up``): a host that is off is switched on when a reservation or a
  VNF is on it, when a lease that needs it starts within
  ``CDNAAS_IM_WAKE_LEAD_SECONDS``, when the capacity of the hosts on falls short of
  demand + headroom (the biggest first), or when SO refused a scale out of the region
  for capacity this pass and no host of it is still booting (the free vCPUs may be
  scattered over hosts in pieces smaller than a cache);
- **hold**: while a reservation of the region was not observed this pass (a vCDN being
  changed), only a reservation, a VNF or a starting lease wakes a host, and none sleeps;
- **sleep** (``power_down``): a host is switched off when it has carried nothing for
  ``CDNAAS_IM_HOST_IDLE_PASSES`` passes (default 12: 2 minutes at 10 s), no lease
  needs it soon, and the hosts left on still hold demand + headroom with 5% to spare
  (:data:`SLEEP_BAND`: a dead band between waking and sleeping, so a demand near the
  edge does not switch a host back and forth), the demand taken at the region's
  highest viewers of those passes (``settled_vcpus``: one pass of noise below the
  edge does not switch off a host the next pass needs). Never a host with a
  reservation (SO's figures) or a VNF of any deployment (RO's): both are checked
  before, and RO checks again;
- **dwell** (``CDNAAS_IM_POWER_DWELL_SECONDS``, default 1800): a real server pays each
  power cycle in boot energy and wear, so no host changes power state twice within
  the dwell where the region can help it. A host switched on is not switched off
  before the dwell has passed: it stays on, empty or not, and counts as capacity, so
  the region does not wake another (that wait is a ``deferred`` power-down decision,
  recorded once per wait, saying until when). A host switched off is woken again
  within the dwell only when no other host of the region will do: hosts off for
  longer than the dwell are woken first, and one within it only when the region's
  capacity, a reservation, a VNF or a lease needs it (viewers before wear:
  ``details.within_dwell``). The first rule removes the flaps (a host woken for a
  rise that faded, switched off two minutes later and woken again); the headroom, the
  dead band and the sleep on the highest demand of the passes waited keep a host just
  switched off from being needed soon after.

Every action is a decision with its inputs (demand, headroom, capacity, what SO and
RO say is on the host, how long it was empty, the dwell and the host's last power
change within it, the driver's answer). Outcomes: ``applied`` (the driver changed the
infrastructure), ``recorded`` (the driver could only record it: ``log``, ``noop``),
``deferred`` (the dwell keeps the host on), ``refused`` (RO found VNFs on it),
``failed`` (retried next pass). The marks (table ``im_hosts``) say which hosts the IM
has switched off (``power_down``) and, for those on, since when they are empty.
"""
import dataclasses
import datetime as dt
import logging

from sqlalchemy import select

from cdnaas.common import config, errors
from cdnaas.common.timeutil import aware, isoformat
from cdnaas.im import decisions
from cdnaas.im.models import Action, HostMark

LOG = logging.getLogger(__name__)

POWER_DOWN = "power_down"
POWER_UP = "power_up"
ON = "on"
#: outcomes of a power decision that changed (or, for a driver that only records, would
#: have changed) the host's power
CHANGED = ("applied", "recorded")
DEFERRED = "deferred"
#: reason of an ``on`` mark of a host that carries nothing (its ``changed_at``: since when)
EMPTY = "carries nothing"
#: a host sleeps only when the hosts left on hold demand + headroom with this much more:
#: the dead band between waking and sleeping (PowerSave's hysteresis). On the day's traces
#: (benchmarks/im_trace.py) 10% kept hosts on for 0.17-0.18 kWh more and saved 6 power
#: actions a day of 19-25; the headroom, not the band, keeps viewers above target
SLEEP_BAND = 0.05


@dataclasses.dataclass(frozen=True)
class RegionNeed:
    """What one region needs of its hosts this pass (see the module docstring)."""

    demand_vcpus: float
    headroom_vcpus: float
    details: dict = dataclasses.field(default_factory=dict)
    #: some reservation of the region was not observed this pass (a vCDN being changed):
    #: only a reservation, a VNF or a starting lease wakes a host; none is switched off
    hold: bool = False
    #: vCPUs of the region's biggest cache: free vCPUs of a host in a smaller piece hold
    #: no cache, so they are no capacity
    unit_vcpus: int = 1
    #: demand + headroom at the highest viewers of the last passes a host waits before it
    #: sleeps: what the hosts left on must hold (None: demand + headroom)
    settled_vcpus: float | None = None


@dataclasses.dataclass(frozen=True)
class Change:
    """A power action on ``host`` (``state``: :data:`POWER_DOWN` or :data:`ON`), and why."""

    host: object  # cdnaas.im.inventory.Host
    state: str
    reason: str
    details: dict
    #: the dwell defers this power-down: it is recorded (``deferred``), not carried out
    deferred: bool = False


@dataclasses.dataclass(frozen=True)
class LastChange:
    """A host's latest power change (``kind``: :data:`POWER_DOWN` or :data:`POWER_UP`)
    less than the dwell ago; ``waited``: a power-down was deferred since."""

    kind: str
    at: dt.datetime
    waited: bool = False

    def view(self):
        return {"kind": self.kind, "at": isoformat(self.at)}


def headroom(demand_vcpus, biggest_cache_vcpus):
    """Spare vCPUs a region keeps on hosts that are on before any rise: a share
    (``CDNAAS_IM_HEADROOM_SHARE``) of its demand, at least ``CDNAAS_IM_HEADROOM_VCPUS``
    and, when that floor is set, its biggest cache (free pieces smaller than a cache
    hold none). A share follows the audience: a surge that must be met while a host
    boots is a share of who watches (a region of 100 caches needs more spare than one
    of a cache at night), where a fixed floor keeps a host on all night for nobody."""
    floor = config.setting("CDNAAS_IM_HEADROOM_VCPUS")
    share = config.setting("CDNAAS_IM_HEADROOM_SHARE") * demand_vcpus
    return max(share, floor, biggest_cache_vcpus if floor else 0)


def marks(session):
    """``{host name: HostMark}`` of every host ever marked."""
    return {mark.name: mark for mark in session.scalars(select(HostMark))}


def switched_off(host, mark):
    """Whether ``host`` is off: marked for power-down and disabled in SO, which
    :func:`apply` leaves it only when the power driver applied the power-down. A power
    driver that only records it (``log``, ``noop``) leaves the host on and enabled: it
    still draws power and still takes VNFs."""
    return mark is not None and mark.state == POWER_DOWN and not host.enabled


def dwell():
    """The least time between two power changes of one host
    (``CDNAAS_IM_POWER_DWELL_SECONDS``)."""
    return dt.timedelta(seconds=config.setting("CDNAAS_IM_POWER_DWELL_SECONDS"))


def last_changes(session, now):
    """``{host: LastChange}`` of the hosts whose power the IM changed (or recorded a
    change of) less than the dwell ago."""
    found = {}
    for action in session.scalars(select(Action).where(
            Action.kind.in_((POWER_DOWN, POWER_UP)), Action.outcome.in_(CHANGED + (DEFERRED,)),
            Action.host.is_not(None), Action.created_at > now - dwell()).order_by(Action.id)):
        if action.outcome != DEFERRED:
            found[action.host] = LastChange(action.kind, aware(action.created_at))
        elif action.host in found:
            found[action.host] = dataclasses.replace(found[action.host], waited=True)
    return found


def plan(inventory, marked, needed, needs, carried, now, empty_since=None, refused=None,
         waking=(), changed=None):
    """The :class:`Change` list for this pass (see the module docstring).

    :param inventory: ``{name: Host}`` from SO.
    :param marked: names of the hosts the IM has switched off.
    :param needed: ``{host name: why}`` of hosts soon needed by a starting lease.
    :param needs: ``{region: RegionNeed}``; a region not listed needs what is reserved
        on it and its headroom (:func:`headroom`).
    :param carried: ``{host name: [VNF names]}`` of every deployment RO lists.
    :param empty_since: ``{host name: when it was first seen carrying nothing}``.
    :param refused: ``{region: why}`` of regions where SO refused a scale out for capacity
        this pass (free vCPUs scattered over hosts hold no whole cache).
    :param waking: regions with a host still booting (woken within the boot time).
    :param changed: ``{host name: LastChange}`` within the dwell (:func:`last_changes`).
    """
    empty_since, refused, changed = empty_since or {}, refused or {}, changed or {}
    idle = dt.timedelta(seconds=config.setting("CDNAAS_IM_HOST_IDLE_PASSES")
                        * config.setting("CDNAAS_IM_INTERVAL"))
    rest = dwell()

    def within(host, kind):
        """Whether ``host``'s last power change, ``kind``, was less than the dwell ago."""
        last = changed.get(host.name)
        return last is not None and last.kind == kind and now - last.at < rest

    def host_facts(host):
        last = changed.get(host.name)
        return {**_host_facts(host, carried), **({"last_power_change": last.view()}
                                                 if last else {})}

    def wake(host, why, facts):
        if within(host, POWER_DOWN):  # no other host of the region will do: viewers first
            why += (f"; within the dwell of {rest.total_seconds():g} s after it was switched "
                    f"off at {isoformat(changed[host.name].at)}")
            facts = {**facts, "within_dwell": True}
        changes.append(Change(host, ON, why, {**facts, **host_facts(host)}))

    def wake_order(host):  # hosts off for longer than the dwell first, then the biggest
        return within(host, POWER_DOWN), -host.vcpus, host.name

    changes = []
    for region in sorted({h.region for h in inventory.values()}):
        # hosts the IM may act on: enabled ones, and those it disabled itself to switch off
        hosts = sorted((h for h in inventory.values() if h.region == region
                        and (h.enabled or h.name in marked)), key=lambda h: h.name)
        reserved = sum(h.reserved_vcpus for h in hosts)
        need = needs.get(region) or RegionNeed(
            reserved, headroom(reserved, 0), {"source": "reservations"}, hold=True)
        required = need.demand_vcpus + need.headroom_vcpus
        settled = max(required, need.settled_vcpus or 0.0)
        down = {h.name for h in hosts if h.name in marked}
        facts = {"region_demand_vcpus": round(need.demand_vcpus, 2),
                 "headroom_vcpus": round(need.headroom_vcpus, 2),
                 "dwell_seconds": rest.total_seconds(), **need.details}
        for host in hosts:
            if host.name in down and (host.reserved_vcpus or host.name in needed
                                      or carried.get(host.name)):
                down.discard(host.name)
                wake(host, needed.get(host.name) or (
                    f"{host.reserved_vcpus} vCPUs are reserved on it" if host.reserved_vcpus
                    else f"VNFs run on it: {', '.join(carried[host.name][:5])}"), facts)

        def usable(host, unit=max(1, need.unit_vcpus)):
            return host.vcpus - host.free_vcpus % unit  # free pieces smaller than a cache

        capacity = sum(usable(h) for h in hosts if h.name not in down)
        for host in sorted((h for h in hosts if h.name in down), key=wake_order):
            if capacity >= required or need.hold:
                break
            down.discard(host.name)
            wake(host, f"the region's hosts on hold {capacity} vCPUs, short of demand "
                 f"{need.demand_vcpus:.1f} + headroom {need.headroom_vcpus:.1f}",
                 {**facts, "capacity_on_vcpus": capacity})
            capacity += usable(host)
        if region in refused and region not in waking and \
                not any(c.state == ON and c.host.region == region for c in changes):
            host = next(iter(sorted((h for h in hosts if h.name in down), key=wake_order)),
                        None)
            if host is not None:
                down.discard(host.name)
                wake(host, f"SO refused a scale out for capacity: {refused[region]}"[:500],
                     {**facts, "capacity_on_vcpus": capacity})
                capacity += usable(host)
        for host in sorted(hosts, key=lambda h: (h.vcpus, h.name)):
            if need.hold:
                break
            since = empty_since.get(host.name)
            if (host.name in down or host.reserved_vcpus or carried.get(host.name)
                    or host.name in needed or since is None or now - since < idle
                    or capacity - usable(host) < settled * (1 + SLEEP_BAND)):
                continue
            details = {**facts, "empty_since": isoformat(since),
                       "idle_watts_saved": host.idle_watts, **host_facts(host)}
            if within(host, POWER_UP):  # it stays on and counts as capacity
                if not changed[host.name].waited:
                    until = changed[host.name].at + rest
                    changes.append(Change(
                        host, POWER_DOWN, f"carries nothing since {isoformat(since)}, but was "
                        f"switched on at {isoformat(changed[host.name].at)}: it stays on for "
                        f"the dwell of {rest.total_seconds():g} s, until {isoformat(until)}",
                        {**details, "capacity_on_vcpus": capacity,
                         "dwell_until": isoformat(until)}, deferred=True))
                continue
            capacity -= usable(host)
            down.add(host.name)
            changes.append(Change(
                host, POWER_DOWN, f"carries nothing since {isoformat(since)}; the region's "
                f"hosts left on hold {capacity} vCPUs for demand {need.demand_vcpus:.1f} + "
                f"headroom {need.headroom_vcpus:.1f}", {**details, "capacity_on_vcpus": capacity}))
    return changes


def waking(session, now, seconds):
    """Regions with a host switched on less than ``seconds`` ago (still booting)."""
    since = now - dt.timedelta(seconds=seconds)
    return set(session.scalars(select(Action.region).where(
        Action.kind == POWER_UP, Action.outcome.in_(CHANGED),
        Action.created_at > since)))


def _host_facts(host, carried):
    return {"reserved_vcpus": host.reserved_vcpus, "ro_vnfs": list(carried.get(host.name, [])),
            "host_vcpus": host.vcpus}


def track_empty(database, now, inventory, carried):
    """Note since when each host that is on carries nothing; return ``{host: since}``."""
    with database.transaction() as session:
        found = marks(session)
        since = {}
        for host in inventory.values():
            mark = found.get(host.name)
            if mark is not None and mark.state == POWER_DOWN:
                continue
            empty = not host.reserved_vcpus and not carried.get(host.name)
            if empty:
                if mark is None or mark.reason != EMPTY:
                    mark = mark or HostMark(name=host.name)
                    mark.region, mark.state, mark.reason, mark.changed_at = \
                        host.region, ON, EMPTY, now
                    session.add(mark)
                since[host.name] = aware(mark.changed_at)
            elif mark is not None and mark.reason == EMPTY:
                mark.reason, mark.changed_at = "carries VNFs", now
    return since


def apply(database, now, changes, so, ro):
    """Carry out each change through SO (placement) and RO (power); record each as a decision
    (a change the dwell defers only as a decision).

    Switching off: SO stops placing on the host first, then RO switches it off; when RO
    refuses (VNFs on it), fails or only recorded the action, the host is given back to SO.
    Switching on: RO first, then SO places on it again. With a power driver that only
    records (``log``, ``noop``), SO's placement is never touched: the host stays as the
    operator set it (enabled or not) and no placement sees it disabled for a moment.
    """
    found = [decisions.record(database, now, POWER_DOWN, DEFERRED, c.reason, c.details,
                              region=c.host.region, host=c.host.name)
             for c in changes if c.deferred]
    changes = [c for c in changes if not c.deferred]
    placement = changes and not ro.power_driver().records_only
    for change in changes:
        host = change.host
        off = change.state == POWER_DOWN
        kind = POWER_DOWN if off else POWER_UP
        details = dict(change.details)
        try:
            if off:
                if placement:
                    so.update_host(host.region, host.name, {"enabled": False})
                try:
                    answer = ro.power_host(host.name, "off", change.reason)
                except errors.CdnaasError:
                    if placement:
                        so.update_host(host.region, host.name, {"enabled": True})
                    raise
                if placement and not answer.applied:  # the host still takes VNFs
                    so.update_host(host.region, host.name, {"enabled": True})
            else:
                answer = ro.power_host(host.name, "on", change.reason)
                if placement and not host.enabled:
                    so.update_host(host.region, host.name, {"enabled": True})
        except errors.Conflict as exc:
            found.append(decisions.record(database, now, kind, "refused", change.reason,
                                          {**details, "error": exc.message},
                                          region=host.region, host=host.name))
            continue
        except errors.CdnaasError as exc:
            LOG.warning("power %s of %s failed: %s", "off" if off else "on", host.name, exc)
            found.append(decisions.record(database, now, kind, "failed", change.reason,
                                          {**details, "error": exc.message},
                                          region=host.region, host=host.name))
            continue
        with database.transaction() as session:
            mark = session.get(HostMark, host.name) or HostMark(name=host.name)
            mark.region, mark.state = host.region, change.state
            mark.reason, mark.changed_at = change.reason, now
            session.add(mark)
        details["power"] = {k: getattr(answer, k) for k in ("driver", "state", "applied", "steps")}
        found.append(decisions.record(database, now, kind,
                                      "applied" if answer.applied else "recorded",
                                      change.reason, details, region=host.region, host=host.name))
    return found
