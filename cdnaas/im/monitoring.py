"""From the counters RO reads on each VNF to rates: requests per second and busy cores.

RO's ``GET /ro/v1/deployments/{id}/readings`` gives (as ``.../metrics``) cumulative
counters with the time they were read; the previous pass stored the VNF's last
counters, so a rate is the difference over the time between the two readings. A
counter that went down belongs to a restarted VNF: it counted from zero
since, so at least ``count / elapsed``.
"""
import dataclasses


@dataclasses.dataclass(frozen=True)
class Reading:
    """One VNF at this pass: its counters as read, and the rates since the previous pass."""

    name: str
    role: str
    region: str
    host: str | None
    vcpus: int
    healthy: bool
    connections: int | None
    requests_total: int | None
    cpu_seconds_total: float | None
    read_at: float
    requests_per_second: float | None
    cpu: float | None  # cores kept busy
    #: RO found it unhealthy in a way that does not pass by itself (``VnfHealth.lasting``)
    lasting: bool = False
    #: what RO's health check said of it
    detail: str = ""


def readings(figures, health, previous):
    """A :class:`Reading` per VNF.

    :param figures: RO's figures of every VNF (:class:`~cdnaas.common.answers.VnfFigures`).
    :param health: ``{name: VnfHealth}`` from RO's health check (absent: healthy).
    :param previous: ``{name: Sample}`` of each VNF's point at the previous pass.
    """
    found = []
    for vnf in figures:
        before = previous.get(vnf.name)
        checked = health.get(vnf.name)
        healthy = checked is None or checked.healthy
        last_read = before.read_at if before is not None else None
        found.append(Reading(
            name=vnf.name, role=vnf.role, region=vnf.region, host=vnf.host,
            vcpus=vnf.vcpus, healthy=healthy, lasting=not healthy and checked.lasting,
            detail=checked.detail if checked is not None else "",
            connections=vnf.active_connections, requests_total=vnf.requests,
            cpu_seconds_total=vnf.cpu_seconds, read_at=vnf.read_at,
            requests_per_second=rate(vnf.requests, vnf.read_at,
                                     before.requests_total if before is not None else None,
                                     last_read),
            cpu=rate(vnf.cpu_seconds, vnf.read_at,
                     before.cpu_seconds_total if before is not None else None, last_read)))
    return found


def rate(count, read_at, previous_count, previous_read_at):
    """Growth per second of a counter between two readings; None when it cannot be told."""
    if count is None or previous_count is None or previous_read_at is None:
        return None
    elapsed = read_at - previous_read_at
    if elapsed <= 0:
        return None
    grown = count - previous_count
    return (grown if grown >= 0 else count) / elapsed
