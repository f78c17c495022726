"""A simulated vCDN for the Instance Manager: one plant answering as SO, RO and SIDR do.

:class:`Plant` holds one vCDN's SIG on in-memory hosts and a simulated
clock, and answers the calls :func:`cdnaas.im.reconcile.reconcile_once`
makes (through :attr:`Plant.so`, :attr:`Plant.ro`, :attr:`Plant.sidr`), so
the real pass, policy included, runs against it in-process: the benchmark
replays a day in a minute, tests drive surges step by step.

- **SO.** A scale request changes the SIG at once, as SO does: new caches
  are placed at the least energy cost (:func:`cdnaas.planning.placement.place`);
  removed ones come off the hosts carrying the fewest of the region's VNFs,
  the newest first. The vCDN is
  then ``UPDATING`` for the operation's time (booting ``boot_seconds`` plus
  ``register_seconds`` for the balancer; draining ``drain_seconds``), during
  which the previous caches serve and every VNF of either set draws power.
- **RO.** Figures come from the no-op driver's model (:meth:`NoopDriver.metrics`)
  fed the current viewers, on the simulated clock, with the flavor's model
  for CPU use; every VNF is healthy unless listed in :attr:`Plant.failing`.
- **Truth.** :meth:`Plant.true_mos` and :meth:`Plant.watts` are what the
  viewers get and what the hosts draw: the model's MOS at viewers per
  serving cache vCPU, and each host's power model with the technology
  overhead (:mod:`cdnaas.im.power`).
- **Host power.** With ``power_actions=False`` (the baselines' idealisation) a
  host carrying nothing is off and draws nothing, at once. With
  ``power_actions=True`` hosts are on until RO's power call
  (:meth:`_Ro.power_host`) switches them: a host switched off draws its idle power
  while it shuts down (``off_seconds``, default 30) and nothing once off; one switched
  on draws idle power while it boots (``on_seconds``, default 120) and takes VNFs
  only once up (a cache placed on it boots after it). RO refuses to switch off a
  host carrying a VNF (409), SO places only on enabled hosts, and every call is kept
  in :attr:`Plant.power_log`: the actions a real plant would have received.

Caches boot in the template technology's time (the CDNaaS paper's Table I, until
HTTP answers: ``vm`` 11.5 s, ``container`` 1.13 s), plus ``register_seconds`` for
the balancer.
"""
import collections
import dataclasses
import datetime as dt
import itertools

from cdnaas.common import answers, errors
from cdnaas.common.flavor import HostCapacity, InsufficientCapacity
from cdnaas.common.timeutil import isoformat
from cdnaas.im import power
from cdnaas.planning import resizing
from cdnaas.planning.placement import Instance, place
from cdnaas.ro.vim.base import Deployment, EntryPoint, VnfInstance
from cdnaas.ro.vim.noop import NoopDriver

_PLANTS = itertools.count(1)
#: seconds from start to HTTP answering, per technology (CDNaaS paper, Table I)
BOOT_SECONDS = {"vm": 11.5, "container": 1.13}
#: the plant counts vCPUs only; RAM never runs short
UNBOUNDED_RAM = 10 ** 9


@dataclasses.dataclass
class SimHost:
    """A host of the plant (as SO registers it)."""

    name: str
    region: str
    vcpus: int
    idle_watts: float = 115.0
    peak_watts: float = 269.0


