"""The ``qoe-video`` flavor: a video vCDN sized from measured QoE models.

For every requested region the plugin reads the template's model file (a
path relative to this folder, or to one of the operator's ``CDNAAS_MODEL_DIRS``:
:func:`cdnaas.planning.models.resolve`; its technology must match the template's),
finds the fewest cache vCPUs whose predicted quality meets the region's
target for its demand (:mod:`cdnaas.planning.dimensioning`), splits them into
equal caches within the template's bounds, adds the region's load balancer(s)
and, in the default region, the DNS VNF(s), and places them all on the
region's hosts at the least energy cost (:mod:`cdnaas.planning.placement`).

Power of a plan (:meth:`QoeVideoFlavor.quote`), per region, at peak demand::

    sum of idle_watts of the hosts the plan powers on
  + sum over VNFs of (peak_watts - idle_watts) / host vcpus * VNF vcpus * utilisation

where a cache's utilisation is the share of its vCPUs' HD request
throughput (Table III of the model) its viewers use, one chunk per chunk
period each, and load balancers and DNS VNFs, which the model does not
cover, count as fully busy. Placement minimises that same figure.
"""
import dataclasses
import math
from pathlib import Path

from cdnaas.common import errors
from cdnaas.common.flavor import (FlavorPlugin, PlanRequest, RegionRequest, template_vnfs,
                                  vcdn_vnfs)
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.planning import dimensioning, models, placement
from cdnaas_plugins.qoe_video import policy as default_policy

PLUGIN_DIR = Path(__file__).resolve().parent


@dataclasses.dataclass
class RegionOutcome:
    """A region's plan: its caches' sizing, its placed VNFs and what they cost."""

    request: RegionRequest
    sizing: dimensioning.Sizing
    vnfs: list
    instances: list  # the VNFs as placement saw them (cdnaas.planning.placement.Instance)
    utilisation: float
    power_watts: float
    powered_on: list


