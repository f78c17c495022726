"""What an update changes of a deployment: worked out once, then applied step by step.

Every driver's :meth:`~cdnaas.ro.vim.base.VimDriver.update` starts from the same
question (which regions and VNFs come, stay and go); :func:`sig_change` answers it
from the deployment as built and the new SIG, by name, so drivers only apply it.
"""
import dataclasses

from cdnaas import delivery
from cdnaas.common.sig import ServiceInstanceGraph, Vnf
from cdnaas.ro.vim.base import Deployment, VnfInstance


@dataclasses.dataclass
class SigChange:
    """The difference between a deployment and the SIG it must come to serve.

    :param added_regions: regions of the SIG the deployment lacks, in SIG order.
    :param removed_regions: regions of the deployment the SIG lacks.
    :param new: VNFs of the SIG the deployment lacks (new caches, new regions' VNFs).
    :param kept: VNFs of both, as the SIG plans them (their configuration may change).
    :param gone: VNFs of the deployment the SIG lacks (removed caches, removed regions').
    :param moved: kept VNFs the SIG puts in another region or on another host (the DNS
        VNF leaves a removed default region).
    """

    added_regions: list[str]
    removed_regions: list[str]
    new: list[Vnf]
    kept: list[Vnf]
    gone: list[VnfInstance]
    moved: list[Vnf]

    @property
    def regions_changed(self):
        return bool(self.added_regions or self.removed_regions)

    def new_in(self, role):
        return [v for v in self.new if v.role == role]

    def kept_in(self, role):
        return [v for v in self.kept if v.role == role]


def sig_change(deployment: Deployment, sig: ServiceInstanceGraph) -> SigChange:
    """What bringing ``deployment`` to ``sig`` changes (nothing is touched)."""
    before = set(deployment.region_endpoints)
    after = [r.name for r in sig.regions]
    old = {v.name: v for v in deployment.vnfs}
    wanted = {v.name for v in sig.vnfs}
    kept = [v for v in sig.vnfs if v.name in old]
    return SigChange(
        added_regions=[r for r in after if r not in before],
        removed_regions=sorted(before - set(after)),
        new=[v for v in sig.vnfs if v.name not in old],
        kept=kept,
        gone=[v for v in deployment.vnfs if v.name not in wanted],
        moved=[v for v in kept if (old[v.name].region, old[v.name].host) != (v.region, v.host)])


def caches_reconfigured(previous: ServiceInstanceGraph, sig: ServiceInstanceGraph) -> bool:
    """Whether going from ``previous`` to ``sig`` changes what every cache's config says:
    the origin, the cache rules or a delivery option caches render."""
    return (previous.origin != sig.origin
            or previous.service.get("cache_rules") != sig.service.get("cache_rules")
            or delivery.reconfigures(previous.service, sig.service, "cache"))
