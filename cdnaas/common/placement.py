"""Placing VNF instances on hosts with free capacity (bin packing).

A small first-fit-decreasing packer the flavor plugins share: ``fewest_hosts``
fills the fullest host that still fits (best fit: fewer hosts powered on),
``spread`` picks the emptiest one (worst fit: failures hit fewer instances).
"""
import dataclasses

from cdnaas.common.flavor import HostCapacity, InsufficientCapacity


@dataclasses.dataclass
class Demand:
    """One instance to place: its name, vCPUs and RAM."""

    name: str
    vcpus: int
    ram_mb: int


def place(region, demands, hosts: list[HostCapacity], objective="fewest_hosts"):
    """Map each demand's name to a host name, or raise :class:`InsufficientCapacity`.

    ``hosts`` is not modified; the free capacity consumed is tracked locally.
    """
    free = {h.name: [h.free_vcpus, h.free_ram_mb] for h in hosts}
    placement = {}
    for demand in sorted(demands, key=lambda d: (-d.vcpus, -d.ram_mb, d.name)):
        fitting = [name for name, (cpu, ram) in free.items()
                   if cpu >= demand.vcpus and ram >= demand.ram_mb]
        if not fitting:
            needed = sum(d.vcpus for d in demands)
            shortfall = needed - sum(h.free_vcpus for h in hosts)
            # No shortfall overall means fragmentation: one more instance's worth is missing.
            raise InsufficientCapacity(region, shortfall if shortfall > 0 else demand.vcpus, needed)
        if objective == "spread":
            chosen = max(fitting, key=lambda n: (free[n][0], n))
        else:
            chosen = min(fitting, key=lambda n: (free[n][0], n))
        free[chosen][0] -= demand.vcpus
        free[chosen][1] -= demand.ram_mb
        placement[demand.name] = chosen
    return placement
