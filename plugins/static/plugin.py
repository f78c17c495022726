"""The ``static`` flavor: the paper's simple unelastic vCDN.

Every requested region gets the fixed number of caches its template states
(``instances.min``), each with the template's minimum vCPUs and RAM, plus one
load balancer; the vCDN gets its DNS VNF(s), and its origin shield where the
template has one, in its default region. Demand and
quality are recorded but do not change the size, and the Instance Manager has
no elasticity policy for it.
"""
from cdnaas.common.flavor import FlavorPlugin, PlanRequest, template_vnfs, vcdn_vnfs
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.planning.placement import Instance, place


class StaticFlavor(FlavorPlugin):
    """Fixed caches per region, as the template says."""

    name = "static"

    def plan(self, request: PlanRequest) -> ServiceInstanceGraph:
        template = request.template
        objective = template.get("placement", {}).get("objective", "fewest_hosts")
        vnfs = []
        for region in request.regions:
            wanted = self._region_vnfs(region.name, template)
            if region.name == request.default_region:
                wanted += vcdn_vnfs(template, region.name)
            share = template.get("placement", {}).get("max_host_share")
            hosts = place(region.name, [Instance(v.name, v.vcpus, v.ram_mb,
                                                 serving=v.role == "cache") for v in wanted],
                          region.hosts, objective, share)
            for vnf in wanted:
                vnf.host = hosts[vnf.name]
            vnfs += wanted
        return request.graph(vnfs)

    @staticmethod
    def _region_vnfs(region, template):
        return (template_vnfs(template, "cache", region, f"{region}-cache")
                + template_vnfs(template, "load_balancer", region, f"{region}-lb"))
