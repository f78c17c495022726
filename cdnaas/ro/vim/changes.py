"""What an update changes of a deployment: worked out once, then applied step by step.

Every driver's :meth:`~cdnaas.ro.vim.base.VimDriver.update` starts from the same
questions (which regions and VNFs come, stay and go; must the caches be reconfigured;
do the served names or the certificate change); :func:`sig_change` answers them from
the deployment as built, the SIG it served and the new SIG, by name, so drivers only
apply the answer (their flows, :mod:`cdnaas.ro.vim.pipeline`).
"""
import dataclasses

from cdnaas import delivery
from cdnaas.common.sig import ServiceInstanceGraph, Vnf
from cdnaas.ro.vim.base import Deployment, VnfInstance, tls_ref
from cdnaas.vnf.balancer import served_names

#: service fields whose change a balancer must settle on: once the update is done, no new
#: connection may reach an old worker still accepting on the old config (new cache rules
#: change the key balancers hash on, a new HTTPS policy or certificate what plain HTTP
#: and TLS get)
SETTLED_FIELDS = ("cache_rules", "https_policy", "tls")


@dataclasses.dataclass
class Change:
    """The difference between a deployment and the SIG it must come to serve.

    :param added_regions: regions of the SIG the deployment lacks, in SIG order.
    :param removed_regions: regions of the deployment the SIG lacks.
    :param new: VNFs of the SIG the deployment lacks (new caches, new regions' VNFs).
    :param kept: VNFs of both, as the SIG plans them (their configuration may change).
    :param gone: VNFs of the deployment the SIG lacks (removed caches, removed regions').
    :param moved: kept VNFs the SIG puts in another region or on another host (the DNS
        VNF leaves a removed default region).
    :param relocated: those of ``moved`` the SIG puts in another region.
    :param sig: the SIG the deployment comes to serve.
    :param previous: the SIG the deployment serves, or None when it is not known (then
        neither the caches' configuration, the names nor the certificate change).
    """

    added_regions: list[str]
    removed_regions: list[str]
    new: list[Vnf]
    kept: list[Vnf]
    gone: list[VnfInstance]
    moved: list[Vnf]
    relocated: list[Vnf]
    sig: ServiceInstanceGraph
    previous: ServiceInstanceGraph | None = None

    @property
    def regions_changed(self):
        return bool(self.added_regions or self.removed_regions)

    @property
    def caches_reconfigured(self):
        """Whether every cache's config changes (:func:`caches_reconfigured`)."""
        return self.previous is not None and caches_reconfigured(self.previous, self.sig)

    @property
    def renamed(self):
        """Whether the names the balancers and the DNS answer change."""
        return self.previous is not None and served_names(self.previous) != served_names(self.sig)

    @property
    def service_changed(self):
        """Whether anything of the service changes (a rotation reloads every balancer)."""
        return self.previous is not None and self.previous.service != self.sig.service

    @property
    def settles(self):
        """Whether the balancers must settle on their new config (:data:`SETTLED_FIELDS`)."""
        return self.previous is not None and any(
            self.previous.service.get(key) != self.sig.service.get(key)
            for key in SETTLED_FIELDS)

    @property
    def tls(self):
        """How HTTPS changes: ``"on"``, ``"off"``, ``"rotated"`` (another certificate), or
        None (as it was, or the previous SIG is not known)."""
        if self.previous is None:
            return None
        before, after = tls_ref(self.previous), tls_ref(self.sig)
        if before == after:
            return None
        return "on" if before is None else "off" if after is None else "rotated"

    def new_in(self, role):
        return [v for v in self.new if v.role == role]

    def kept_in(self, role):
        return [v for v in self.kept if v.role == role]


def sig_change(deployment: Deployment, sig: ServiceInstanceGraph,
               previous: ServiceInstanceGraph | None = None) -> Change:
    """What bringing ``deployment`` (serving ``previous``, where known) to ``sig`` changes
    (nothing is touched)."""
    before = set(deployment.region_endpoints)
    after = [r.name for r in sig.regions]
    old = {v.name: v for v in deployment.vnfs}
    wanted = {v.name for v in sig.vnfs}
    kept = [v for v in sig.vnfs if v.name in old]
    return Change(
        added_regions=[r for r in after if r not in before],
        removed_regions=sorted(before - set(after)),
        new=[v for v in sig.vnfs if v.name not in old],
        kept=kept,
        gone=[v for v in deployment.vnfs if v.name not in wanted],
        moved=[v for v in kept if (old[v.name].region, old[v.name].host) != (v.region, v.host)],
        relocated=[v for v in kept if old[v.name].region != v.region],
        sig=sig, previous=previous)


def caches_reconfigured(previous: ServiceInstanceGraph, sig: ServiceInstanceGraph) -> bool:
    """Whether going from ``previous`` to ``sig`` changes what every cache's config says:
    the origin, the cache rules or a delivery option caches render."""
    return (previous.origin != sig.origin
            or previous.service.get("cache_rules") != sig.service.get("cache_rules")
            or delivery.reconfigures(previous.service, sig.service, "cache"))