class Plant:
    """One vCDN (``sig``, a :class:`ServiceInstanceGraph`) on ``hosts``, at a simulated time.

    :param template: the flavor's service template (bounds, technology).
    :param model: the flavor's :class:`~cdnaas.planning.models.Model`.
    :param start: the simulated clock's first time (aware UTC).
    """

    def __init__(self, template, model, sig, hosts, start, boot_seconds=None,
                 register_seconds=1.5, drain_seconds=10.0, power_actions=False,
                 off_seconds=30.0, on_seconds=120.0):
        self.template, self.model = template, model
        if boot_seconds is None:
            boot_seconds = BOOT_SECONDS.get(template.get("technology"), BOOT_SECONDS["vm"])
        self.power_actions = power_actions
        self.power_times = {"off": off_seconds, "on": on_seconds}
        self.power = {h.name: "on" for h in hosts}  # on | stopping | off | booting
        self._power_until = {}
        self.enabled = {h.name: True for h in hosts}
        self.power_log = []
        self.events = []  # what the IM reported to SO's webhook outbox: (type, vcdn id, data)
        self.sig = sig
        self.serving = sig  # what serves while an operation runs
        self.hosts = {h.name: h for h in hosts}
        self.now = start
        self.viewers = {r.name: 0.0 for r in sig.regions}
        self.failing = set()
        self.operations = 0
        self._done_at = None
        self._times = (boot_seconds, register_seconds, drain_seconds)
        self._ids = itertools.count(1)
        self._resource_ids = {}
        self.driver = NoopDriver(load=lambda _id: dict(self.viewers),
                                 clock=lambda: self.now.timestamp(),
                                 utilisation=self._utilisation)
        self.so, self.ro, self.sidr = _So(self), _Ro(self), _Sidr(self)

    # -- time and load ------------------------------------------------------------------------

    def advance(self, now, viewers):
        """Move the clock to ``now`` with ``viewers`` per region; finish a due operation."""
        self.now = now
        self.viewers.update(viewers)
        for name, until in list(self._power_until.items()):
            if now >= until:
                self.power[name] = {"stopping": "off", "booting": "on"}[self.power[name]]
                del self._power_until[name]
        if self._done_at is not None and now >= self._done_at:
            self.serving, self._done_at = self.sig, None

    @property
    def busy(self):
        return self._done_at is not None

    # -- SO semantics ------------------------------------------------------------------------

    def scale(self, region, caches, reason):
        """SO's scale: see the module docstring. :raises Conflict/Unprocessable: as SO."""
        if self.busy:
            raise errors.Conflict(f"vCDN {self.sig.vcdn_id} is UPDATING", field="vcdn_id")
        sig = dataclasses.replace(self.sig, vnfs=list(self.sig.vnfs))
        new = resizing.resize(sig, region, caches, self.template["vnfs"]["cache"]["instances"])
        seconds = self._times[2]
        if new:
            try:
                placed = place(region, [Instance(v.name, v.vcpus, v.ram_mb) for v in new],
                               self.free(region), anchors=resizing.anchors(sig.vnfs_in(region)))
            except InsufficientCapacity as exc:
                raise errors.Conflict(f"not enough capacity: region {region} lacks "
                                      f"{exc.missing_vcpus} vCPUs", field="caches") from None
            sig.vnfs = [dataclasses.replace(v, host=placed[v.name]) if v.name in placed else v
                        for v in sig.vnfs]
            ready = max([(self._power_until[h] - self.now).total_seconds()
                         for h in set(placed.values()) if self.power[h] == "booting"] or [0.0])
            seconds = ready + self._times[0] + self._times[1]
        return self._operation(sig, seconds, reason)

    def heal(self, vnf_name, reason, in_place=False):
        """SO's heal: the cache is replaced by a new one of a new name on the same host,
        unless healed ``in_place``."""
        if self.busy:
            raise errors.Conflict(f"vCDN {self.sig.vcdn_id} is UPDATING", field="vcdn_id")
        sig = dataclasses.replace(self.sig, vnfs=list(self.sig.vnfs))
        if not in_place:
            resizing.replace(sig, vnf_name)
        self.failing.discard(vnf_name)
        return self._operation(sig, self._times[0] + self._times[1], reason)

    def _operation(self, sig, seconds, reason):
        self.serving, self.sig = self.sig, sig
        self._done_at = self.now + dt.timedelta(seconds=seconds)
        self.operations += 1
        return {"vcdn": self.view(), "operation": {"id": f"op-{self.operations}",
                                                   "reason": reason}}

    def free(self, region):
        """Free capacity of the region's hosts as SO computes it (the SIG's reservations)."""
        taken = self.reserved()
        return [HostCapacity(name=h.name, free_vcpus=h.vcpus - taken[h.name],
                             free_ram_mb=UNBOUNDED_RAM, vcpus=h.vcpus, ram_mb=UNBOUNDED_RAM,
                             idle_watts=h.idle_watts, peak_watts=h.peak_watts)
                for h in sorted(self.hosts.values(), key=lambda h: h.name)
                if h.region == region and self.enabled[h.name]]

    def reserved(self):
        taken = collections.Counter({name: 0 for name in self.hosts})
        for vnf in self.sig.vnfs:
            taken[vnf.host] += vnf.vcpus
        return taken

    def view(self):
        """The vCDN as SO's instance view shows it."""
        return {"id": self.sig.vcdn_id, "flavor": self.sig.flavor,
                "template_version": self.sig.template_version,
                "state": "UPDATING" if self.busy else "ACTIVE",
                "lease": {"start": isoformat(self.now - dt.timedelta(days=1)),
                          "end": isoformat(self.now + dt.timedelta(days=365))},
                "regions": [{"name": r.name, "demand": r.demand, "quality": r.quality,
                             "caches": len(self.sig.vnfs_in(r.name, "cache"))}
                            for r in self.sig.regions]}

    # -- RO semantics and the truth ----------------------------------------------------------

    def deployment(self):
        """The serving VNFs as the no-op driver would have built them."""
        vnfs = [VnfInstance(name=v.name, role=v.role, region=v.region, host=v.host,
                            address="198.18.0.1", resource_id=self._resource_id(v.name),
                            vcpus=v.vcpus) for v in self.serving.vnfs]
        return Deployment(deployment_id=self.sig.vcdn_id, driver="noop", vnfs=vnfs,
                          entry_point=EntryPoint(self.sig.hostname, []), region_endpoints={})

    def _resource_id(self, name):
        return self._resource_ids.setdefault(name, f"{self.sig.vcdn_id}-{next(self._ids)}")

    def _utilisation(self, viewers, vcpus):
        return self.model.utilisation(viewers, vcpus) if viewers else 0.0

    def cache_vcpus(self, region):
        return sum(v.vcpus for v in self.serving.vnfs_in(region, "cache"))

    def true_mos(self, region):
        """The MOS the region's viewers get now (no smoothing)."""
        vcpus = self.cache_vcpus(region)
        return self.model.mos(self.viewers[region] / vcpus) if vcpus else 1.0

    def cache_utilisation(self, region):
        """Mean busy share of the region's serving caches (what a CPU meter reports)."""
        vcpus = self.cache_vcpus(region)
        return self._utilisation(self.viewers[region], vcpus) if vcpus else 0.0

    def watts(self):
        """``{host: watts}`` of the hosts carrying a VNF, serving or in an operation."""
        running = {v.name: v for v in self.serving.vnfs + self.sig.vnfs}
        serving = {v.name for v in self.serving.vnfs}
        busy = collections.Counter()
        on = set()
        overhead = power.OVERHEAD.get(self.template["technology"], 1.0)
        for vnf in running.values():
            on.add(vnf.host)
            if vnf.name not in serving or vnf.role == "dns":
                continue
            region_viewers = self.viewers[vnf.region]
            held = (region_viewers * vnf.vcpus / self.cache_vcpus(vnf.region)
                    if vnf.role == "cache" else region_viewers)
            busy[vnf.host] += self._utilisation(held, vnf.vcpus) * vnf.vcpus * overhead
        if self.power_actions:
            on = {name for name, state in self.power.items() if state != "off"}
        return {name: power.modelled_watts(self.hosts[name].idle_watts,
                                           self.hosts[name].peak_watts,
                                           min(1.0, busy[name] / self.hosts[name].vcpus))
                for name in on}

    def carried(self, host):
        """Names of the VNFs on ``host``, serving or in an operation."""
        return sorted({v.name for v in self.serving.vnfs + self.sig.vnfs if v.host == host})

    def switch(self, host, action, reason):
        """RO's power call on the plant (see the module docstring)."""
        if host not in self.hosts:
            raise errors.NotFound(f"no host {host}", field="host")
        if action == "off" and self.carried(host):
            raise errors.Conflict(f"host {host} carries {', '.join(self.carried(host))}",
                                  field="host")
        state = self.power[host]
        if action == "off" and state in ("on", "booting"):
            self.power[host] = "stopping"
        elif action == "on" and state in ("off", "stopping"):
            self.power[host] = "booting"
        else:
            return {"host": host, "action": action, "state": action, "applied": True,
                    "steps": [f"{host} already {action}"], "driver": "plant"}
        self._power_until[host] = self.now + dt.timedelta(seconds=self.power_times[action])
        self.power_log.append((self.now, host, action, reason))
        return {"host": host, "action": action, "state": action, "applied": True,
                "steps": [f"{host} switched {action}"], "driver": "plant"}


