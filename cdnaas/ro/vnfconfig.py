"""VNF configurations: validated, rendered from ``templates/`` and checked by the real tools.

The same templates serve the local driver (files under a VNF's prefix directory)
and the OpenStack driver (cloud-init). Every value is checked here before it
reaches a template, against a narrow form that cannot carry a directive
(no spaces, quotes, ``;``, braces, ``$`` or newlines), so a rendered config
only ever says what the template says. The ``check_*`` functions run the tool
itself (``nginx -t``, ``dnsmasq --test``, ``nft -c``) on the rendered text.

nginx configs have two listeners on the VNF's address: the public one (``listen_port``)
for viewers, where the status path answers 404, and the management one
(:data:`MANAGEMENT_PORT`) serving ``stub_status`` at :data:`STATUS_PATH` only to the
``management_sources`` (the RO side: the local driver's bridge gateway, the OpenStack
operator's management CIDR) and 403 to anyone else.

nginx configs are sized for the load the plan sends to the VNF (:func:`planned_connections`,
:func:`nginx_limits`): connections per worker, the workers' open-file limit, the listen
backlog and the balancer's pool of kept-alive connections to its caches. What the host
must allow for them (the process's RLIMIT_NOFILE, ``net.core.somaxconn``) is read back
from the rendered text by :func:`host_limits`, so the drivers apply what the config says.

nginx configs keep every file under ``prefix_dir``: ``nginx.pid``, ``logs/``,
``temp/`` and (caches) ``cache/``. :func:`prepare_nginx_prefix` creates
the directories nginx does not create itself; :func:`check_nginx` calls it.
"""
import dataclasses
import functools
import ipaddress
import math
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import jinja2

from cdnaas.common import config
from cdnaas.common.sig import Origin

CACHE_TEMPLATE = "nginx-cache.conf.j2"
LB_TEMPLATE = "nginx-lb.conf.j2"
DNS_TEMPLATE = "dnsmasq-geo.conf.j2"
STEERING_TEMPLATE = "nft-geo-steering.nft.j2"

#: Port of the nginx VNFs' management listener (status page), never open to viewers.
MANAGEMENT_PORT = 8081
#: Where that listener serves nginx's ``stub_status`` (RO's health, metrics and drain).
STATUS_PATH = "/nginx_status"

# Whole-string patterns (used with fullmatch: ``$`` would let a trailing newline through).
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
_TABLE = re.compile(r"[a-z][a-z0-9-]{0,62}")
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_PATH = re.compile(r"/[A-Za-z0-9_./-]*")
_NGINX_TIME = re.compile(r"[1-9][0-9]{0,5}(?:s|m|h|d)")
_TOOL_TIMEOUT = 30

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
    planned = _int("planned_connections", planned, 1, _MAX_CONNECTIONS)
    workers = _int("workers", workers, 1, 64)
    members = _int("members", members, 1, 4096)
    if max_files is not None:
        max_files = _int("max_files", max_files, 4096, 1 << 30)
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


class ConfigError(Exception):
    """A value refused before rendering, or a rendered config the tool rejects.

    The message names the value and why, or quotes the tool's own words.
    """


@functools.cache
def _environment():
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(config.REPO_ROOT / "templates"),
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True,
        trim_blocks=True, lstrip_blocks=True)


def render(template_name: str, **values) -> str:
    """Render ``templates/<template_name>`` with ``values`` as they are (no validation).

    Prefer the functions below, which validate first.

    :raises jinja2.UndefinedError: the template uses a value not given.
    """
    return _environment().get_template(template_name).render(**values)


# --- configs -------------------------------------------------------------------------

