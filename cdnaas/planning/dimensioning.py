"""Dimensioning: the fewest cache vCPUs that meet a region's quality target.

The model gives the most viewers one vCPU may carry for the target (MOS at
least ``min_mos``, or ``response_time.percentile`` of requests within
``response_time.max_ms``); a region with demand D then needs
``V = ceil(D / that load)`` vCPUs.

V is split into **equally sized** caches, as few as the template's
``vcpus.max`` per cache allows (and at least ``instances.min``, plus any floor
the placement objective sets):

- equal sizes, because a load balancer spreads viewers evenly over its
  members: with unequal caches the smallest would carry more viewers per vCPU
  than planned and miss the target. Rounding up to equal sizes costs at most
  ``instances - 1`` vCPUs more than V;
- few and big, because every instance costs an OS and an nginx of overhead,
  a boot, and one load-balancer registration done after the others (1.5 to
  2.4 s each in the paper), and fewer instances pack on fewer powered hosts.
  Availability comes from ``instances.min`` and the ``spread`` objective.
"""
import dataclasses
import math

from cdnaas.common import errors


class TargetUnreachable(errors.Unprocessable):
    """A region's quality target is beyond anything the model predicts (HTTP 422)."""

    def __init__(self, region, problem, best=None):
        super().__init__(f"region {region}: {problem}", field="regions",
                         details=[{"field": "regions", "region": region, "problem": problem,
                                   "best": best}])
        self.region = region
        self.best = best


class FlavorTooSmall(errors.Unprocessable):
    """The target needs more vCPUs than the flavor's cache bounds allow in one region (HTTP 422)."""

    def __init__(self, region, missing_vcpus, needed_vcpus, allowed_vcpus):
        problem = (f"needs {needed_vcpus} cache vCPUs but the flavor allows at most "
                   f"{allowed_vcpus} per region: {missing_vcpus} vCPUs missing; lower the "
                   "demand or the quality target, or pick a bigger flavor")
        super().__init__(f"region {region} {problem}", field="regions",
                         details=[{"field": "regions", "region": region,
                                   "missing_vcpus": missing_vcpus, "needed_vcpus": needed_vcpus,
                                   "problem": problem}])
        self.region = region
        self.missing_vcpus = missing_vcpus
        self.needed_vcpus = needed_vcpus


@dataclasses.dataclass(frozen=True)
class Sizing:
    """A region's caches: ``instances`` caches of ``vcpus_per_instance`` each."""

    region: str
    demand: int
    required_vcpus: int
    instances: int
    vcpus_per_instance: int

    @property
    def vcpus(self):
        """Cache vCPUs planned (at least ``required_vcpus``)."""
        return self.instances * self.vcpus_per_instance

    @property
    def viewers_per_vcpu(self):
        return self.demand / self.vcpus


def max_load(model, region, quality):
    """Most viewers per vCPU that still meet ``quality`` (``min_mos`` or ``response_time``).

    A response-time curve for percentile p also bounds lower percentiles.

    :raises TargetUnreachable: the target is beyond the model's best.
    :raises BadRequest: ``quality`` holds no known target.
    """
    if "min_mos" in quality:
        target = quality["min_mos"]
        load = model.max_load_for_mos(target)
        if load is None:
            raise TargetUnreachable(region, f"min_mos {target} is above the best MOS the "
                                    f"{model.technology} model predicts ({model.best_mos}); "
                                    f"ask for at most {model.best_mos}", best=model.best_mos)
        return load
    if "response_time" in quality:
        percentile, max_ms = quality["response_time"]["percentile"], quality["response_time"]["max_ms"]
        found = model.response_curve(percentile)
        if found is None:
            modelled = ", ".join(f"p{p:g}" for p in sorted(model.response_time)) or "none"
            raise TargetUnreachable(region, f"the {model.technology} model has no response-time "
                                    f"curve covering p{percentile:g} (modelled: {modelled}); ask "
                                    "for a lower percentile or a min_mos target")
        modelled, _, curve = found
        load = curve.last_x_within(max_ms, lambda y, t: y <= t)
        if load is None:
            raise TargetUnreachable(region, f"p{percentile:g} within {max_ms} ms is faster than the "
                                    f"{model.technology} model predicts at any load (p{modelled:g} "
                                    f"{curve.ys[0]} ms); allow at least {curve.ys[0]} ms",
                                    best=curve.ys[0])
        return load
    raise errors.BadRequest(f"region {region}: quality needs min_mos or response_time",
                            field="regions")


def required_vcpus(model, region, demand, quality):
    """The fewest vCPUs whose predicted quality meets ``quality`` for ``demand`` viewers."""
    # rounding first keeps D / L = 2.0000000001 (float noise) from asking for 3
    return max(1, math.ceil(round(demand / max_load(model, region, quality), 9)))


def split(region, vcpus, cache, min_instances=1):
    """``(instances, vcpus_per_instance)``: the fewest equal caches holding ``vcpus``.

    :param cache: the template's cache VNF type (``instances`` and ``vcpus`` bounds).
    :param min_instances: a floor besides ``instances.min`` (e.g. for spreading).
    :raises FlavorTooSmall: ``vcpus`` exceeds ``instances.max * vcpus.max``.
    :raises Unprocessable: ``min_instances`` exceeds ``instances.max``.
    """
    most, biggest = cache["instances"]["max"], cache["vcpus"]["max"]
    if vcpus > most * biggest:
        raise FlavorTooSmall(region, vcpus - most * biggest, vcpus, most * biggest)
    if min_instances > most:
        raise errors.Unprocessable(f"region {region}: the placement needs at least "
                                   f"{min_instances} caches but the flavor allows {most}",
                                   field="regions")
    count = max(cache["instances"]["min"], min_instances, math.ceil(vcpus / biggest))
    return count, max(cache["vcpus"]["min"], math.ceil(vcpus / count))


def dimension(model, region, demand, quality, cache, min_instances=1) -> Sizing:
    """Size a region's caches for ``demand`` viewers at ``quality`` (see :func:`split`)."""
    needed = required_vcpus(model, region, demand, quality)
    count, size = split(region, needed, cache, min_instances)
    return Sizing(region=region, demand=demand, required_vcpus=needed, instances=count,
                  vcpus_per_instance=size)
