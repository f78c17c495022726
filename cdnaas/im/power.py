"""Power of a host, from RAPL or from its power model, and its share per VNF.

**Model.** A host of ``vcpus`` CPUs draws ``idle`` watts unloaded and
``peak`` watts fully busy, linearly in between (the software-router seed:
115 W idle, 269 W peak by default). The VNFs on it keep ``cpu_v`` cores
busy (their cgroup CPU time per second); the technology they run in costs
extra cycles for the same work, ``k_v``, so::

    u = min(1, sum_v(cpu_v * k_v) / vcpus)
    P = idle + (peak - idle) * u

``k`` comes from the VM network-power seed: the same busy web server drew
37.9 W on bare metal, 39.1 W in a container and 52.4 W under KVM, so
``k = 52.4 / 37.9 = 1.38`` for ``vm`` and ``39.1 / 37.9 = 1.03`` for
``container``. It scales only the dynamic part, and never past ``peak``.
It stands for a hypervisor's work the VNF's own CPU figures do not show; a
driver that measures the whole VM process should report a technology of 1.

**Measured.** Where the host has RAPL counters their power is used instead.

**Attribution by CPU share.** The idle part, ``min(P, idle)``, is the price
of the host being on: it is shared by the VNFs on it in proportion to their
allocated vCPUs (out of everything reserved on the host, so VNFs not
observed keep their share). The rest, the dynamic part, is shared in
proportion to ``cpu_v * k_v`` (by allocated vCPUs when nothing is busy).
"""
import dataclasses

#: extra cycles per unit of work against bare metal, per technology (see the module docstring)
OVERHEAD = {"vm": 52.4 / 37.9, "container": 39.1 / 37.9}


@dataclasses.dataclass(frozen=True)
class VnfLoad:
    """What one VNF asks of its host: its allocated vCPUs and the cores it keeps busy."""

    key: tuple
    vcpus: int
    cpu: float
    technology: str

    @property
    def weighted_cpu(self):
        return self.cpu * OVERHEAD.get(self.technology, 1.0)


@dataclasses.dataclass(frozen=True)
class HostPower:
    """A host's power, its utilisation, where the figure comes from, and each VNF's share."""

    watts: float
    utilisation: float
    source: str  # "rapl" or "model"
    shares: dict  # VnfLoad.key -> watts


def utilisation(vcpus, loads):
    """Share of the host's CPUs the VNFs keep busy, technology overhead included (at most 1)."""
    return min(1.0, sum(load.weighted_cpu for load in loads) / vcpus) if vcpus else 0.0


def modelled_watts(idle, peak, busy_share):
    """The power model: ``idle + (peak - idle) * busy_share``."""
    return idle + (peak - idle) * busy_share


def host_power(idle, peak, vcpus, reserved_vcpus, loads, measured=None):
    """The host's :class:`HostPower`; ``measured`` watts (RAPL) replace the model's figure.

    :param loads: the :class:`VnfLoad` of every VNF seen on the host.
    :param reserved_vcpus: everything reserved on the host, seen or not.
    """
    used = utilisation(vcpus, loads)
    watts = measured if measured is not None else modelled_watts(idle, peak, used)
    return HostPower(watts=watts, utilisation=used, source="model" if measured is None else "rapl",
                     shares=attribute(watts, idle, reserved_vcpus, loads))


def attribute(watts, idle, reserved_vcpus, loads):
    """``{key: watts}`` of each VNF of ``loads`` (see the module docstring)."""
    allocated = sum(load.vcpus for load in loads)
    if not allocated:
        return {}
    idle_part = min(watts, idle)
    dynamic = watts - idle_part
    busy = sum(load.weighted_cpu for load in loads)
    held = max(reserved_vcpus, allocated)
    return {load.key: idle_part * load.vcpus / held
            + dynamic * (load.weighted_cpu / busy if busy else load.vcpus / allocated)
            for load in loads}