def cache_config(*, name: str, workers: int, listen_address: str, listen_port: int,
                 origin: Origin, origin_address: str, prefix_dir: str,
                 management_sources: list[str], management_port: int = MANAGEMENT_PORT,
                 cache_max_size_mb: int = 1024, cache_inactive: str = "60m",
                 planned_connections: int | None = None, max_files: int | None = None,
                 daemon: bool = True, user: str | None = None) -> str:
    """nginx config of a cache VNF: reverse proxy and cache towards ``origin``.

    :param name: VNF name; also the cache zone and the ``X-Served-By`` header.
    :param workers: worker processes (one per vCPU), 1..64.
    :param origin: scheme, host (sent as Host header and TLS SNI name) and port.
    :param origin_address: IP address nginx connects to (the driver resolved ``origin.host``).
    :param prefix_dir: absolute directory holding pid file, logs, temp files and cache.
    :param management_sources: addresses or prefixes (at least one) allowed to read the
        status page on ``listen_address:management_port``; everyone else gets 403 there.
    :param management_port: the management listener's port, not ``listen_port``.
    :param cache_inactive: nginx time (``60m``, ``1h``...) after which unused objects go.
    :param planned_connections: concurrent client connections the plan can send to the
        cache (:func:`planned_connections`); None: :data:`CONNECTIONS_PER_VCPU` per
        worker. Connections, open files and backlog follow (:func:`nginx_limits`); nginx
        sets every connection up as a worker starts (about 0.5 KB and 0.5 us each).
    :param max_files: the most open files the host lets nginx have (None: no bound).
    :param daemon: ``daemon on`` (nginx forks) or ``off`` (stays in the foreground).
    :param user: nginx ``user`` for the workers; None leaves nginx's default (a root
        master runs its workers as ``nobody``, who must be able to reach ``prefix_dir``).
    :raises ConfigError: a value is refused (named, with the reason).
    """
    origin_ip = _address("origin_address", origin_address)
    scheme, host, port = _origin(origin)
    workers = _int("workers", workers, 1, 64)
    limits = nginx_limits(CONNECTIONS_PER_VCPU * workers if planned_connections is None
                          else planned_connections, workers, max_files=max_files)
    return render(
        CACHE_TEMPLATE, name=_name("name", name), limits=limits,
        **_listeners(listen_address, listen_port, management_port, management_sources),
        origin_scheme=scheme, origin_server=_host_port(origin_ip, port),
        origin_host_header=_host_header(scheme, host, port), origin_sni_name=host,
        prefix_dir=_path("prefix_dir", prefix_dir),
        cache_max_size_mb=_int("cache_max_size_mb", cache_max_size_mb, 1, 1 << 24),
        cache_inactive=_match("cache_inactive", cache_inactive, _NGINX_TIME,
                              "is not an nginx time like 60m, 12h or 7d"),
        daemon=_bool("daemon", daemon), user=_optional_name("user", user))


def lb_config(*, name: str, workers: int, listen_address: str, listen_port: int,
              members: list[tuple[str, str, int]], prefix_dir: str,
              management_sources: list[str], management_port: int = MANAGEMENT_PORT,
              planned_connections: int | None = None, max_files: int | None = None,
              daemon: bool = True, user: str | None = None) -> str:
    """nginx config of a region's load balancer over its caches.

    :param members: ``(cache name, address, port)`` of each cache (its public port), at
        least one. The balancer never forwards the status path: it answers 404 itself.
    :param planned_connections, max_files: as for :func:`cache_config` (planned: the
        region's viewers).
    :param management_sources, management_port, user: as for :func:`cache_config`.
    :raises ConfigError: a value is refused (named, with the reason).
    """
    if not isinstance(members, (list, tuple)) or not members:
        raise ConfigError("members must be a non-empty list of (name, address, port)")
    rendered, seen = [], set()
    for index, member in enumerate(members):
        if not isinstance(member, (list, tuple)) or len(member) != 3:
            raise ConfigError(f"members[{index}] {member!r} is not (name, address, port)")
        member_name = _name(f"members[{index}].name", member[0])
        if member_name in seen:
            raise ConfigError(f"members[{index}].name {member_name!r} is used twice")
        seen.add(member_name)
        rendered.append((member_name, _host_port(_address(f"members[{index}].address", member[1]),
                                                 _port(f"members[{index}].port", member[2]))))
    workers = _int("workers", workers, 1, 64)
    limits = nginx_limits(CONNECTIONS_PER_VCPU * workers if planned_connections is None
                          else planned_connections, workers, len(rendered), max_files,
                          proxied=True)
    return render(
        LB_TEMPLATE, name=_name("name", name), limits=limits,
        **_listeners(listen_address, listen_port, management_port, management_sources),
        members=rendered, prefix_dir=_path("prefix_dir", prefix_dir),
        daemon=_bool("daemon", daemon), user=_optional_name("user", user))


def dns_config(*, name: str, hostname: str, answer_address: str, listen_addresses: list[str],
               port: int, prefix_dir: str, ttl: int = 30, log_queries: bool = False) -> str:
    """dnsmasq config answering ``hostname`` with ``answer_address``, and nothing else.

    An IPv4 answer is an A record (AAAA queries get an empty NOERROR answer), IPv6
    an AAAA record (likewise for A). Other names get REFUSED (NXDOMAIN for names
    without a dot): no upstream, no /etc/hosts, no recursion. dnsmasq runs as root
    (``user=root``), forks, and writes ``<prefix_dir>/<name>.pid`` and
    ``<prefix_dir>/<name>.log``.

    :param listen_addresses: addresses to bind (``bind-interfaces``: they must exist).
    :param log_queries: log every query to the log file (large under load).
    :raises ConfigError: a value is refused (named, with the reason).
    """
    if not isinstance(listen_addresses, (list, tuple)) or not listen_addresses:
        raise ConfigError("listen_addresses must be a non-empty list of IP addresses")
    answer = _address("answer_address", answer_address)
    return render(
        DNS_TEMPLATE, name=_name("name", name), hostname=_hostname("hostname", hostname),
        answer_address=answer, answer_type="AAAA" if ":" in answer else "A",
        listen_addresses=[_address(f"listen_addresses[{i}]", a)
                          for i, a in enumerate(listen_addresses)],
        port=_port("port", port), prefix_dir=_path("prefix_dir", prefix_dir),
        ttl=_int("ttl", ttl, 0, 86400), log_queries=_bool("log_queries", log_queries))


