"""The no-op VIM driver: records what it would build and touches no infrastructure.

It answers like a real driver: resource ids, addresses taken per region from
the RFC 2544 benchmarking range (region ``i`` gets ``198.18.i.0/24``: load
balancer ``.2``, DNS ``.53``, caches from ``.10``), progress reports, failures
that undo themselves. What "runs" is kept in memory, per process, and in each
:class:`Deployment`'s ``resources`` so a terminate works from the record alone.

Load: :meth:`NoopDriver.metrics` models each VNF's figures from a number of viewers
per region its ``load`` gives (none by default). A region's balancer holds every
viewer's connection; its caches share the viewers in proportion to their vCPUs; each
viewer fetches one chunk every :data:`CHUNK_SECONDS`. (The tests' faults and load file
wrap this driver from outside: ``tests/support/faults.py``.)
"""
import collections
import ipaddress
import logging
import threading
import time
import uuid

from cdnaas.ro.vim import steps
from cdnaas.ro.vim.base import (CacheResult, Deployment, DeploymentFailed,
                                EntryPoint, LoadReport, LogChunk, LogPosition, VimDriver,
                                VimError, VnfHealth, VnfInstance, VnfMetrics, no_progress)

LOG = logging.getLogger(__name__)

#: every viewer fetches one video chunk this often (the paper's 2 s DASH segments)
CHUNK_SECONDS = 2.0
#: chunk requests a fully busy vCPU serves per second by default: 5000 HD viewers per
#: vCPU (the paper's KVM quality plateau) at one chunk per 2 s
REQUESTS_PER_VCPU = 2500.0

#: how many times more requests/s than of HD chunks a vCPU serves of a path holding the key
OBJECT_SPEEDUP = {"small": 8.0, "chunk-low": 4.0}

#: advances of a balancer's requests counter its modelled log keeps
LOG_SEGMENTS = 1000
#: every this many records of a modelled log is a MISS, the others HITs
MISS_EVERY = 20
#: body bytes of a modelled record (an HD chunk of the sample origin) and headers sent
CHUNK_BYTES = 445_440
HEADER_BYTES = 280

#: first host number of each role in a region's /24, in the order addresses are given out
FIRST_HOST = {"load_balancer": 2, "dns": 53, "cache": 10}
#: (role, progress step) in the order VNFs are created or configured
STEPS = (("cache", steps.BOOT_CACHES), ("load_balancer", steps.CONFIGURE_LOAD_BALANCERS),
         ("dns", steps.CONFIGURE_DNS))


