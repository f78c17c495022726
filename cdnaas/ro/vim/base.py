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

from cdnaas.common import errors, origin_policy
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


def check_origin_policy(origin, addresses):
    """Refuse to point caches at ``origin`` resolved to ``addresses`` now, at deploy time,
    if the operator's origin policy denies them (a name accepted with the vCDN may have
    been pointed elsewhere since).

    :raises VimError: saying which address is refused and why.
    """
    try:
        origin_policy.check_resolved(origin, addresses)
    except errors.BadRequest as exc:
        raise VimError(f"at deploy time, {exc.message}") from None


def tls_ref(sig):
    """The secret reference of the certificate ``sig`` serves HTTPS with, or None."""
    return (sig.service.get("tls") or {}).get("certificate_ref")


class GeneratorLimit(VimError):
    """A driver's load generator cannot drive that much load here (open files, ports):
    the load is beyond what it can measure, not beyond what the VNF serves."""


class RetryableVimError(VimError):
    """The VIM failed in a way that may pass (timeout, overload)."""


class PrerequisitesMissing(VimError):
    """The driver cannot run here (no root, a missing binary, no cloud credentials)."""


class DeploymentFailed(VimError):
    """A deploy or update failed; what it had created was undone before raising."""


class RemovalIncomplete(VimError):
    """An update succeeded (:attr:`deployment` serves the new SIG, and is to be recorded),
    but some of what it was removing could not be deleted: the driver deletes it first
    on the deployment's next update or restore, and with the rest on terminate."""

    def __init__(self, message, deployment):
        super().__init__(message)
        self.deployment = deployment


@dataclasses.dataclass
class VnfInstance:
    """A running VNF as the driver created it.

    ``addresses``: every address of a VNF on several networks (the local driver's DNS
    VNF has one on each region's bridge), ``address`` first; empty when it has only
    ``address``.
    """

    name: str
    role: str
    region: str
    host: str | None
    address: str
    resource_id: str
    vcpus: int
    addresses: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class EntryPoint:
    """Where a content provider points its clients: the hostname and its DNS servers.

    ``name_servers``: ``[{"name", "addresses"}]``, the stable NS names (one per DNS VNF)
    the operator's zone delegates the hostname to, as RO published them
    (:mod:`cdnaas.ro.zones`); empty until then.
    """

    hostname: str
    dns_servers: list[str]
    name_servers: list = dataclasses.field(default_factory=list)


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
    """Result of one health check of one VNF.

    ``lasting``: what is wrong does not pass by itself (its process tree is not whole, it
    runs another configuration than RO wrote, its server is gone), unlike an answer that
    did not come: the Instance Manager heals it at the first check that finds it.
    """

    name: str
    role: str
    region: str
    healthy: bool
    detail: str = ""
    lasting: bool = False


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


@dataclasses.dataclass
class LoadTest:
    """Load a driver's load generator drives at one VNF (a calibration's measurement).

    The generator stands where viewers stand (a client of the VNF's region) and is kept
    off the CPUs the VNF runs on where the host has CPUs to spare.

    :param kind: ``http``: ``connections`` clients each sending requests for ``path``
        back to back, as wrk does (throughput); ``viewers``: ``connections`` DASH viewers,
        each fetching one chunk (``path`` with ``{n}`` for the segment number, from a random
        one of ``segments``) every ``chunk_seconds`` over one kept-alive connection and
        playing it, with ``buffer_chunks`` chunks of buffer (QoE).
    :param seconds: how long the load runs (viewers: after their staggered start).
    :param window_seconds: viewers' playback is reported per window of this length.
    :param range_start, range_bytes: ``http``: every request asks ``range_bytes`` bytes of
        ``path`` from byte ``range_start`` (a ``Range``, answered 206); 0 bytes: all of it.
    """

    kind: str
    path: str
    connections: int
    seconds: float
    chunk_seconds: float = 2.0
    segments: int = 300
    window_seconds: float = 16.0
    buffer_chunks: int = 2
    range_start: int = 0
    range_bytes: int = 0


