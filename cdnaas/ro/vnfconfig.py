"""VNF configurations: validated, rendered from ``templates/`` (or the flavor plugin's own
``templates/`` first, :func:`flavor_config`) and checked by the real tools.

The same templates serve the local driver (files under a VNF's prefix directory)
and the OpenStack driver (cloud-init). Every value is checked here before it
reaches a template, against a narrow form that cannot carry a directive
(no spaces, quotes, ``;``, braces, ``$`` or newlines), so a rendered config
only ever says what the template says. The ``check_*`` functions run the tool
itself (``nginx -t``, ``dnsmasq --test``, ``nft -c``) on the rendered text.

nginx configs have two listeners on the VNF's address: the public one (``listen_port``)
for viewers, where the status path answers 404, and the management one
(:data:`MANAGEMENT_PORT`) serving only to the ``management_sources`` (the RO side: the
local driver's bridge gateway, the OpenStack operator's management CIDR), 403 to anyone
else: ``stub_status`` at :data:`STATUS_PATH`, a balancer's usage log, a cache's purges,
prefetches and keys log (:mod:`cdnaas.ro.purge`).

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
import hashlib
import ipaddress
import math
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import jinja2

from cdnaas import delivery
from cdnaas.common import caching, challenges, config, errors, plugins, slicing
from cdnaas.common.sig import Origin
from cdnaas.delivery import access, origins, responses

CACHE_TEMPLATE = "nginx-cache.conf.j2"
LB_TEMPLATE = "nginx-lb.conf.j2"
DNS_TEMPLATE = "dnsmasq-geo.conf.j2"
STEERING_TEMPLATE = "nft-geo-steering.nft.j2"
#: The project's templates: the stock ones above and the pieces flavor templates include.
TEMPLATES_DIR = config.REPO_ROOT / "templates"

#: Port of the nginx VNFs' management listener (status page), never open to viewers.
MANAGEMENT_PORT = 8081
#: Where that listener serves nginx's ``stub_status`` (RO's health, metrics and drain).
STATUS_PATH = "/nginx_status"
#: Where the management listener of a VNF that logs viewer requests (a balancer; a cache
#: behind Octavia) serves its usage log (``+ ".1"``: the previous one).
USAGE_LOG_PATH = "/cdnaas/access.log"
#: seconds a balancer leaves a cache out of its rotation after a failed request to it
#: (``fail_timeout``; ``max_fails=1``): a dead cache costs one failed try per this time
#: and balancer worker. A rolling reload waits this long between a region's caches
#: (:func:`cdnaas.ro.vim.local.nginx_vnfs.roll_caches`).
MEMBER_FAIL_SECONDS = 5
#: Where an nginx VNF's management listener tells the generation of the configuration its
#: workers run (``generation <16 hex digits>``, :func:`stamp`); RO's health compares it with
#: the generation of the configuration RO last wrote (:func:`generation_of`).
GENERATION_PATH = "/cdnaas/generation"
#: The name a DNS VNF's dnsmasq answers a TXT query for with the generation of the
#: configuration it runs (a reserved name, never a vCDN's).
GENERATION_NAME = "generation.cdnaas.invalid"
#: What a template renders where the generation goes, in double quotes (no value can
#: carry a quote, so only a template's slot matches); :func:`stamp` fills it in.
_UNSTAMPED = '"generation pending'
_GENERATION = re.compile(r'(?:^|")generation ([0-9a-f]{16})\b', re.MULTILINE)
#: Where a cache's management listener purges the object a request path names
#: (``PURGE_PATH + path``: the cache key that path has on the public listener); a cache's
#: template declares ``{% set purge_module = true %}`` once it loads the purge module.
PURGE_PATH = "/cdnaas/purge"
#: The purge module (Debian ``libnginx-mod-http-cache-purge``) the stock cache template loads.
PURGE_MODULE = "/usr/lib/nginx/modules/ngx_http_cache_purge_module.so"
#: njs (Debian ``libnginx-mod-http-js``): a cache of a vCDN with signed URLs loads it.
JS_MODULE = "/usr/lib/nginx/modules/ngx_http_js_module.so"
#: Where a cache's management listener fetches a request path through its own public
#: listener (``PREFETCH_PATH + path``), so that the cache holds the object.
PREFETCH_PATH = "/cdnaas/prefetch"
#: Port where a cache that fetches from the vCDN's origins itself (not through a shield)
#: runs its origin fetch server, on its own address and answering it alone: the origins'
#: failover, headers and Host (:mod:`cdnaas.delivery.origins`,
#: ``nginx-cache-origins.conf.j2``).
FETCH_PORT = 8082
#: What a cache config rendering the vCDN's response rules says (nginx-cache-responses.conf.j2)
RESPONSE_RULES_MARK = "# The vCDN's response rules."
#: What a cache config rendering the vCDN's access control says (nginx-cache-access.conf.j2)
ACCESS_MARK = "# The vCDN's access control."
#: Where a cache's management listener serves its keys log: one JSON line per object
#: fetched from the origin, ``{"u": decoded path, "a": raw query string}`` (cdnaas.ro.purge).
KEYS_LOG_PATH = "/cdnaas/keys.log"
#: The request header a purge of one slice of an object names the slice with (its
#: ``Range``: ``bytes=<start>-<end>``), to the management listener of a cache that slices
#: (:mod:`cdnaas.ro.purge`).
PURGE_SLICE_HEADER = "X-Cdnaas-Slice"
#: The nginx variable a cache keys and fetches slices by: the slice's range where the
#: request has a Range header, empty otherwise (nginx-cache-slices.conf.j2): a request
#: without one is not sliced.
SLICE_RANGE_VARIABLE = "$cdnaas_slice_range"

# Whole-string patterns (used with fullmatch: ``$`` would let a trailing newline through).
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
_TABLE = re.compile(r"[a-z][a-z0-9-]{0,62}")
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_PATH = re.compile(r"/[A-Za-z0-9_./-]*")
_NGINX_TIME = re.compile(r"[1-9][0-9]{0,5}(?:s|m|h|d)")
_TEMPLATE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,123}\.j2")
_VARIABLE = re.compile(r"[a-z][a-z0-9_]{0,62}")
_WORD = re.compile(r"[A-Za-z0-9_.:/+,=-]{1,256}")
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


@dataclasses.dataclass(frozen=True)
class FlavorConfig:
    """What a vCDN's flavor chooses of a VNF's main configuration (:func:`flavor_config`).

    :param template: the file that renders it (None: the role's stock template).
    :param folders: folders searched, in order, before the project's ``templates/``
        (the flavor plugin's own ``templates/``).
    :param extra: the plugin's ``boot_config`` variables, checked when rendering
        (:func:`extra_variables`).
    """

    template: str | None = None
    folders: tuple = ()
    extra: dict = dataclasses.field(default_factory=dict)


def flavor_config(sig, vnf) -> FlavorConfig | None:
    """What ``sig``'s flavor chooses for ``vnf``: the first of its ``config_templates``
    (the others are pieces that one includes), found in the ``templates/`` folder of the
    SIG's plugin, then the project's, rendered with the plugin's ``boot_config(vnf, sig)``
    besides the usual values. None: the stock config of the VNF's role (a SIG that names
    neither a plugin nor a template).

    :raises ConfigError: the plugin is not installed here (after looking again) or its
        ``boot_config`` failed.
    """
    template = vnf.config_templates[0] if vnf.config_templates else None
    if sig.plugin is None:
        return None if template is None else FlavorConfig(template=template)
    try:
        plugin = plugins.load(plugins.FLAVORS, sig.plugin)
    except LookupError as exc:
        raise ConfigError(f"cannot configure {vnf.name}: {exc}") from None
    try:
        extra = plugin.boot_config(vnf, sig)
    except Exception as exc:  # the plugin's own code: its failure is the VNF's config error
        raise ConfigError(f"plugin {sig.plugin}: boot_config of {vnf.name} failed: "
                          f"{type(exc).__name__}: {exc}") from exc
    return FlavorConfig(template=template, folders=(str(plugin.templates_folder()),),
                        extra=extra)


class _FolderLoader(jinja2.BaseLoader):
    """Templates by plain file name (``[A-Za-z0-9_][A-Za-z0-9_.-]*.j2``: no folder, no
    ``..``) from the first of ``folders`` that has the file; a file that is a symbolic
    link leading out of its folder is refused, not followed."""

    def __init__(self, folders):
        self.folders = tuple(Path(f) for f in folders)

    def get_source(self, environment, template):
        path = find_template(template, self.folders)
        if path is None:
            raise jinja2.TemplateNotFound(template)
        mtime = path.stat().st_mtime
        return (path.read_text(encoding="utf-8"), str(path),
                lambda: path.is_file() and path.stat().st_mtime == mtime)


def find_template(name, folders) -> Path | None:
    """The file of template ``name`` in the first of ``folders`` that has it, or None.

    :raises ConfigError: ``name`` is not a plain file name (``[A-Za-z0-9_][A-Za-z0-9_.-]*``
        ending in ``.j2``: no folder, no ``..``, not absolute), or the file found is a
        symbolic link leading out of its folder.
    """
    if not isinstance(name, str) or not _TEMPLATE_NAME.fullmatch(name):
        _refuse("template name", name, "is not a file name like nginx-cache.conf.j2 (A-Z, "
                                       "a-z, 0-9, _ . -, ending in .j2, no folder)")
    for folder in folders:
        base = Path(folder).resolve()
        path = (base / name).resolve()
        if not path.is_relative_to(base):
            _refuse("template", name, f"in {folder} is a link out of its folder; put the "
                                      "file itself there")
        if path.is_file():
            return path
    return None


@functools.cache
def _environment(folders):
    return jinja2.Environment(
        loader=_FolderLoader(folders), undefined=jinja2.StrictUndefined, autoescape=False,
        keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)


def render(template_name: str, **values) -> str:
    """Render ``templates/<template_name>`` with ``values`` as they are (no validation).

    Prefer the functions below, which validate first.

    :raises jinja2.UndefinedError: the template uses a value not given.
    :raises ConfigError: the template (or a piece it includes) is missing, its name is
        not a plain file name, or it does not parse.
    """
    return _render(template_name, (str(TEMPLATES_DIR),), values)


def render_flavored(template_name: str, flavor: FlavorConfig | None, **values) -> str:
    """:func:`render` what the vCDN's flavor chooses instead (:func:`flavor_config`):
    its template (``template_name`` when it names none), found first in its folders,
    with its extra variables added to ``values`` once checked (:func:`extra_variables`).

    :raises: as :func:`render`, and ConfigError for a refused extra variable.
    """
    if flavor is None:
        return render(template_name, **values)
    return _render(flavor.template or template_name,
                   (*map(str, flavor.folders), str(TEMPLATES_DIR)),
                   {**values, **extra_variables(flavor.extra, values)})


def stamp(text: str) -> str:
    """``text``, a rendered config, with its generation filled in: the first 16 hex digits
    of the SHA-256 of the config as rendered, so a config always has the same generation
    and any change of it gives another. A config whose template has no generation slot
    (a flavor's own template that does not include the stock management pieces) is
    returned as it is."""
    if _UNSTAMPED not in text:
        return text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return text.replace(_UNSTAMPED, f'"generation {digest}')


def generation_of(text: str) -> str | None:
    """The generation in ``text``: a config :func:`stamp` filled in, or what a VNF reported
    (its management listener's :data:`GENERATION_PATH`, its TXT record of
    :data:`GENERATION_NAME`); None when it has none."""
    match = _GENERATION.search(text)
    return match.group(1) if match else None


def _render(template_name, folders, values):
    try:
        return _environment(folders).get_template(template_name).render(**values)
    except jinja2.TemplateNotFound as exc:
        raise ConfigError(f"template {exc.name!r} is in none of {', '.join(folders)}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"template {exc.name or template_name!r} line {exc.lineno}: "
                          f"{exc.message}") from None


def extra_variables(extra, given) -> dict:
    """``extra`` (a plugin's ``boot_config``) checked, to render beside the values
    ``given``: at most 64 names of ``[a-z][a-z0-9_]*`` (none of ``given``); values bool,
    int (32-bit), a string of ``A-Z a-z 0-9 _ . : / + , = -`` (1 to 256, nothing that
    could end or add an nginx or dnsmasq directive), or a list of at most 64 of those.

    :raises ConfigError: naming the variable and what is wrong with it.
    """
    if not isinstance(extra, dict) or len(extra) > 64:
        _refuse("boot_config", extra, "is not a dict of at most 64 variables")
    checked = {}
    for name, value in extra.items():
        if not isinstance(name, str) or not _VARIABLE.fullmatch(name):
            _refuse("boot_config variable", name, "is not a name of a-z, 0-9 and _ "
                                                  "(letter first, at most 63)")
        if name in given:
            _refuse("boot_config variable", name, "would replace a value every template "
                                                  "gets; give it another name")
        field = f"boot_config variable {name}"
        if isinstance(value, (list, tuple)):
            if len(value) > 64:
                _refuse(field, value, "is a list of more than 64 values")
            checked[name] = [_extra_scalar(f"{field}[{i}]", v) for i, v in enumerate(value)]
        else:
            checked[name] = _extra_scalar(field, value)
    return checked


def _extra_scalar(field, value):
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return _int(field, value, -(1 << 31), (1 << 31) - 1)
    return _match(field, value, _WORD, "is not a bool, an int or a string of A-Z, a-z, "
                                       "0-9, _ . : / + , = - (1 to 256)")


@dataclasses.dataclass(frozen=True)
class CacheRules:
    """A vCDN's cache rules (:mod:`cdnaas.common.caching`) as a cache's template renders
    them (:func:`nginx_cache_rules`).

    :param locations: per TTL rule, in the customer's order, ``(regex, ttl, rule)``: a
        regular-expression location (nginx tries them in order, the first match wins,
        as the rules say) keeping answers ``ttl``; ``rule`` describes it for a comment.
    :param default_ttl: what ``location /`` keeps answers for.
    :param key: the ``proxy_cache_key`` (and purge key) expression: ``$uri`` (the
        decoded path) with the query string, without it, or with the listed arguments.
    :param ignore_cache_control: ``proxy_ignore_headers Cache-Control Expires``.
    """

    locations: tuple
    default_ttl: str
    key: str
    ignore_cache_control: bool


def nginx_cache_rules(rules: dict | None, paths: list = (), signed: bool = False) -> CacheRules:
    """``rules`` (a SIG's ``service.cache_rules``; None: the defaults) checked again
    (:func:`cdnaas.common.caching.cache_rules`) and put in nginx's terms; the ``paths``
    of the vCDN's origins (:func:`cdnaas.delivery.origins.render`) that set a ``ttl`` come
    first, as prefix rules.

    :param signed: the vCDN signs URLs (:mod:`cdnaas.delivery.access`): a key with the
        whole query string leaves a signed URL's token out (``$cdnaas_key_args``,
        ``nginx-cache-access.conf.j2``).

    :raises ConfigError: a rule is refused (named, with the reason).
    """
    try:
        rules = caching.cache_rules(rules)
        prefixed = [caching.cache_rules({"ttl": [{"match": "prefix", "path": p["prefix"],
                                                   "ttl": p["ttl"]}]})["ttl"][0]
                    for p in paths if p["ttl"] is not None]
    except errors.BadRequest as exc:
        raise ConfigError(exc.message) from None
    locations = []
    for rule in prefixed + rules["ttl"]:
        literal = rule["path"].replace(".", r"\.")  # the only regex character paths allow
        regex = {"prefix": f"^{literal}", "suffix": f"{literal}$",
                 "exact": f"^{literal}$"}[rule["match"]]
        locations.append((regex, rule["ttl"], f"{rule['match']} {rule['path']}"))
    query = rules["query_string"]
    if query == "include":
        key = "$uri$cdnaas_key_args" if _bool("signed", signed) else "$uri$is_args$args"
    elif query == "ignore":
        key = "$uri"
    else:
        key = '"$uri?' + "&".join(f"{name}=$arg_{name}" for name in query) + '"'
    return CacheRules(locations=tuple(locations), default_ttl=rules["default_ttl"], key=key,
                      ignore_cache_control=rules["origin_cache_control"] == "ignore")


def keyed_by_slice(key: str, variable: str) -> str:
    """The cache key ``key`` (a :class:`CacheRules` key) of one slice of an object, the
    slice's range given by the nginx ``variable`` (:data:`SLICE_RANGE_VARIABLE` where the
    cache fetches, the purge header where it purges): always last and always
    ``bytes=N-M``, so no two objects' slices share a key; empty, the object's whole key
    (``key``'s value)."""
    if not re.fullmatch(r"\$[a-z_]{1,64}", variable):
        _refuse("slice variable", variable, "is not an nginx variable like $slice_range")
    return f'"{key.strip(chr(34))}{variable}"'


def nginx_slice_size(value) -> str:
    """``value`` (a SIG's ``service.slice_size``; None: :data:`cdnaas.common.slicing.DEFAULT`)
    checked again (:func:`cdnaas.common.slicing.slice_bytes`).

    :raises ConfigError: it is refused (named, with the reason).
    """
    value = slicing.DEFAULT if value is None else value
    try:
        slicing.slice_bytes(value)
    except errors.BadRequest as exc:
        raise ConfigError(exc.message) from None
    return value


def delivery_values(service: dict | None, role: str | None = None) -> dict:
    """The vCDN's delivery options (a SIG's ``service``; :mod:`cdnaas.delivery`) checked
    again and put in the templates' terms: one variable per option (those the configs of
    ``role`` render; None: every one).

    :raises ConfigError: an option is refused (named, with the reason).
    """
    try:
        return delivery.template_values(service, role)
    except errors.BadRequest as exc:
        raise ConfigError(exc.message) from None


def cache_files(service: dict | None) -> dict:
    """The files a cache's config refers to beside it, for the SIG's ``service`` (its
    delivery options, checked again): ``{path relative to the prefix directory: text}``
    (the error pages of :mod:`cdnaas.delivery.responses`). nginx reads them per request:
    a changed file needs no reload.

    :raises ConfigError: an option is refused (named, with the reason).
    """
    try:
        return responses.files(service)
    except errors.BadRequest as exc:
        raise ConfigError(exc.message) from None


# --- configs -------------------------------------------------------------------------

def cache_config(*, name: str, workers: int, listen_address: str, listen_port: int,
                 origin: Origin, origin_address: str, prefix_dir: str,
                 management_sources: list[str], management_port: int = MANAGEMENT_PORT,
                 cache_max_size_mb: int = 1024, cache_inactive: str = "60m",
                 planned_connections: int | None = None, max_files: int | None = None,
                 daemon: bool = True, user: str | None = None,
                 flavor: FlavorConfig | None = None, cache_rules: dict | None = None,
                 shield: bool = False, also_listen: list[str] = (),
                 usage_log: bool = False, service: dict | None = None,
                 secondary_address: str | None = None, behind_shield: bool = False,
                 fetch_port: int = FETCH_PORT,
                 region: str | None = None, real_ip_from: list[str] = ()) -> str:
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
    :param flavor: the flavor's template and extra variables (:func:`flavor_config`);
        None: ``nginx-cache.conf.j2``. A flavor's template gets every value above too.
    :param cache_rules: the vCDN's cache rules (the SIG's ``service.cache_rules``; None:
        the defaults), rendered as ``cache_rules`` (:func:`nginx_cache_rules`). The
        management listener purges (:data:`PURGE_PATH`), prefetches
        (:data:`PREFETCH_PATH`) and serves the keys log (:data:`KEYS_LOG_PATH`) with them
        where the template loads the purge module (:mod:`cdnaas.ro.purge`).
    :param shield: this cache is the vCDN's origin shield (the tier its caches fetch
        from): its answers say ``X-Shield-Cache-Status`` and ``X-Shield-Served-By``, which
        the caches pass on beside their own ``X-Cache-Status`` and ``X-Served-By``.
    :param also_listen: more addresses the public listener also takes, on
        ``listen_port`` (a shield's leg in each region it serves).
    :param usage_log: the cache logs every viewer request as a balancer of ours does
        (``usage.log``, served at :data:`USAGE_LOG_PATH` on the management listener):
        where the balancer is not ours (Octavia's).
    :param service: the SIG's ``service``, whose delivery options the template gets
        (:func:`delivery_values`) and whose ``slice_size`` is the size of the slices the
        cache fetches and keeps objects in (None:
        :data:`cdnaas.common.slicing.DEFAULT`; :func:`nginx_slice_size`), rendered as
        ``slice_size`` with ``slice_range`` (:data:`SLICE_RANGE_VARIABLE`: a request
        with a Range header is sliced, any other kept whole) and the keys that name a
        slice or, that variable or header empty, the whole object: ``cache_key`` (the
        rules' key and ``slice_range``) and ``purge_slice_key`` (the rules' key and the
        :data:`PURGE_SLICE_HEADER` of a purge); None: the defaults. Where its ``origins`` ask for it
        (:mod:`cdnaas.delivery.origins`) and the cache is not ``behind_shield``, the
        cache's misses go through a fetch server of its own (``origin_fetch``,
        :data:`FETCH_PORT`) that sends the origins' headers and Host and fails over.
    :param secondary_address: IP address of the vCDN's secondary origin (the driver
        resolved its host); required where ``service`` has one and the cache fetches from
        the origins.
    :param behind_shield: ``origin`` is the vCDN's origin shield, which fetches from the
        origins for this cache (no fetch server here).
    :param fetch_port: the fetch server's port, not ``listen_port`` nor ``management_port``.
    :param region: the cache's region (a vCDN's access may allow some regions only).
        Where ``service`` has an ``acme_thumbprint`` (a managed certificate), the cache
        but a shield answers every ACME HTTP-01 challenge with it, ahead of its access
        control (``nginx-acme-challenge.conf.j2``, :mod:`cdnaas.common.challenges`).
    :param real_ip_from: prefixes of the balancers in front of the cache, whose
        ``X-Forwarded-For`` names the viewer (nginx's realip); none: the viewer is the
        connecting address. With signed URLs (:mod:`cdnaas.delivery.access`) the cache
        reads the files :func:`cdnaas.delivery.access.vnf_files` gives from
        ``prefix_dir``: the driver writes them first.
    :raises ConfigError: a value is refused (named, with the reason).
    """
    if not isinstance(also_listen, (list, tuple)):
        _refuse("also_listen", also_listen, "is not a list of addresses")
    more_listeners = [_host_port(_address(f"also_listen[{index}]", address), listen_port)
                      for index, address in enumerate(also_listen)]
    primary = _fetched("origin", origin, origin_address)
    options = delivery_values(service, "cache")
    options[access.FIELD] = _cache_access(options[access.FIELD], region, real_ip_from,
                                          listen_address)
    fetch = None
    if options["origins"]["fetch"] and not _bool("behind_shield", behind_shield):
        if fetch_port in (listen_port, management_port):
            _refuse("fetch_port", fetch_port, "is the public or management port")
        fetch = {"listen": _host_port(_address("listen_address", listen_address),
                                      _port("fetch_port", fetch_port)),
                 "allow": listen_address, "primary": primary,
                 "secondary": _secondary(service, secondary_address)}
    scheme, server = ("http", fetch["listen"]) if fetch else (primary["scheme"],
                                                             primary["server"])
    workers = _int("workers", workers, 1, 64)
    limits = nginx_limits(CONNECTIONS_PER_VCPU * workers if planned_connections is None
                          else planned_connections, workers, max_files=max_files)
    rules = nginx_cache_rules(cache_rules, options["origins"]["paths"], access.signs(service))
    thumbprint = None if shield else _acme_thumbprint(service)  # a shield answers no viewer
    text = render_flavored(
        CACHE_TEMPLATE, flavor, name=_name("name", name), limits=limits,
        **_listeners(listen_address, listen_port, management_port, management_sources),
        origin_scheme=scheme, origin_server=server,
        origin_host_header=primary["host_header"], origin_sni_name=primary["sni"],
        origin_fetch=fetch,
        prefix_dir=_path("prefix_dir", prefix_dir),
        cache_max_size_mb=_int("cache_max_size_mb", cache_max_size_mb, 1, 1 << 24),
        cache_inactive=_match("cache_inactive", cache_inactive, _NGINX_TIME,
                              "is not an nginx time like 60m, 12h or 7d"),
        cache_rules=rules, slice_size=nginx_slice_size((service or {}).get("slice_size")),
        slice_range=SLICE_RANGE_VARIABLE,
        cache_key=keyed_by_slice(rules.key, SLICE_RANGE_VARIABLE),
        purge_slice_key=keyed_by_slice(rules.key, _header_variable(PURGE_SLICE_HEADER)),
        purge_path=PURGE_PATH, prefetch_path=PREFETCH_PATH, keys_log=KEYS_LOG_PATH,
        purge_module_file=PURGE_MODULE,
        usage_log=USAGE_LOG_PATH if _bool("usage_log", usage_log) else None,
        daemon=_bool("daemon", daemon), user=_optional_name("user", user),
        shield=_bool("shield", shield), also_listen=more_listeners,
        acme_thumbprint=thumbprint, **options)
    template = (flavor and flavor.template) or CACHE_TEMPLATE
    if fetch and f"listen {fetch['listen']};" not in text:
        raise ConfigError(f"the cache template {template} does not render the vCDN's origins "
                          "(its misses would find no fetch server): include "
                          "nginx-cache-origins.conf.j2 as nginx-cache.conf.j2 does")
    if options["response_rules"] != responses.render(None) and not shield \
            and RESPONSE_RULES_MARK not in text:
        raise ConfigError(f"the cache template {template} does not render the vCDN's response "
                          "rules: import nginx-cache-responses.conf.j2 as nginx-cache.conf.j2 "
                          "does")
    if thumbprint and f'return 200 "$1.{thumbprint}";' not in text:
        raise ConfigError(f"the cache template {template} answers no ACME challenge though the "
                          "vCDN's certificate is managed: include nginx-acme-challenge.conf.j2 "
                          "at the top of its public server block as nginx-cache.conf.j2 does")
    if options[access.FIELD]["on"] and not shield and ACCESS_MARK not in text:
        raise ConfigError(f"the cache template {template} does not render the vCDN's access "
                          "control: include nginx-cache-access.conf.j2 as nginx-cache.conf.j2 "
                          "does")
    return stamp(text)


def _acme_thumbprint(service):
    """The ACME account thumbprint a cache of a SIG with this ``service`` answers
    challenges with (:mod:`cdnaas.common.challenges`), checked again; None: none."""
    try:
        return challenges.thumbprint_of(service)
    except errors.BadRequest as exc:
        raise ConfigError(exc.message) from None


def _fetched(field, origin, address):
    """How a cache reaches ``origin`` at ``address``: ``{"scheme", "server"
    (address:port), "host_header", "sni"}``."""
    ip = _address(f"{field}_address", address)
    scheme, host, port = _origin(origin)
    return {"scheme": scheme, "server": _host_port(ip, port),
            "host_header": _host_header(scheme, host, port), "sni": host}


def _secondary(service, address):
    """How the fetch server reaches the secondary origin of ``service`` at ``address``
    (None: the vCDN has none)."""
    try:
        secondary = origins.secondary_origin(service)
    except errors.BadRequest as exc:
        raise ConfigError(exc.message) from None
    if secondary is None:
        return None
    if address is None:
        _refuse("secondary_address", address, "is missing: the vCDN has a secondary origin "
                                              f"({secondary.url}); resolve its host")
    return _fetched("secondary", secondary, address)


def access_files(service: dict | None) -> list:
    """The files a cache of a SIG with this ``service`` reads for its access control
    (:func:`cdnaas.delivery.access.vnf_files`: ``[(name, text, mode)]`` under its prefix).

    :raises ConfigError: the stored option is refused or a key cannot be opened.
    """
    try:
        return access.vnf_files(service)
    except errors.BadRequest as exc:
        raise ConfigError(exc.message) from None


def _cache_access(rendered, region, real_ip_from, listen_address):
    """A cache's ``access`` variable: the option's ``rendered`` values with the cache's own
    facts (``region``, ``real_ip_from``: the balancers whose X-Forwarded-For names the
    viewer, ``own_address``: its prefetches pass, ``js_module_file``, ``script`` and
    ``secrets``: the njs module and the files :func:`cdnaas.delivery.access.vnf_files`
    writes)."""
    return {**rendered, "region": _optional_name("region", region),
            "real_ip_from": _sources("real_ip_from", real_ip_from),
            "own_address": _address("listen_address", listen_address),
            "js_module_file": JS_MODULE, "script": access.SCRIPT_FILE,
            "secrets": access.KEYS_FILE}


def _balance_key(cache_rules, service):
    """What a balancer hashes requests on: the caches' key (:func:`nginx_cache_rules`),
    the path alone where that key has the whole query string and the vCDN signs URLs (a
    token differs per viewer: every viewer of an object reaches one cache)."""
    key = nginx_cache_rules(cache_rules).key
    return "$uri" if access.signs(service) and key == "$uri$is_args$args" else key


def lb_config(*, name: str, workers: int, listen_address: str, listen_port: int,
              members: list[tuple[str, str, int]], prefix_dir: str,
              management_sources: list[str], management_port: int = MANAGEMENT_PORT,
              planned_connections: int | None = None, max_files: int | None = None,
              daemon: bool = True, user: str | None = None,
              flavor: FlavorConfig | None = None, server_names: list[str] | None = None,
              tls: dict | None = None, cache_rules: dict | None = None,
              service: dict | None = None) -> str:
    """nginx config of a region's load balancer over its caches.

    :param members: ``(cache name, address, port)`` of each cache (its public port), at
        least one. The balancer never forwards the status path: it answers 404 itself.
        It logs every request to ``<prefix_dir>/logs/access.log`` (:mod:`cdnaas.ro.traffic`
        reads it), served with its previous generation ``access.log.1`` on the
        management listener at :data:`USAGE_LOG_PATH` (``.1``).
    :param planned_connections, max_files: as for :func:`cache_config` (planned: the
        region's viewers).
    :param management_sources, management_port, user, flavor: as for :func:`cache_config`.
    :param server_names: the names it serves (the vCDN's hostname, then the customer's);
        None or empty: any name (``server_name _``).
    :param tls: HTTPS (HTTP/2) beside HTTP: ``{"port": 443, "certificate": path of the
        PEM chain, "key": path of the PEM key}`` (files the driver wrote, readable by
        root only; nginx reads them at start and reload), optionally ``"stapling": True``
        where the certificate names an OCSP responder, with a shared session cache
        (``nginx-lb-tls.conf.j2``; TLS versions, unknown names, plain HTTP and HSTS as the
        vCDN's ``https_policy`` says, ``nginx-lb-https-policy.conf.j2``); None: HTTP only.
    :param cache_rules: the vCDN's cache rules (as for :func:`cache_config`): requests are
        spread over the caches by their cache key (``balance_key``), so the requests of
        one object go to one cache whatever else their query strings carry.
    :param service: as for :func:`cache_config`; where it has an ``acme_thumbprint``,
        the ACME HTTP-01 path goes to the caches (which answer it) over plain HTTP
        whatever the HTTPS policy says of plain HTTP (``acme_answered``).
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
    listeners = _listeners(listen_address, listen_port, management_port, management_sources)
    https = _tls(tls, listen_address, (listen_port, management_port))
    options = delivery_values(service, "load_balancer")
    if https is None and options["https_policy"]["http"] != "allow":
        raise ConfigError(f"https_policy.http {options['https_policy']['http']} needs HTTPS, "
                          "and the vCDN has no certificate")
    text = render_flavored(
        LB_TEMPLATE, flavor, name=_name("name", name), limits=limits, **listeners,
        members=rendered, member_fail_seconds=MEMBER_FAIL_SECONDS, prefix_dir=_path("prefix_dir", prefix_dir), usage_log=USAGE_LOG_PATH,
        daemon=_bool("daemon", daemon), user=_optional_name("user", user),
        server_names=_hostnames("server_names", server_names or []), tls=https,
        balance_key=_balance_key(cache_rules, service),
        acme_answered=_acme_thumbprint(service) is not None, **options)
    if https and https["certificate"] not in text:
        raise ConfigError(f"the balancer template {(flavor and flavor.template) or LB_TEMPLATE}"
                          " serves no HTTPS though the vCDN has a certificate: include "
                          "nginx-lb-tls.conf.j2 in its server block")
    return stamp(text)


def dns_config(*, name: str, hostname: str, answer_address: str, listen_addresses: list[str],
               port: int, prefix_dir: str, ttl: int = 30, log_queries: bool = False,
               flavor: FlavorConfig | None = None, aliases: list[str] | None = None) -> str:
    """dnsmasq config answering ``hostname`` (and each of ``aliases``, the customer's
    names of the vCDN) with ``answer_address``, and nothing else.

    An IPv4 answer is an A record (AAAA queries get an empty NOERROR answer), IPv6
    an AAAA record (likewise for A). Other names get REFUSED (NXDOMAIN for names
    without a dot): no upstream, no /etc/hosts, no recursion. dnsmasq runs as root
    (``user=root``), forks, and writes ``<prefix_dir>/<name>.pid`` and
    ``<prefix_dir>/<name>.log``. A TXT query for :data:`GENERATION_NAME` is answered with
    the config's generation (:func:`stamp`).

    :param listen_addresses: addresses to bind (``bind-interfaces``: they must exist).
    :param log_queries: log every query to the log file (large under load).
    :param flavor: as for :func:`cache_config` (None: ``dnsmasq-geo.conf.j2``).
    :raises ConfigError: a value is refused (named, with the reason).
    """
    if not isinstance(listen_addresses, (list, tuple)) or not listen_addresses:
        raise ConfigError("listen_addresses must be a non-empty list of IP addresses")
    answer = _address("answer_address", answer_address)
    return stamp(render_flavored(
        DNS_TEMPLATE, flavor, name=_name("name", name), hostname=_hostname("hostname", hostname),
        aliases=_hostnames("aliases", aliases or []), answer_address=answer, answer_type="AAAA" if ":" in answer else "A",
        listen_addresses=[_address(f"listen_addresses[{i}]", a)
                          for i, a in enumerate(listen_addresses)],
        port=_port("port", port), prefix_dir=_path("prefix_dir", prefix_dir),
        ttl=_int("ttl", ttl, 0, 86400), log_queries=_bool("log_queries", log_queries),
        generation_name=GENERATION_NAME, generation=_UNSTAMPED[1:]))


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


def _hostnames(field, values):
    """A list of distinct DNS names (at most 64)."""
    if not isinstance(values, (list, tuple)) or len(values) > 64:
        _refuse(field, values, "is not a list of at most 64 DNS names")
    names = [_hostname(f"{field}[{i}]", v) for i, v in enumerate(values)]
    if len(set(names)) != len(names):
        _refuse(field, values, "names a host twice")
    return names


def _tls(tls, listen_address, taken_ports):
    """Template values of the HTTPS listener: ``{"listen", "authority_port", "certificate",
    "key", "stapling"}`` (``authority_port``: ``:<port>`` in an https URL, empty for 443),
    or None."""
    if tls is None:
        return None
    if not isinstance(tls, dict) or not {"port", "certificate", "key"} <= set(tls) \
            or set(tls) - {"port", "certificate", "key", "stapling"}:
        _refuse("tls", tls, "is not {port, certificate, key[, stapling]}")
    port = _port("tls.port", tls["port"])
    if port in taken_ports:
        _refuse("tls.port", port, "is the HTTP or management port")
    return {"listen": _host_port(_address("listen_address", listen_address), port),
            "authority_port": "" if port == 443 else f":{port}",
            "certificate": _path("tls.certificate", tls["certificate"]),
            "key": _path("tls.key", tls["key"]),
            "stapling": _bool("tls.stapling", tls.get("stapling", False))}


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
    return {"listen": _host_port(address, port),
            "management_listen": _host_port(address, management_port),
            "management_sources": _sources("management_sources", management_sources),
            "status_path": STATUS_PATH, "generation_path": GENERATION_PATH,
            "generation": _UNSTAMPED[1:]}


def _sources(field, values):
    """Addresses or prefixes as nginx's ``allow`` and ``set_real_ip_from`` take them (a
    single address written as such)."""
    if not isinstance(values, (list, tuple)):
        _refuse(field, values, "is not a list of addresses or prefixes")
    sources = []
    for index, source in enumerate(values):
        prefix = _prefix(f"{field}[{index}]", source)
        single = prefix.prefixlen == prefix.max_prefixlen  # one address: written as such
        sources.append(str(prefix.network_address) if single else str(prefix))
    return sources


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


def _header_variable(header):
    """nginx's variable of request header ``header`` (``$http_x_cdnaas_slice``)."""
    return "$http_" + header.lower().replace("-", "_")


def _host_port(address, port):
    """``address:port`` with an IPv6 address in brackets, as nginx wants it."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
