"""The VIM driver interface: the only door from CDNaaS to infrastructure.

Drivers are selected by entry-point name in the ``cdnaas.vim_drivers`` group
(``noop``, ``local``, ``openstack``). Whatever the backend, a driver speaks
only the dataclasses below; backend objects never leave the driver.
"""
import abc
import concurrent.futures
import dataclasses
import time
from typing import Callable

from cdnaas.common.sig import ServiceInstanceGraph

#: ``progress(step, done, total)``: called as a driver advances through a step.
Progress = Callable[[str, int, int], None]


def no_progress(_step, _done, _total):
    """A :data:`Progress` that ignores reports."""


def run_all(pool, action, items, step=None, progress=no_progress):
    """Run ``action`` on every item at once in ``pool``; return the results in item order.

    Every started action ends before the first error is raised, so an undo never races
    one still running. With ``step``, reports ``progress(step, done, total)`` from 0 and
    as each action ends.
    """
    items = list(items)
    if step is not None:
        progress(step, 0, len(items))
    futures = [pool.submit(action, item) for item in items]
    errors = []
    for done, future in enumerate(concurrent.futures.as_completed(futures), start=1):
        try:
            future.result()
        except Exception as exc:  # gathered: each started action ends before any undo
            errors.append(exc)
        if step is not None:
            progress(step, done, len(items))
    if errors:
        raise errors[0]
    return [future.result() for future in futures]


class VimError(Exception):
    """The VIM refused or failed an action; retrying will not help."""


class RetryableVimError(VimError):
    """The VIM failed in a way that may pass (timeout, overload)."""


class PrerequisitesMissing(VimError):
    """The driver cannot run here (no root, a missing binary, no cloud credentials)."""


class DeploymentFailed(VimError):
    """A deploy or update failed; what it had created was undone before raising."""


@dataclasses.dataclass
class VnfInstance:
    """A running VNF as the driver created it."""

    name: str
    role: str
    region: str
    host: str | None
    address: str
    resource_id: str
    vcpus: int


@dataclasses.dataclass
class EntryPoint:
    """Where a content provider points its clients: the hostname and its DNS servers."""

    hostname: str
    dns_servers: list[str]


@dataclasses.dataclass
class Deployment:
    """What a driver built for one SIG, enough to change or undo it later.

    ``resources`` is the driver's own JSON-serialisable record (ids of networks,
    processes, servers...); nobody but the driver reads it.
    """

    deployment_id: str
    driver: str
    vnfs: list[VnfInstance]
    entry_point: EntryPoint
    region_endpoints: dict[str, str]
    resources: dict = dataclasses.field(default_factory=dict)

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data):
        return cls(deployment_id=data["deployment_id"], driver=data["driver"],
                   vnfs=[VnfInstance(**v) for v in data["vnfs"]],
                   entry_point=EntryPoint(**data["entry_point"]),
                   region_endpoints=dict(data["region_endpoints"]),
                   resources=dict(data.get("resources") or {}))


@dataclasses.dataclass
class VnfHealth:
    """Result of one health check of one VNF."""

    name: str
    role: str
    region: str
    healthy: bool
    detail: str = ""


@dataclasses.dataclass
class VnfMetrics:
    """Load figures of one VNF, read at one instant.

    Counters are cumulative since the VNF started; readers take differences
    between two readings (``read_at`` apart) to get rates. A figure is None
    where the VNF has none (a DNS VNF serves no HTTP) or it could not be read.

    :param active_connections: open client connections (nginx ``stub_status``
        "Active connections", without the reading's own).
    :param requests: HTTP requests served so far.
    :param cpu_seconds: CPU time the VNF's processes have used so far.
    :param read_at: when the figures were read, seconds since the epoch.
    """

    name: str
    role: str
    region: str
    host: str | None
    vcpus: int
    read_at: float
    active_connections: int | None = None
    requests: int | None = None
    cpu_seconds: float | None = None


class VimDriver(abc.ABC):
    """Deploys, changes, checks and removes the VNFs of a SIG on one kind of VIM."""

    #: entry-point name of the driver
    name = None

    def check_prerequisites(self) -> None:
        """Check the driver can work on this machine.

        :raises PrerequisitesMissing: saying what is missing and how to get it.
        """

    @abc.abstractmethod
    def deploy(self, sig: ServiceInstanceGraph, progress: Progress = no_progress) -> Deployment:
        """Create every VNF of ``sig`` and wire LB and DNS; return what was built.

        Caches start in parallel; load balancers and DNS are configured once the
        caches answer. Returns only when the vCDN serves clients in every region.

        :raises DeploymentFailed: a step failed; everything created was removed first.
        :raises RetryableVimError: the VIM could not be reached; nothing was created.
        """

    @abc.abstractmethod
    def update(self, deployment: Deployment, sig: ServiceInstanceGraph,
               progress: Progress = no_progress) -> Deployment:
        """Bring a live ``deployment`` to match ``sig`` (caches added or removed).

        Caches to remove are drained from their balancer before they stop; a
        failed update leaves the previous deployment serving.

        :raises DeploymentFailed: nothing new is left running; the old VNFs still serve.
        """

    @abc.abstractmethod
    def terminate(self, deployment: Deployment, progress: Progress = no_progress) -> None:
        """Remove every resource of ``deployment``. Removing what is gone is success."""

    @abc.abstractmethod
    def health(self, deployment: Deployment) -> list[VnfHealth]:
        """Check each VNF of ``deployment`` (answers HTTP or DNS)."""

    def metrics(self, deployment: Deployment) -> list[VnfMetrics]:
        """Load figures of each VNF of ``deployment``, in its order.

        The default knows no figures (every one None); drivers that can read
        their VNFs override it.

        :raises VimError: the VIM could not be asked at all.
        """
        now = time.time()
        return [VnfMetrics(name=v.name, role=v.role, region=v.region, host=v.host,
                           vcpus=v.vcpus, read_at=now) for v in deployment.vnfs]

    @abc.abstractmethod
    def cleanup(self, known_ids: set[str]) -> list[str]:
        """Remove resources of deployments not in ``known_ids``; return the ids removed."""