class NoopDriver(VimDriver):
    """A :class:`VimDriver` that pretends: no network, no process, no server."""

    name = "noop"

    #: deployment id -> {resource id: VNF name} of what "runs", shared by all instances
    _running: dict[str, dict[str, str]] = {}
    _lock = threading.Lock()
    #: resource id -> [read_at, requests, cpu_seconds] of the modelled counters, shared too
    _counters: dict[str, list[float]] = {}
    _counters_lock = threading.Lock()
    #: balancer resource id -> its modelled usage log: (first record, end record, from
    #: time, to time) per advance of its requests counter, the latest LOG_SEGMENTS kept
    _logs: dict[str, collections.deque] = {}

    def __init__(self, load=None, clock=time.time, utilisation=None):
        """
        :param load: ``load(deployment_id) -> {region: viewers}``, read at each
            reading; by default no viewers anywhere.
        :param clock: seconds since the epoch (a simulation passes its own clock).
        :param utilisation: ``utilisation(viewers, vcpus) -> busy share (0-1)`` of a
            VNF's vCPUs; by default its chunk requests over ``vcpus * REQUESTS_PER_VCPU``.
        """
        self._load = load or _no_viewers
        self._clock = clock
        self._utilisation = utilisation or _utilisation

    def deploy(self, sig, progress=no_progress):
        """See :meth:`VimDriver.deploy`."""
        subnets = _subnets(sig, {})
        instances = self._build(sig, _addresses(sig, subnets, {}), {}, progress)
        return _deployment(sig, instances, subnets)

    def update(self, deployment, sig, progress=no_progress, previous=None):
        """See :meth:`VimDriver.update`: VNFs whose placement is unchanged are kept (a new
        origin changes no VNF here); new regions get the lowest free /24."""
        old = {v.name: v for v in deployment.vnfs}
        kept = {v.name: old[v.name] for v in sig.vnfs
                if v.name in old and _same_placement(old[v.name], v)}
        subnets = _subnets(sig, deployment.resources.get("subnets", {}))
        with self._lock:  # after a restart the record is all there is
            self._running.setdefault(deployment.deployment_id, {}).update(
                deployment.resources.get("servers", {}))
        instances = self._build(sig, _addresses(sig, subnets, kept), kept, progress)
        gone = [v for v in deployment.vnfs if kept.get(v.name) is not v]
        for done, vnf in enumerate(gone, 1):
            LOG.info("noop: would drain and delete %s (%s)", vnf.name, vnf.resource_id)
            self._forget(deployment.deployment_id, [vnf])
            progress(steps.REMOVE_VNFS, done, len(gone))
        return _deployment(sig, instances, subnets)

    def restore(self, deployment, sig, progress=no_progress):
        """See :meth:`VimDriver.restore`: what "runs" becomes exactly the recorded VNFs."""
        recorded = dict(deployment.resources.get("servers", {}))
        with self._lock:
            strays = set(self._running.get(deployment.deployment_id, {})) - set(recorded)
            self._running[deployment.deployment_id] = recorded
        for done, resource_id in enumerate(sorted(strays), 1):
            LOG.info("noop: would delete %s, which the interrupted update added", resource_id)
            self._drop_counters(resource_id)
            progress(steps.REMOVE_VNFS, done, len(strays))
        return deployment

    def vnf_names(self, deployment):
        """See :meth:`VimDriver.vnf_names`: what "runs" in memory (the record's after a
        restart, when memory knows nothing of the deployment)."""
        with self._lock:
            running = self._running.get(deployment.deployment_id)
            return set(running.values()) if running else super().vnf_names(deployment)

    def terminate(self, deployment, progress=no_progress):
        """See :meth:`VimDriver.terminate`: whatever the record or memory knows goes."""
        servers = dict(deployment.resources.get("servers", {}))
        with self._lock:
            servers.update(self._running.pop(deployment.deployment_id, {}))
        for done, (resource_id, name) in enumerate(sorted(servers.items()), 1):
            LOG.info("noop: would delete %s (%s)", name, resource_id)
            self._drop_counters(resource_id)
            progress(steps.REMOVE_VNFS, done, len(servers))

    def health(self, deployment):
        """See :meth:`VimDriver.health`: every VNF answers (nothing runs that could not)."""
        return [VnfHealth(v.name, v.role, v.region, True, "answers") for v in deployment.vnfs]

    def metrics(self, deployment):
        """See :meth:`VimDriver.metrics`: figures modelled from the injected load.

        Counters grow, since the previous reading, at the rate the current load
        makes: ``viewers / CHUNK_SECONDS`` requests/s and ``utilisation * vcpus``
        CPU seconds per second. A DNS VNF has no HTTP figures and no load.
        """
        viewers = self._load(deployment.deployment_id)
        now = self._clock()
        cache_vcpus = {}
        for vnf in deployment.vnfs:
            if vnf.role == "cache":
                cache_vcpus[vnf.region] = cache_vcpus.get(vnf.region, 0) + vnf.vcpus
        figures = []
        for vnf in deployment.vnfs:
            region_viewers = float(viewers.get(vnf.region, 0))
            if vnf.role == "cache":
                held = region_viewers * vnf.vcpus / cache_vcpus[vnf.region]
            else:
                held = region_viewers if vnf.role == "load_balancer" else 0.0
            requests, cpu = self._advance(vnf, now, held)
            http = vnf.role != "dns"
            figures.append(VnfMetrics(name=vnf.name, role=vnf.role, region=vnf.region,
                                      host=vnf.host, vcpus=vnf.vcpus, read_at=now,
                                      active_connections=round(held) if http else None,
                                      requests=int(requests) if http else None,
                                      cpu_seconds=cpu))
        return figures

    def _advance(self, vnf, now, viewers):
        """The VNF's counters moved to ``now`` at the rates ``viewers`` make; a balancer's
        new requests join its modelled log."""
        with self._counters_lock:
            counter = self._counters.setdefault(vnf.resource_id, [now, 0.0, 0.0])
            elapsed = max(0.0, now - counter[0])
            first, since = int(counter[1]), counter[0]
            counter[0] = now
            counter[1] += viewers / CHUNK_SECONDS * elapsed
            counter[2] += self._utilisation(viewers, vnf.vcpus) * vnf.vcpus * elapsed
            if vnf.role == "load_balancer" and int(counter[1]) > first:
                self._logs.setdefault(vnf.resource_id, collections.deque(
                    maxlen=LOG_SEGMENTS)).append((first, int(counter[1]), since, now))
            return counter[1], counter[2]

    def _drop_counters(self, resource_id):
        with self._counters_lock:
            self._counters.pop(resource_id, None)
            self._logs.pop(resource_id, None)

    def log_stream_status(self, deployment):
        """See :meth:`VimDriver.log_stream_status`: no shipper runs here (``shipper`` None
        for each balancer)."""
        return [{"name": v.name, "region": v.region, "shipper": None}
                for v in deployment.vnfs if v.role == "load_balancer"]

    def read_logs(self, deployment, positions, max_bytes=4 << 20, release=False):
        """See :meth:`VimDriver.read_logs`: each balancer's modelled log, one record per
        request its counter counts (:meth:`metrics` and this advance the same counter at
        the injected load's rate), the records of an advance spread evenly over its time;
        HD chunks, every :data:`MISS_EVERY` th a MISS. A position is ``(resource id,
        records read)``; the last :data:`LOG_SEGMENTS` advances are kept."""
        viewers = self._load(deployment.deployment_id)
        now = self._clock()
        chunks = []
        for vnf in deployment.vnfs:
            if vnf.role != "load_balancer":
                continue
            self._advance(vnf, now, float(viewers.get(vnf.region, 0)))
            with self._counters_lock:
                segments = list(self._logs.get(vnf.resource_id, ()))
            kept = segments[0][0] if segments else 0
            position = positions.get(vnf.name)
            start = kept
            if position is not None and position.log == vnf.resource_id:
                start = max(kept, position.offset)
            lost = position not in (None, LogPosition(log="", offset=0)) and \
                (position.log != vnf.resource_id or position.offset < kept)
            lines, size, index = [], 0, start
            for first, end, since, until in segments:
                while first <= index < end and size < max_bytes:
                    lines.append(_log_line(index, since + (until - since) * (index - first + 1)
                                           / (end - first)))
                    size += len(lines[-1])
                    index += 1
            chunks.append(LogChunk(name=vnf.name, region=vnf.region, data=b"".join(lines),
                                   position=LogPosition(log=vnf.resource_id, offset=index),
                                   more=bool(segments) and index < segments[-1][1], lost=lost))
        return chunks

    def invalidate(self, deployment, paths, prefixes, progress=no_progress):
        """See :meth:`VimDriver.invalidate`: every cache confirms at once; none held anything."""
        return self._every_cache(deployment, len(paths), progress)

    def prefetch(self, deployment, paths, progress=no_progress):
        """See :meth:`VimDriver.prefetch`: every cache confirms it "holds" every path."""
        return self._every_cache(deployment, len(paths), progress, done=len(paths))

    @staticmethod
    def _every_cache(deployment, requests, progress, done=0):
        caches = [v for v in deployment.vnfs if v.role == "cache"]
        progress(steps.CACHES, 0, len(caches))
        results = [CacheResult(name=v.name, region=v.region, ok=True, requests=requests,
                               done=done) for v in caches]
        progress(steps.CACHES, len(caches), len(caches))
        return results

    def load_test(self, deployment, vnf_name, test):
        """See :meth:`VimDriver.load_test`: modelled figures, nothing is sent. A VNF serves
        ``REQUESTS_PER_VCPU`` chunk requests per vCPU and second (more of smaller objects:
        :data:`OBJECT_SPEEDUP`); viewers stall once they ask for more than 90% of that."""
        vnf = next((v for v in deployment.vnfs if v.name == vnf_name), None)
        if vnf is None:
            raise VimError(f"deployment {deployment.deployment_id} has no VNF {vnf_name}")
        speedup = next((f for part, f in OBJECT_SPEEDUP.items() if part in test.path), 1.0)
        capacity = REQUESTS_PER_VCPU * vnf.vcpus * speedup
        windows = None
        if test.kind == "viewers":
            count = max(1, int(test.seconds // test.window_seconds))
            load = test.connections / test.chunk_seconds / capacity
            stalls = max(0, round((load - 0.9) * 10))
            window = [stalls, float(stalls), 1.0 if stalls else 0.0, None, False]
            windows = [[[*window[:3], 0.2, False]] + [list(window) for _ in range(count - 1)]
                       for _ in range(test.connections)]
            rate = min(capacity, test.connections / test.chunk_seconds)
            seconds = count * test.window_seconds
        else:
            rate, seconds = capacity, test.seconds
        return LoadReport(kind=test.kind, seconds=seconds, requests=int(rate * seconds),
                          errors=0, non_2xx=0, requests_per_second=round(rate, 1),
                          latency_ms={"p50": round(1000 * min(test.connections, rate) / rate, 3)},
                          generator_cpu_seconds=0.0,
                          target_cpu_seconds=round(min(1.0, rate / capacity) * vnf.vcpus * seconds, 3),
                          isolated=True, tool="noop model", windows=windows)

    def cleanup(self, known_ids):
        """See :meth:`VimDriver.cleanup`."""
        with self._lock:
            strays = sorted(set(self._running) - set(known_ids))
            for deployment_id in strays:
                del self._running[deployment_id]
        for deployment_id in strays:
            LOG.info("noop: would remove stray deployment %s", deployment_id)
        return strays

    def _build(self, sig, addresses, kept, progress):
        """Create the VNFs of ``sig`` not in ``kept``, (re)configure LBs and DNS.

        :returns: the VNF instances in SIG order.
        :raises DeploymentFailed: the certificate cannot be read, or a VNF could not be
            created (:meth:`_create`); what this call created was removed first.
        """
        if self.secrets is not None:  # as a real driver's balancers, it reads the certificate
            try:
                self.tls_bundle(sig)
            except VimError as exc:
                raise DeploymentFailed(f"{exc}; nothing was created") from exc
        instances, created = dict(kept), []
        try:
            for role, step in STEPS:
                todo = [v for v in sig.vnfs_in(role=role) if role != "cache" or v.name not in kept]
                for done, vnf in enumerate(todo, 1):
                    if vnf.name not in kept:
                        instances[vnf.name] = self._create(sig.vcdn_id, vnf, addresses[vnf.name])
                        created.append(instances[vnf.name])
                    progress(step, done, len(todo))
        except DeploymentFailed:
            LOG.info("noop: undoing %d VNF(s) of %s", len(created), sig.vcdn_id)
            self._forget(sig.vcdn_id, created)
            raise
        return [instances[v.name] for v in sig.vnfs]

    def _create(self, deployment_id, vnf, address):
        """Pretend to boot ``vnf`` at ``address`` (where a real driver's boot may fail:
        :class:`DeploymentFailed`); what runs holds it from now on."""
        instance = VnfInstance(name=vnf.name, role=vnf.role, region=vnf.region, host=vnf.host,
                               address=address, resource_id=f"noop-{uuid.uuid4().hex[:12]}",
                               vcpus=vnf.vcpus)
        with self._lock:
            self._running.setdefault(deployment_id, {})[instance.resource_id] = vnf.name
        LOG.info("noop: would boot %s %s on %s at %s", vnf.role, vnf.name, vnf.host, address)
        return instance

    def _forget(self, deployment_id, instances):
        with self._lock:
            servers = self._running.get(deployment_id, {})
            for instance in instances:
                servers.pop(instance.resource_id, None)
            if not servers:
                self._running.pop(deployment_id, None)
        for instance in instances:
            self._drop_counters(instance.resource_id)


def _log_line(index, at):
    """Record ``index`` of a modelled balancer log, ended at ``at`` (one JSON line)."""
    status = "MISS" if index % MISS_EVERY == 0 else "HIT"
    return (f'{{"t":{at:.3f},"s":"200","b":{CHUNK_BYTES + HEADER_BYTES},"bb":{CHUNK_BYTES},'
            f'"rt":0.004,"c":"{status}","m":"GET","u":"/video/hd/seg-{index % 300 + 1}.m4s",'
            f'"a":"192.0.2.10"}}\n').encode()


def _no_viewers(_deployment_id):
    return {}


def _utilisation(viewers, vcpus):
    return min(1.0, viewers / CHUNK_SECONDS / (vcpus * REQUESTS_PER_VCPU))


def _same_placement(instance, vnf):
    return (instance.role, instance.region, instance.host, instance.vcpus) == \
        (vnf.role, vnf.region, vnf.host, vnf.vcpus)


def _subnets(sig, existing):
    """Region -> /24: regions keep theirs, new ones take the lowest free index."""
    subnets = {r.name: existing[r.name] for r in sig.regions if r.name in existing}
    taken = {ipaddress.ip_network(cidr).network_address.packed[2] for cidr in subnets.values()}
    free = (i for i in range(256) if i not in taken)
    for region in sig.regions:
        if region.name not in subnets:
            index = next(free, None)
            if index is None:
                raise DeploymentFailed("no /24 left in 198.18.0.0/16 for region " + region.name)
            subnets[region.name] = f"198.18.{index}.0/24"
    return subnets


def _addresses(sig, subnets, kept):
    """VNF name -> address: kept VNFs keep theirs, others take their role's lowest free one."""
    addresses = {name: instance.address for name, instance in kept.items()}
    for role, first in FIRST_HOST.items():
        for vnf in sig.vnfs_in(role=role):
            if vnf.name in addresses:
                continue
            network = ipaddress.ip_network(subnets[vnf.region])
            used = set(addresses.values())
            address = next((str(network[n]) for n in range(first, 255)
                            if str(network[n]) not in used), None)
            if address is None:
                raise DeploymentFailed(f"no address left in {network} for {vnf.name}")
            addresses[vnf.name] = address
    return addresses


def _deployment(sig, instances, subnets):
    endpoints = {}
    for instance in instances:
        if instance.role == "load_balancer":
            endpoints.setdefault(instance.region, instance.address)
    dns = [i.address for i in instances if i.role == "dns"]
    return Deployment(deployment_id=sig.vcdn_id, driver=NoopDriver.name, vnfs=instances,
                      entry_point=EntryPoint(hostname=sig.hostname, dns_servers=dns),
                      region_endpoints=endpoints,
                      resources={"subnets": subnets,
                                 "servers": {i.resource_id: i.name for i in instances}})
