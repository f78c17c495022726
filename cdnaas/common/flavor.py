"""The flavor plugin interface: one plugin per vCDN flavor, hooks for SO, RO and IM.

Plugins are declared as entry points in the ``cdnaas.flavors`` group, usually by a
package of their own (``docs/flavor-plugins.md``); the flavor's service template
(in SIDR) names its plugin and the config templates of each VNF role.
"""
import abc
import dataclasses
import inspect
import pathlib

from cdnaas.common.sig import RegionPlan, ServiceInstanceGraph, Vnf


def template_vnfs(template, role, region, prefix, count=None, vcpus=None) -> list[Vnf]:
    """``count`` (default the template's ``instances.min``) unplaced VNFs of ``role`` in
    ``region``, named ``<prefix>-<i>``, with ``vcpus`` (default ``vcpus.min``) and the
    type's ``ram_mb.min``, image and config templates."""
    spec = template["vnfs"][role]
    return [Vnf(name=f"{prefix}-{index}", role=role, region=region, host=None,
                vcpus=vcpus or spec["vcpus"]["min"], ram_mb=spec["ram_mb"]["min"],
                image=spec["image"], config_templates=list(spec["config_templates"]))
            for index in range(spec["instances"]["min"] if count is None else count)]


def vcdn_vnfs(template, region) -> list[Vnf]:
    """The VNFs a vCDN has once, all in its default ``region``: its DNS VNF(s) and, where
    the template has one, its origin shield (``shield-0``)."""
    vnfs = template_vnfs(template, "dns", region, "dns")
    if "shield" in template["vnfs"]:
        vnfs += template_vnfs(template, "shield", region, "shield")
    return vnfs


@dataclasses.dataclass
class HostCapacity:
    """A host of a region and what is still free on it for the request's window."""

    name: str
    free_vcpus: int
    free_ram_mb: int
    vcpus: int
    ram_mb: int
    idle_watts: float
    peak_watts: float


@dataclasses.dataclass
class RegionRequest:
    """What the customer asks of one region, with the region's facts and free hosts."""

    name: str
    demand: int
    quality: dict
    zone: str | None
    vim_region: str | None
    client_prefixes: list[str]
    hosts: list[HostCapacity]


@dataclasses.dataclass
class PlanRequest:
    """Everything a plugin needs to plan a vCDN."""

    vcdn_id: str
    hostname: str
    origin: "cdnaas.common.sig.Origin"  # noqa: F821 - documented type
    regions: list[RegionRequest]
    default_region: str
    template: dict
    #: the customer's service options, copied into the SIG as they are (see
    #: :attr:`cdnaas.common.sig.ServiceInstanceGraph.service`)
    service: dict = dataclasses.field(default_factory=dict)

    def graph(self, vnfs) -> ServiceInstanceGraph:
        """The SIG of this request made of the placed ``vnfs``, serving :attr:`service`
        and the template's ``slice_size`` (where it says one)."""
        service = dict(self.service)
        if "slice_size" in self.template:
            service["slice_size"] = self.template["slice_size"]
        return ServiceInstanceGraph(
            vcdn_id=self.vcdn_id, flavor=self.template["flavor"],
            template_version=self.template["version"], hostname=self.hostname,
            origin=self.origin, default_region=self.default_region,
            regions=[RegionPlan(name=r.name, zone=r.zone, vim_region=r.vim_region,
                                client_prefixes=list(r.client_prefixes), demand=r.demand,
                                quality=dict(r.quality)) for r in self.regions],
            vnfs=list(vnfs), service=service, plugin=self.template.get("plugin"))


class InsufficientCapacity(Exception):
    """A region cannot hold the plan: ``missing_vcpus`` more would be needed."""

    def __init__(self, region, missing_vcpus, needed_vcpus):
        super().__init__(f"region {region} lacks {missing_vcpus} vCPUs "
                         f"(the plan needs {needed_vcpus})")
        self.region = region
        self.missing_vcpus = missing_vcpus
        self.needed_vcpus = needed_vcpus


