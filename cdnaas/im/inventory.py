"""The operator's hosts as the Service Orchestrator lists them, with what is reserved on each now."""
import dataclasses


@dataclasses.dataclass(frozen=True)
class Host:
    """A registered host: its size, its power model, and the vCPUs reserved on it now."""

    name: str
    region: str
    vcpus: int
    reserved_vcpus: int
    idle_watts: float
    peak_watts: float
    enabled: bool

    @property
    def free_vcpus(self):
        return self.vcpus - self.reserved_vcpus


def hosts(so):
    """``{name: Host}`` of every region's hosts (one SO call per region)."""
    found = {}
    for region in so.regions():
        for host in so.hosts(region.name):
            found[host.name] = Host(
                name=host.name, region=host.region, vcpus=host.vcpus,
                reserved_vcpus=host.reserved_vcpus, idle_watts=host.idle_watts,
                peak_watts=host.peak_watts, enabled=host.enabled)
    return found
