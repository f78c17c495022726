"""How big an nginx VNF's config is: sized for the load the plan sends to the VNF
(:func:`planned_connections`, :func:`nginx_limits`): connections per worker, the workers'
open-file limit, the listen backlog and the balancer's pool of kept-alive connections to
its caches. What the host must allow for them (the process's RLIMIT_NOFILE,
``net.core.somaxconn``) is read back from the rendered text by :func:`host_limits`, so the
drivers apply what the config says."""
import dataclasses
import math
import re

from cdnaas.vnf import fields

#: Concurrent connections one vCPU of an nginx VNF is planned for at least: the paper's
#: Table III measures a cache of one vCPU at 10,000 connections.
CONNECTIONS_PER_VCPU = 10_000
#: Every planned connection may hold a second one: a cache's to the origin (a miss), a
#: balancer's to a cache.
_SIDES = 2
#: Headroom over the plan: the spread of connections over workers (``reuseport`` hashes
#: them), bursts, the management listener.
_HEADROOM = 1.25
#: Cached objects whose open file descriptors each cache worker keeps (``open_file_cache``).
OPEN_FILES = 4096
#: Files a worker opens besides connections and cached objects (logs, cache files written).
_SPARE_FILES = 256
#: Largest listen backlog (``net.core.somaxconn`` is an int, nginx caps at 65535).
_MAX_BACKLOG = 65535
_MIN_CONNECTIONS = 1024
_MAX_WORKERS = 64
_MAX_CONNECTIONS = 1 << 20


@dataclasses.dataclass(frozen=True)
class NginxLimits:
    """Limits of an nginx VNF sized for its planned connections (see :func:`nginx_limits`).

    :param workers: ``worker_processes``: one per vCPU, more where the host caps each
        process's open files below what one worker of a vCPU needs.
    :param connections: ``worker_connections`` (per worker).
    :param files: ``worker_rlimit_nofile`` (per worker): a socket per connection, as many
        again for the files responses are sent from, and the open-file cache.
    :param backlog: ``listen ... backlog=``: connections the kernel queues before a
        worker accepts them (a burst of connects); ``net.core.somaxconn`` must allow it.
    :param keepalive: balancers: idle connections to the caches each worker keeps.
    :param open_files: caches: ``open_file_cache max=`` (per worker).
    """

    workers: int
    connections: int
    files: int
    backlog: int
    keepalive: int
    open_files: int


def planned_connections(sig, vnf) -> int:
    """Concurrent client connections the plan can send to ``vnf`` (a cache or a balancer).

    Every viewer of a region holds a connection to its balancer, so a balancer is planned
    for its region's demand (peak concurrent viewers). A cache is planned for its share
    of that demand (its vCPUs over the region's cache vCPUs, the share the flavor's model
    dimensioned it for) twice over, since the balancer spreads URIs, not viewers, and a
    popular object's viewers all reach its cache; never above the region's demand.
    Neither is planned below :data:`CONNECTIONS_PER_VCPU` per vCPU, nor above nginx's
    largest ``worker_connections`` (2^20).
    """
    demand = int(sig.region(vnf.region).demand)
    if vnf.role == "cache":
        region_vcpus = sum(c.vcpus for c in sig.vnfs_in(vnf.region, "cache")) or vnf.vcpus
        demand = min(demand, math.ceil(2 * demand * vnf.vcpus / region_vcpus))
    return min(_MAX_CONNECTIONS, max(demand, CONNECTIONS_PER_VCPU * int(vnf.vcpus)))


def nginx_limits(planned: int, workers: int, members: int = 1,
                 max_files: int | None = None, proxied: bool = False) -> NginxLimits:
    """Limits of an nginx VNF of ``workers`` workers planned for ``planned`` connections.

    Each worker holds ``planned / workers`` client connections (``reuseport`` spreads
    them evenly), a second one for each (to the origin or a cache) and
    :data:`_HEADROOM` over that, in whole thousands (1,024 at least). Its open-file
    limit covers those sockets, a file being sent per client connection and the
    open-file cache. A balancer's pool keeps one idle connection per client connection
    of its worker (at least 32 per member): under a closed-loop load every request
    finds a connection to reuse and none is opened and closed per request (which would
    leave a TIME_WAIT per request and run out of ports towards a cache).

    :param max_files: the most open files the host lets a process have (None: no
        bound, as for root in a VM). Where a worker would need more, its limits stop at
        what the host gives, as long as that still holds its planned client connections
        (and, ``proxied``, their second side); where it does not, the VNF gets more
        workers than vCPUs (they share its CPU quota), up to 64, each with its part.
    :param proxied: every request holds a second connection (a balancer's to a cache);
        a cache's to its origin are misses only.
    :raises ConfigError: a value is refused.
    """
    planned = fields.integer("planned_connections", planned, 1, _MAX_CONNECTIONS)
    workers = fields.integer("workers", workers, 1, 64)
    members = fields.integer("members", members, 1, 4096)
    if max_files is not None:
        max_files = fields.integer("max_files", max_files, 4096, 1 << 30)
    while True:
        per_worker = math.ceil(planned * _HEADROOM / workers)
        connections = min(_MAX_CONNECTIONS, max(_MIN_CONNECTIONS,
                                                math.ceil(_SIDES * per_worker / 1024) * 1024))
        files = connections + per_worker + OPEN_FILES + _SPARE_FILES
        if max_files is None or files <= max_files:
            break
        # The host caps each process's files: the least a worker must hold is its client
        # connections and, where every request is proxied (a balancer), one more each.
        least = per_worker * (_SIDES if proxied else 1) + OPEN_FILES + _SPARE_FILES
        if least <= max_files or workers == _MAX_WORKERS:
            files = max_files
            connections = max(_MIN_CONNECTIONS, min(connections,
                                                     max_files - OPEN_FILES - _SPARE_FILES))
            break
        workers += 1  # more workers (sharing the VNF's CPU quota) carry the plan
    return NginxLimits(workers=workers, connections=connections, files=files,
                       backlog=min(_MAX_BACKLOG, max(4096, planned)),
                       keepalive=min(connections // 2, max(32 * members, per_worker)),
                       open_files=OPEN_FILES)


def host_limits(config_text: str) -> dict:
    """What the host must allow an nginx config rendered here: ``{"nofile": the process's
    RLIMIT_NOFILE, "somaxconn": net.core.somaxconn}`` (read from its
    ``worker_rlimit_nofile`` and largest ``backlog=``; nginx's defaults when absent)."""
    files = re.search(r"^\s*worker_rlimit_nofile (\d+);", config_text, re.M)
    backlogs = [int(b) for b in re.findall(r"\bbacklog=(\d+)", config_text)]
    return {"nofile": int(files.group(1)) if files else 1024,
            "somaxconn": max(backlogs, default=511)}