class FlavorPlugin(abc.ABC):
    """Flavor-specific logic, called by SO (plan), RO (boot config) and IM (policy)."""

    #: entry-point name of the plugin
    name = None
    #: whether the plugin sizes or watches vCDNs with the performance model its template
    #: names (``cdnaas calibrate`` warns when a calibration's model would go unused)
    uses_model = False

    @abc.abstractmethod
    def plan(self, request: PlanRequest) -> ServiceInstanceGraph:
        """SO hook: size and place the vCDN's VNFs; return its SIG.

        :raises InsufficientCapacity: a region's free hosts cannot hold the plan.
        """

    def quote(self, request: PlanRequest) -> dict:
        """SO hook: what :meth:`plan` would reserve, with power, reserving nothing.

        The default describes the plan itself (no quality prediction) and
        estimates its power with every VNF fully busy: idle watts of each host
        the plan powers on, plus ``(peak - idle) / host vCPUs`` per VNF vCPU.

        :returns: ``{"flavor", "vcpus", "power_watts", "regions": [{"name",
            "demand", "caches", "cache_vcpus", "instances", "vcpus", "hosts",
            "hosts_powered_on", "predicted_mos", "power_watts"}]}``; ``vcpus`` counts
            every VNF (caches, balancer, DNS), ``cache_vcpus`` the caches only.
        :raises InsufficientCapacity: as :meth:`plan`.
        """
        sig = self.plan(request)
        regions = []
        for region in request.regions:
            vnfs = sig.vnfs_in(region.name)
            hosts = {h.name: h for h in region.hosts}
            used = sorted({v.host for v in vnfs})
            newly_on = [h for h in used if hosts[h].free_vcpus == hosts[h].vcpus]
            watts = sum(hosts[h].idle_watts for h in newly_on) + sum(
                (hosts[v.host].peak_watts - hosts[v.host].idle_watts) / hosts[v.host].vcpus
                * v.vcpus for v in vnfs)
            caches = sig.vnfs_in(region.name, "cache")
            regions.append({"name": region.name, "demand": region.demand,
                            "caches": len(caches), "cache_vcpus": sum(c.vcpus for c in caches),
                            "instances": len(vnfs), "vcpus": sum(v.vcpus for v in vnfs),
                            "hosts": used, "hosts_powered_on": newly_on,
                            "predicted_mos": None, "power_watts": round(watts, 1)})
        return {"flavor": sig.flavor, "vcpus": sum(r["vcpus"] for r in regions),
                "power_watts": round(sum(r["power_watts"] for r in regions), 1),
                "regions": regions}

    def boot_config(self, vnf, sig: ServiceInstanceGraph) -> dict:
        """RO hook: extra variables for ``vnf``'s config templates (none by default).

        Called by RO for every VNF it configures (and by SIDR on a sample VNF when the
        template is registered). The variables join the ones every template gets
        (:func:`cdnaas.vnf.cache.cache_config` and its siblings) and may not replace
        them; each name is ``[a-z][a-z0-9_]*`` and each value a bool, an int, a string
        of ``A-Z a-z 0-9 _ . : / + , = -`` (nothing that could end an nginx or dnsmasq
        directive) or a list of those. Anything else refuses the VNF's configuration.
        """
        return {}

    def templates_folder(self) -> pathlib.Path:
        """Where this flavor's own config templates are: ``templates/`` beside the module
        that defines the plugin class. A template name is looked up there first, then in
        the project's ``templates/``, so a flavor template can ``{% include %}`` the
        project's shared pieces (``nginx-management.conf.j2``...)."""
        return pathlib.Path(inspect.getfile(type(self))).resolve().parent / "templates"

    def policy(self, observation) -> list:
        """IM hook: actions to take for a running vCDN (none by default: unelastic)."""
        return []