class _So:
    """The plant seen as the Service Orchestrator's JSON API."""

    def __init__(self, plant):
        self.plant = plant

    def instances(self, state=None, brief=False):  # pylint: disable=unused-argument
        view = self.plant.view()
        return [answers.from_json(answers.Instance, view)] if state in (None, view["state"]) else []

    def regions(self):
        return answers.many(answers.Region, [{"name": r} for r in sorted(
            {h.region for h in self.plant.hosts.values()})])

    def hosts(self, region):
        taken = self.plant.reserved()
        return answers.many(answers.Host, [{"name": h.name, "region": h.region, "vcpus": h.vcpus,
                 "reserved_vcpus": taken[h.name], "idle_watts": h.idle_watts,
                 "peak_watts": h.peak_watts, "enabled": self.plant.enabled[h.name]}
                for h in self.plant.hosts.values() if h.region == region])

    def update_host(self, _region, host, body):
        if "enabled" in body:
            self.plant.enabled[host] = body["enabled"]
        return {"name": host, **body}

    def scale(self, _instance_id, region, caches, reason=None):
        return answers.from_json(answers.Accepted, self.plant.scale(region, caches, reason))

    def heal(self, _instance_id, vnf, reason=None, in_place=False):
        return answers.from_json(answers.Accepted, self.plant.heal(vnf, reason, in_place))

    def emit_event(self, kind, vcdn_id, data, dedupe_key=None):  # pylint: disable=unused-argument
        self.plant.events.append((kind, vcdn_id, data))
        return {"deliveries": 0}