def steering_rules(*, table: str, rules: list[tuple[str, int]], default_port: int) -> str:
    """nftables ruleset (family inet) redirecting DNS by client prefix to per-region ports.

    Queries (udp and tcp port 53) from the first prefix of ``rules`` that matches
    go to its port, others to ``default_port``; ``redirect`` rewrites the
    destination to the receiving interface's primary address, where that port's
    dnsmasq must listen. Applying the result with ``nft -f`` replaces the table,
    so it can be applied again after any change.

    :param table: nftables table name (letter first, then ``[a-z0-9-]``).
    :param rules: ``(client prefix CIDR, dnsmasq port)`` in priority order.
    :raises ConfigError: a value is refused (named, with the reason).
    """
    if not isinstance(rules, (list, tuple)):
        raise ConfigError("rules must be a list of (prefix, port)")
    rendered = []
    for index, rule in enumerate(rules):
        if not isinstance(rule, (list, tuple)) or len(rule) != 2:
            raise ConfigError(f"rules[{index}] {rule!r} is not (prefix, port)")
        prefix = _prefix(f"rules[{index}].prefix", rule[0])
        rendered.append(("ip" if prefix.version == 4 else "ip6", str(prefix),
                         _port(f"rules[{index}].port", rule[1])))
    return render(STEERING_TEMPLATE,
                  table=_match("table", table, _TABLE, "is not a table name (letter first, "
                                                       "then a-z, 0-9, -)"),
                  rules=rendered, default_port=_port("default_port", default_port))


# --- checks with the real tools -------------------------------------------------------

def prepare_nginx_prefix(prefix_dir: str) -> None:
    """Create ``logs/`` and ``temp/`` under ``prefix_dir`` (nginx creates the rest)."""
    for sub in ("logs", "temp"):
        Path(prefix_dir, sub).mkdir(parents=True, exist_ok=True)


def check_nginx(config_text: str, prefix_dir: str | None = None) -> None:
    """Run ``nginx -t`` on ``config_text``.

    :param prefix_dir: the prefix the config was rendered with: its directories are
        prepared (:func:`prepare_nginx_prefix`) and nginx runs with ``-p`` on it.
        None: a temporary prefix, enough only for configs whose paths exist already.
    :raises ConfigError: nginx is missing or rejects the config (its own words).

    nginx binds the listen addresses while it checks: call this where they exist
    (in the VNF's network namespace).
    """
    with tempfile.TemporaryDirectory(prefix="cdnaas-nginx-check-") as scratch:
        prefix = prefix_dir or scratch
        prepare_nginx_prefix(prefix)
        conf = Path(scratch, "nginx.conf")
        conf.write_text(config_text, encoding="utf-8")
        _run(["nginx", "-t", "-q", "-e", "stderr", "-p", f"{prefix}/", "-c", str(conf)], "nginx")


def check_dnsmasq(config_text: str) -> None:
    """Run ``dnsmasq --test`` on ``config_text`` (syntax and option values).

    :raises ConfigError: dnsmasq is missing or rejects the config (its own words).
    """
    with tempfile.TemporaryDirectory(prefix="cdnaas-dnsmasq-check-") as scratch:
        conf = Path(scratch, "dnsmasq.conf")
        conf.write_text(config_text, encoding="utf-8")
        _run(["dnsmasq", "--test", f"--conf-file={conf}"], "dnsmasq")


def check_nft(ruleset: str) -> None:
    """Run ``nft -c -f`` on ``ruleset``: the kernel checks it, nothing is applied.

    :raises ConfigError: not root, nft missing, or the ruleset is rejected (nft's words).
    """
    if os.geteuid() != 0:
        raise ConfigError("checking nftables rules needs root (nft -c asks the kernel)")
    with tempfile.TemporaryDirectory(prefix="cdnaas-nft-check-") as scratch:
        rules = Path(scratch, "steering.nft")
        rules.write_text(ruleset, encoding="utf-8")
        _run(["nft", "-c", "-f", str(rules)], "nft")


