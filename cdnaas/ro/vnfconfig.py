"""VNF configurations: validated, rendered from ``templates/`` and checked by the real tools.

The same templates serve the local driver (files under a VNF's prefix directory)
and the OpenStack driver (cloud-init). Every value is checked here before it
reaches a template, against a narrow form that cannot carry a directive
(no spaces, quotes, ``;``, braces, ``$`` or newlines), so a rendered config
only ever says what the template says. The ``check_*`` functions run the tool
itself (``nginx -t``, ``dnsmasq --test``, ``nft -c``) on the rendered text.

nginx configs keep every file under ``prefix_dir``: ``nginx.pid``, ``logs/``,
``temp/`` and (caches) ``cache/``. :func:`prepare_nginx_prefix` creates
the directories nginx does not create itself; :func:`check_nginx` calls it.
"""
import functools
import ipaddress
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

# Whole-string patterns (used with fullmatch: ``$`` would let a trailing newline through).
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
_TABLE = re.compile(r"[a-z][a-z0-9-]{0,62}")
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_PATH = re.compile(r"/[A-Za-z0-9_./-]*")
_NGINX_TIME = re.compile(r"[1-9][0-9]{0,5}(?:s|m|h|d)")
_TOOL_TIMEOUT = 30


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
                 cache_max_size_mb: int = 1024, cache_inactive: str = "60m",
                 connections: int = 1024, daemon: bool = True, user: str | None = None) -> str:
    """nginx config of a cache VNF: reverse proxy and cache towards ``origin``.

    :param name: VNF name; also the cache zone and the ``X-Served-By`` header.
    :param workers: worker processes (one per vCPU), 1..64.
    :param origin: scheme, host (sent as Host header and TLS SNI name) and port.
    :param origin_address: IP address nginx connects to (the driver resolved ``origin.host``).
    :param prefix_dir: absolute directory holding pid file, logs, temp files and cache.
    :param cache_inactive: nginx time (``60m``, ``1h``...) after which unused objects go.
    :param connections: connections per worker. Viewers reach a cache only through
        their region's balancer, which reuses kept-alive connections, so a cache holds
        about as many as it has requests in flight plus its own to the origin; nginx
        sets every one up as a worker starts (8192 cost a cache ~4 ms of CPU to boot).
    :param daemon: ``daemon on`` (nginx forks) or ``off`` (stays in the foreground).
    :param user: nginx ``user`` for the workers; None leaves nginx's default (a root
        master runs its workers as ``nobody``, who must be able to reach ``prefix_dir``).
    :raises ConfigError: a value is refused (named, with the reason).
    """
    origin_ip = _address("origin_address", origin_address)
    scheme, host, port = _origin(origin)
    return render(
        CACHE_TEMPLATE, name=_name("name", name), workers=_int("workers", workers, 1, 64),
        listen=_host_port(_address("listen_address", listen_address),
                          _port("listen_port", listen_port)),
        origin_scheme=scheme, origin_server=_host_port(origin_ip, port),
        origin_host_header=_host_header(scheme, host, port), origin_sni_name=host,
        prefix_dir=_path("prefix_dir", prefix_dir),
        cache_max_size_mb=_int("cache_max_size_mb", cache_max_size_mb, 1, 1 << 24),
        cache_inactive=_match("cache_inactive", cache_inactive, _NGINX_TIME,
                              "is not an nginx time like 60m, 12h or 7d"),
        connections=_int("connections", connections, 64, 1 << 20),
        daemon=_bool("daemon", daemon), user=_optional_name("user", user))


def lb_config(*, name: str, workers: int, listen_address: str, listen_port: int,
              members: list[tuple[str, str, int]], prefix_dir: str, daemon: bool = True,
              user: str | None = None) -> str:
    """nginx config of a region's load balancer over its caches.

    :param members: ``(cache name, address, port)`` of each cache, at least one.
    :param user: as for :func:`cache_config`.
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
    return render(
        LB_TEMPLATE, name=_name("name", name), workers=_int("workers", workers, 1, 64),
        listen=_host_port(_address("listen_address", listen_address),
                          _port("listen_port", listen_port)),
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
        return ipaddress.ip_network(value, strict=False)
    except (TypeError, ValueError):
        pass
    _refuse(field, value, "is not an address prefix like 10.1.0.0/16")


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