@dataclasses.dataclass
class LoadReport:
    """What one :class:`LoadTest` measured.

    :param requests: responses received whole; ``errors``: connections that failed
        (refused, reset, timed out); ``non_2xx``: responses of another status.
    :param latency_ms: response time percentiles (``p50``, ``p90``, ``p99``) in ms.
    :param generator_cpu_seconds: CPU time the load generator itself used.
    :param target_cpu_seconds: CPU time the measured VNF used meanwhile (None: unknown).
    :param isolated: the generator ran on CPUs the VNF does not run on.
    :param tool: the generator and its version (``wrk 4.1.0``).
    :param windows: ``viewers`` only: per viewer, per window, ``[stalls, stalled seconds,
        longest stall seconds, startup seconds or None (no first chunk in that window),
        failed]`` (failed: the viewer's playback ended in or before that window).
    """

    kind: str
    seconds: float
    requests: int
    errors: int
    non_2xx: int
    requests_per_second: float
    latency_ms: dict
    generator_cpu_seconds: float
    target_cpu_seconds: float | None
    isolated: bool
    tool: str
    windows: list | None = None

    def to_dict(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class LogPosition:
    """Where a reader of a VNF's usage log stands: ``log`` names the file (a driver's
    own short text, ``""`` for none yet) and ``offset`` is the bytes read of it."""

    log: str
    offset: int


@dataclasses.dataclass
class LogChunk:
    """New lines of one VNF's usage log (a balancer's, or a cache's behind Octavia: one
    JSON object per request, see :mod:`cdnaas.ro.traffic`) since a :class:`LogPosition`.

    :param data: whole lines (a line cut because it was too long may end it).
    :param position: where the next read starts.
    :param more: lines were left for the next read (this one was full).
    :param lost: lines between the position given and ``data`` are gone (the log was
        rotated away before they were read).
    """

    name: str
    region: str
    data: bytes
    position: LogPosition
    more: bool = False
    lost: bool = False


@dataclasses.dataclass
class CacheResult:
    """What one cache confirmed of an invalidation or a prefetch
    (:meth:`VimDriver.invalidate`, :meth:`VimDriver.prefetch`).

    :param ok: the cache answered every request (a purge: removed or not cached; a
        prefetch: answered without a server error); otherwise ``detail`` says why.
    :param requests: requests it was sent: a purge per path and per object its keys log
        holds under the prefixes, or a fetch per path.
    :param done: objects removed (the other keys were not cached), or paths it now holds
        (answered 2xx).
    :param detail: why not ok, or what was not done (``"/path: 404"``).
    :param seconds: how long the cache took.
    """

    name: str
    region: str
    ok: bool
    requests: int = 0
    done: int = 0
    detail: str = ""
    seconds: float = 0.0


class VimDriver(abc.ABC):
    """Deploys, changes, checks and removes the VNFs of a SIG on one kind of VIM."""

    #: entry-point name of the driver
    name = None
    #: the role of the VNFs whose usage logs :meth:`read_logs` reads (every viewer
    #: request passes one of them and is logged there)
    logging_role = "load_balancer"
    #: RO's :class:`cdnaas.ro.secrets.SecretStore`, given as RO starts; None in a driver
    #: used on its own, which then cannot deploy a SIG that serves HTTPS
    secrets = None

    def secret_backend(self):
        """Where the certificates and keys of this driver's vCDNs are kept: a
        :class:`cdnaas.ro.vim.secret_backends.SecretBackend`, or None (the default) for RO's own
        table, encrypted with its secret key file."""
        return None

    def tls_bundle(self, sig: ServiceInstanceGraph):
        """The certificate chain and key ``sig`` serves HTTPS with
        (:class:`cdnaas.common.certificates.Bundle`, from :attr:`secrets`), or None when
        it serves HTTP only.

        :raises VimError: no secret store, or the reference is unknown or unreadable.
        """
        ref = tls_ref(sig)
        if ref is None:
            return None
        if self.secrets is None:
            raise VimError(f"{sig.vcdn_id} serves HTTPS but this {self.name} driver has no "
                           "secret store (RO gives it one as it starts)")
        try:
            return self.secrets.load(ref)
        except errors.NotFound:
            raise VimError(f"certificate {ref} of {sig.vcdn_id} is not in RO's secret "
                           "store") from None

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
               progress: Progress = no_progress,
               previous: ServiceInstanceGraph | None = None) -> Deployment:
        """Bring a live ``deployment`` to match ``sig``: caches added or removed, regions
        added (bridge or network, caches, balancer) or removed, a new origin (every
        cache reconfigured), and the DNS answering for the regions of ``sig``.

        Caches to remove are drained from their balancer before they stop; a removed
        region stops being answered by the DNS before its VNFs stop. A failed update
        leaves the previous deployment serving. A driver that cannot make a change
        raises :class:`DeploymentFailed` saying so, before changing anything.

        :param previous: the SIG ``deployment`` serves (what a failed update goes back
            to); None: ``sig`` with the deployment's VNFs (its origin and regions unchanged).
        :raises DeploymentFailed: nothing new is left running; the old VNFs still serve.
        :raises RemovalIncomplete: the update is done (its ``deployment`` serves ``sig``),
            but what it removed is not all deleted yet.
        """

    @abc.abstractmethod
    def restore(self, deployment: Deployment, sig: ServiceInstanceGraph,
                progress: Progress = no_progress) -> Deployment:
        """Bring the VIM back to exactly the recorded ``deployment`` after an interrupted update.

        The RO died while :meth:`update` worked on ``deployment``: some VNFs the update
        added may run, some it removed may be stopped, balancers may have either set of
        members. Afterwards exactly the VNFs of ``deployment`` run (those of this
        deployment id it does not record are removed; recorded ones that are gone are
        started again from ``sig``, the SIG ``deployment`` was built from) and each
        balancer has the recorded caches as members. Recorded VNFs that still run are
        kept as they are, so clients go on being served. Restoring twice is success.

        :returns: ``deployment`` as it now runs (VNFs started again may have new
            resource ids; names, roles and addresses are the recorded ones).
        :raises VimError: the VIM could not be brought back; what runs is unknown.
        """

    def vnf_names(self, deployment: Deployment) -> set[str]:
        """Names of the VNFs of ``deployment``'s id that have resources on the VIM, recorded
        in ``deployment`` or not: what :meth:`restore` keeps, or removes when unrecorded.

        The default knows only the record; drivers that can list what runs override it.

        :raises VimError: the VIM could not be asked.
        """
        return {v.name for v in deployment.vnfs}

    @abc.abstractmethod
    def terminate(self, deployment: Deployment, progress: Progress = no_progress) -> None:
        """Remove every resource of ``deployment``. Removing what is gone is success."""

    @abc.abstractmethod
    def health(self, deployment: Deployment) -> list[VnfHealth]:
        """Check each VNF of ``deployment``: healthy when it answers (HTTP or DNS) and,
        where the VIM lets RO see them, its processes are whole and run the configuration
        RO last wrote."""

    def metrics(self, deployment: Deployment) -> list[VnfMetrics]:
        """Load figures of each VNF of ``deployment``, in its order.

        The default knows no figures (every one None); drivers that can read
        their VNFs override it.

        :raises VimError: the VIM could not be asked at all.
        """
        now = time.time()
        return [VnfMetrics(name=v.name, role=v.role, region=v.region, host=v.host,
                           vcpus=v.vcpus, read_at=now) for v in deployment.vnfs]

    def load_test(self, deployment: Deployment, vnf_name: str, test: LoadTest) -> LoadReport:
        """Drive ``test`` at the VNF ``vnf_name`` of ``deployment`` from a load generator
        of the VNF's region; return what it measured (a calibration's figures).

        The default has no load generator.

        :raises VimError: the driver has no load generator, or it could not run.
        """
        raise VimError(f"the {self.name} VIM driver has no load generator: a calibration "
                       "needs one in the measured cache's network (the local driver starts a "
                       "client namespace on the region's bridge; on this VIM a load-generator "
                       "server running wrk and cdnaas.calibration.viewers is not implemented)")

    def read_logs(self, deployment: Deployment, positions: dict[str, LogPosition],
                  max_bytes: int = 4 << 20, release: bool = False) -> list[LogChunk]:
        """The usage log lines each logging VNF of ``deployment`` wrote after its position,
        read in parallel: one :class:`LogChunk` per VNF, in the deployment's order.

        Every viewer request passes its region's balancer, which logs it
        (``templates/nginx-usage-log.conf.j2``), or, where the balancer is not ours
        (Octavia's), the cache it goes to; a VNF keeps its log and the previous
        generation of it. Reading never removes lines: the same positions give the
        same lines (and any written since) again.

        :param positions: ``{VNF name: LogPosition}`` a previous read returned;
            a VNF absent from it is read from the start of what it keeps.
        :param max_bytes: at most this many bytes per VNF (more: ``LogChunk.more``).
        :param release: the caller keeps the returned positions (the Instance
            Manager's cursor), so the driver may let go of the lines before them (the
            local driver rotates a log grown past ``CDNAAS_LOCAL_LOG_ROTATE_MB``).
        :raises VimError: a balancer's log could not be read, or the driver has none.
        """
        raise VimError(f"the {self.name} VIM driver reads no usage logs")

    def log_stream_status(self, deployment: Deployment) -> list[dict]:
        """The counts of the log shipper (:mod:`cdnaas.ro.vim.logship`) of each logging VNF
        of ``deployment`` (those :meth:`read_logs` reads), read in parallel:
        ``[{"name", "region", "shipper": its /status, or None where none answers}]``.

        :raises VimError: the driver has no log shippers.
        """
        raise VimError(f"the {self.name} VIM driver runs no log shippers")

    @abc.abstractmethod
    def invalidate(self, deployment: Deployment, paths: list[str], prefixes: list[str],
                   progress: Progress = no_progress) -> list[CacheResult]:
        """Remove ``paths`` and every object under ``prefixes`` from EVERY cache of
        ``deployment``, the caches in parallel, after its origin shield if it has one;
        return one :class:`CacheResult` per cache (the shield's first), in the
        deployment's order, once each confirmed (or failed).

        A path names the object a viewer's request for it is served (the cache rules'
        key: with its query string, without it, or with the listed arguments); the next
        such request is a MISS. A prefix is a path prefix (decoded, without query): every
        object whose path starts with it goes, whatever its query string. ``paths`` and
        ``prefixes`` are checked already (:func:`cdnaas.common.caching.invalidation`).
        Reports ``progress(steps.CACHES, done, total)`` as caches end
        (:mod:`cdnaas.ro.vim.steps`).

        :raises VimError: the VIM could not be asked at all (a cache that fails is a
            result that is not ok).
        """

    @abc.abstractmethod
    def prefetch(self, deployment: Deployment, paths: list[str],
                 progress: Progress = no_progress) -> list[CacheResult]:
        """Have EVERY cache of ``deployment`` fetch ``paths`` from the origin (through its
        own rules), the caches in parallel, so that a viewer's first request is a HIT on
        whichever cache serves it; results as :meth:`invalidate`'s.

        :raises VimError: the VIM could not be asked at all.
        """

    @abc.abstractmethod
    def cleanup(self, known_ids: set[str]) -> list[str]:
        """Remove resources of deployments not in ``known_ids``; return the ids removed."""