class _Ro:
    """The plant seen as the Resource Orchestrator's JSON API."""

    def __init__(self, plant):
        self.plant = plant

    def readings(self, deployment_id, cursor=None):
        metrics = [dataclasses.asdict(m)
                   for m in self.plant.driver.metrics(self.plant.deployment())]
        health = [{"name": v.name, "role": v.role, "region": v.region,
                   "healthy": v.name not in self.plant.failing, "detail": ""}
                  for v in self.plant.serving.vnfs]
        return answers.from_json(answers.Readings, {
            "id": deployment_id, "health": {"healthy": not self.plant.failing, "vnfs": health},
            "metrics": {"id": deployment_id, "vnfs": metrics},
            "traffic": {"id": deployment_id, "cursor": cursor or "", "more": False,
                        "regions": []},
            "traffic_error": None})

    def readings_many(self, asked):
        return [self.readings(entry["id"], entry.get("cursor")) for entry in asked]

    def traffic(self, deployment_id, cursor=None):  # requests are not simulated one by one
        return self.readings(deployment_id, cursor).traffic

    def placement(self):  # the one vCDN's VNFs, serving and planned
        carried = {}
        for vnf in {v.name: v for v in self.plant.serving.vnfs + self.plant.sig.vnfs}.values():
            if vnf.host:
                carried.setdefault(vnf.host, []).append(
                    f"{self.plant.sig.vcdn_id}/{vnf.name}")
        return carried

    def power_driver(self):
        return answers.PowerDriver(driver="plant", records_only=False)

    def power_host(self, host, action, reason=None):
        return answers.from_json(answers.PowerAction, self.plant.switch(host, action, reason))


class _Sidr:
    """The plant seen as SIDR: it stores the one template."""

    def __init__(self, plant):
        self.plant = plant
        self.base_url = f"simulation:{next(_PLANTS)}"  # flavors are cached per SIDR

    def get_template(self, flavor, version):
        template = self.plant.template
        return answers.Template(flavor=flavor, version=version,
                                description=template.get("description", ""),
                                technology=template.get("technology", "vm"),
                                plugin=template.get("plugin", ""), deprecated=False,
                                document=template)