def tool_path(tool: str) -> str:
    """Absolute path of ``tool`` on PATH or in the sbin directories.

    :raises ConfigError: it is not installed.
    """
    path = shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")
    if path is None:
        raise ConfigError(f"{tool} is not installed (needed to check and run the VNFs)")
    return path


def _run(argv, tool):
    command = [tool_path(argv[0]), *argv[1:]]
    try:
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=_TOOL_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{tool} did not finish checking within {_TOOL_TIMEOUT} s") from None
    if result.returncode != 0:
        words = (result.stderr.strip() or result.stdout.strip()
                 or f"exit status {result.returncode}")
        raise ConfigError(f"{tool} rejected the configuration: {words}")


# --- validation ---------------------------------------------------------------------

def _refuse(field, value, why):
    raise ConfigError(f"{field} {value!r} {why}")


def _match(field, value, pattern, why):
    if not isinstance(value, str) or not pattern.fullmatch(value):
        _refuse(field, value, why)
    return value


def _name(field, value):
    return _match(field, value, _NAME, "is not a name (a-z, 0-9 and -, at most 63, "
                                       "not starting with -)")


def _optional_name(field, value):
    return None if value is None else _name(field, value)


def _hostname(field, value):
    if not isinstance(value, str) or len(value) > 253 or not _HOSTNAME.fullmatch(value):
        _refuse(field, value, "is not a DNS name (labels of a-z, 0-9 and - joined by dots)")
    return value


def _address(field, value):
    """An IP address in its canonical text form (which has only hex digits, ``.`` and ``:``)."""
    try:
        address = ipaddress.ip_address(value)
    except (TypeError, ValueError):
        address = None
    if address is None:
        _refuse(field, value, "is not an IP address")
    if getattr(address, "scope_id", None) is not None:
        _refuse(field, value, "has a zone (%...), which is not allowed")
    return str(address)


def _prefix(field, value):
    try:
        prefix = ipaddress.ip_network(value, strict=False) if isinstance(value, str) else None
    except ValueError:
        prefix = None
    if prefix is None:
        _refuse(field, value, "is not an address prefix like 10.1.0.0/16")
    if getattr(prefix.network_address, "scope_id", None) is not None:
        _refuse(field, value, "has a zone (%...), which is not allowed")
    return prefix


def _listeners(listen_address, listen_port, management_port, management_sources):
    """Template values of an nginx VNF's public and management listeners."""
    address = _address("listen_address", listen_address)
    port = _port("listen_port", listen_port)
    if _port("management_port", management_port) == port:
        _refuse("management_port", management_port, "is the public listen_port")
    if not isinstance(management_sources, (list, tuple)) or not management_sources:
        _refuse("management_sources", management_sources,
                "is not a non-empty list of addresses or prefixes")
    sources = []
    for index, source in enumerate(management_sources):
        prefix = _prefix(f"management_sources[{index}]", source)
        single = prefix.prefixlen == prefix.max_prefixlen  # one address: written as such
        sources.append(str(prefix.network_address) if single else str(prefix))
    return {"listen": _host_port(address, port),
            "management_listen": _host_port(address, management_port),
            "management_sources": sources, "status_path": STATUS_PATH}


def _int(field, value, low, high):
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        _refuse(field, value, f"is not an integer from {low} to {high}")
    return value


def _port(field, value):
    return _int(field, value, 1, 65535)


def _bool(field, value):
    if not isinstance(value, bool):
        _refuse(field, value, "is not true or false")
    return value


def _path(field, value):
    if (not isinstance(value, str) or not _PATH.fullmatch(value)
            or ".." in value.split("/") or value.rstrip("/") == ""):
        _refuse(field, value, "is not an absolute path of A-Z, a-z, 0-9, _ . / - "
                              "(without ..)")
    return value.rstrip("/")


def _origin(origin):
    """``(scheme, host, port)`` of ``origin``, host a DNS name or an IP address."""
    if not isinstance(origin, Origin):
        _refuse("origin", origin, "is not an Origin")
    if origin.scheme not in ("http", "https"):
        _refuse("origin.scheme", origin.scheme, "is not http or https")
    try:
        host = _address("origin.host", origin.host)
    except ConfigError:
        host = _hostname("origin.host", origin.host)
    return origin.scheme, host, _port("origin.port", origin.port)


def _host_header(scheme, host, port):
    """``Host`` header for ``host``: the port only when not the scheme's default."""
    if port == {"http": 80, "https": 443}[scheme]:
        return f"[{host}]" if ":" in host else host
    return _host_port(host, port)


def _host_port(address, port):
    """``address:port`` with an IPv6 address in brackets, as nginx wants it."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