class QoeVideoFlavor(FlavorPlugin):
    """Caches per region sized to the customer's quality target, placed to save energy."""

    name = "qoe-video"
    uses_model = True

    def plan(self, request: PlanRequest) -> ServiceInstanceGraph:
        """Size and place every region's VNFs (see the module docstring).

        :raises InsufficientCapacity: a region's hosts cannot hold its VNFs.
        :raises Unprocessable: a target is beyond the model, a region needs
            more than the flavor's bounds allow, or the model file is unusable.
        """
        return request.graph(vnf for outcome in self.plan_regions(request) for vnf in outcome.vnfs)

    def quote(self, request: PlanRequest) -> dict:
        """What :meth:`plan` would reserve, with predicted quality and power; reserves nothing.

        :returns: ``{"flavor", "technology", "model", "vcpus", "power_watts",
            "regions": [{"name", "demand", "caches", "vcpus_per_cache",
            "cache_vcpus", "instances", "vcpus", "hosts", "hosts_powered_on",
            "utilisation", "predicted_mos", "predicted_response_ms",
            "power_watts"}]}``. ``vcpus`` and ``instances`` count every VNF of
            the region (what a create reserves); ``predicted_mos`` is given
            for a ``min_mos`` target, ``predicted_response_ms`` (the model's
            bound at the planned load) for a ``response_time`` one.
        :raises: as :meth:`plan`.
        """
        model = self.load_model(request.template)
        regions = [self._region_quote(model, outcome) for outcome in self.plan_regions(request)]
        return {"flavor": request.template["flavor"], "technology": model.technology,
                "model": model.name, "vcpus": sum(r["vcpus"] for r in regions),
                "power_watts": round(sum(r["power_watts"] for r in regions), 1),
                "regions": regions}

    def predict(self, sig: ServiceInstanceGraph, template: dict) -> dict:
        """Predicted quality of each region of a planned vCDN, at its demand, with its caches.

        :returns: ``{region: {"viewers_per_vcpu", "predicted_mos",
            "predicted_response_ms"}}``, as in :meth:`quote`.
        """
        model = self.load_model(template)
        predicted = {}
        for region in sig.regions:
            load = region.demand / sum(v.vcpus for v in sig.vnfs_in(region.name, "cache"))
            predicted[region.name] = {"viewers_per_vcpu": round(load, 1),
                                      **_predicted(model, region.quality, load)}
        return predicted

    def policy(self, observation) -> list:
        """IM hook: the flavor's default elasticity policy (:mod:`.policy`)."""
        return default_policy.decide(observation)

    #: folder the template's model file is looked up in first (then ``CDNAAS_MODEL_DIRS``);
    #: a flavor built on this one sets its own
    model_folder = PLUGIN_DIR

    @classmethod
    def load_model(cls, template) -> models.Model:
        """The template's model, checked against its technology.

        :raises Unprocessable: the model file is missing, broken or for another technology.
        """
        flavor = template["flavor"]
        if not template.get("model"):
            raise errors.Unprocessable(f"flavor {flavor} is not available: its template names no "
                                       "model file", field="flavor")
        try:
            model = models.named(template["model"], cls.model_folder)
        except models.ModelError as exc:
            raise errors.Unprocessable(f"flavor {flavor} is not available: {exc}",
                                       field="flavor") from None
        if model.technology != template["technology"]:
            raise errors.Unprocessable(
                f"flavor {flavor} is not available: its model {template['model']} describes "
                f"{model.technology}, its template {template['technology']}", field="flavor")
        return model

    def plan_regions(self, request: PlanRequest) -> list:
        """Each region's :class:`RegionOutcome`, as :meth:`plan` and :meth:`quote` use them.

        :raises: as :meth:`plan`.
        """
        template = request.template
        model = self.load_model(template)
        objective = template.get("placement", {}).get("objective", "fewest_hosts")
        share = placement.share_limit(objective,
                                      template.get("placement", {}).get("max_host_share"))
        # under a share cap each cache is at most `share` of the region: at least 1/share caches
        min_caches = math.ceil(1 / share - 1e-9) if share else 1
        outcomes = []
        for region in request.regions:
            sizing = dimensioning.dimension(model, region.name, region.demand, region.quality,
                                            template["vnfs"]["cache"], min_caches)
            utilisation = model.utilisation(region.demand, sizing.vcpus,
                                            _video(model, region.quality))
            vnfs = (template_vnfs(template, "cache", region.name, f"{region.name}-cache",
                                  sizing.instances, sizing.vcpus_per_instance)
                    + template_vnfs(template, "load_balancer", region.name, f"{region.name}-lb"))
            if region.name == request.default_region:
                vnfs += vcdn_vnfs(template, region.name)
            instances = [placement.Instance(v.name, v.vcpus, v.ram_mb,
                                            utilisation if v.role == "cache" else 1.0,
                                            serving=v.role == "cache") for v in vnfs]
            hosts = placement.place(region.name, instances, region.hosts, objective, share)
            for vnf in vnfs:
                vnf.host = hosts[vnf.name]
            outcomes.append(RegionOutcome(
                request=region, sizing=sizing, vnfs=vnfs, instances=instances,
                utilisation=utilisation,
                power_watts=placement.energy_watts(instances, region.hosts, hosts),
                powered_on=placement.powered_on(region.hosts, hosts)))
        return outcomes

    @staticmethod
    def _region_quote(model, outcome):
        sizing = outcome.sizing
        return {"name": sizing.region, "demand": sizing.demand, "caches": sizing.instances,
                "vcpus_per_cache": sizing.vcpus_per_instance, "cache_vcpus": sizing.vcpus,
                "instances": len(outcome.vnfs), "vcpus": sum(v.vcpus for v in outcome.vnfs),
                "hosts": sorted({v.host for v in outcome.vnfs}),
                "hosts_powered_on": outcome.powered_on,
                "utilisation": round(outcome.utilisation, 3),
                **_predicted(model, outcome.request.quality, sizing.viewers_per_vcpu),
                "power_watts": round(outcome.power_watts, 1)}


def _video(model, quality):
    """Chunk quality the target is modelled with: the QoE curve's, or the response-time curve's."""
    if "min_mos" in quality:
        return model.qoe_video
    return model.response_curve(quality["response_time"]["percentile"]).video


def _predicted(model, quality, load):
    """The model's prediction at ``load`` viewers per vCPU for the kind of target in ``quality``.

    MOS for a ``min_mos`` target; for a ``response_time`` target the model's
    bound on that percentile (None beyond the curve), since its QoE curve is
    for another chunk quality.
    """
    if "min_mos" in quality:
        return {"predicted_mos": round(model.mos(load), 2), "predicted_response_ms": None}
    found = model.response_curve(quality["response_time"]["percentile"])
    bound = found.curve.at(load) if found else None
    return {"predicted_mos": None,
            "predicted_response_ms": None if bound is None else round(bound, 1)}
