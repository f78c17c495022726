"""The nginx config of a cache VNF (a cache or the vCDN's origin shield): a reverse proxy
and cache towards the origin, rendered from the flavor's template once every value is
checked (:mod:`.fields`). :func:`cache_of` builds it from the SIG and what the driver
placed; :func:`cache_config` takes every value (the SIDR's checks, tests).

nginx configs keep every file under ``prefix_dir``: ``nginx.pid``, ``logs/``, ``temp/`` and
``cache/`` (:func:`.tools.prepare_nginx_prefix` creates what nginx does not)."""
import re

from cdnaas.common.sig import Origin
from cdnaas.delivery import access, responses
from cdnaas.vnf import fields, generation, listeners, options, sizing, templates
from cdnaas.vnf.endpoints import (ACCESS_MARK, FETCH_PORT, JS_MODULE, KEYS_LOG_PATH,
                                  MANAGEMENT_PORT, PREFETCH_PATH, PURGE_MODULE, PURGE_PATH,
                                  PURGE_SLICE_HEADER, RESPONSE_RULES_MARK,
                                  SLICE_RANGE_VARIABLE, USAGE_LOG_PATH)
from cdnaas.vnf.fields import ConfigError
from cdnaas.vnf.templates import FlavorConfig

_NGINX_TIME = re.compile(r"[1-9][0-9]{0,5}(?:s|m|h|d)")


def cache_of(sig, vnf, *, listen_port: int, behind_shield: bool = False, **placed) -> str:
    """The config of cache or shield ``vnf`` of ``sig`` (:func:`cache_config`): its name,
    workers, planned connections, flavor, cache rules, service options and region as the
    SIG says; a shield for the role ``shield``; ``behind_shield``: the origin it fetches
    from is the vCDN's shield (plain HTTP on ``listen_port``, the origin's name as Host),
    else ``placed["origin"]`` or the SIG's origin. ``placed``: what the driver decided
    (addresses, prefix, user, management sources...), as :func:`cache_config` takes them.

    :raises ConfigError: a value is refused (named, with the reason).
    """
    origin = placed.pop("origin", sig.origin)
    if behind_shield:
        origin = Origin(scheme="http", host=sig.origin.host, port=listen_port)
    return cache_config(
        name=vnf.name, workers=vnf.vcpus, listen_port=listen_port, origin=origin,
        planned_connections=sizing.planned_connections(sig, vnf),
        flavor=templates.flavor_config(sig, vnf), cache_rules=sig.service.get("cache_rules"),
        service=sig.service, region=vnf.region, shield=vnf.role == "shield",
        behind_shield=behind_shield, **placed)


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
        cache (:func:`.sizing.planned_connections`); None: :data:`.sizing.CONNECTIONS_PER_VCPU` per
        worker. Connections, open files and backlog follow (:func:`.sizing.nginx_limits`); nginx
        sets every connection up as a worker starts (about 0.5 KB and 0.5 us each).
    :param max_files: the most open files the host lets nginx have (None: no bound).
    :param daemon: ``daemon on`` (nginx forks) or ``off`` (stays in the foreground).
    :param user: nginx ``user`` for the workers; None leaves nginx's default (a root
        master runs its workers as ``nobody``, who must be able to reach ``prefix_dir``).
    :param flavor: the flavor's template and extra variables (:func:`.templates.flavor_config`);
        None: ``nginx-cache.conf.j2``. A flavor's template gets every value above too.
    :param cache_rules: the vCDN's cache rules (the SIG's ``service.cache_rules``; None:
        the defaults), rendered as ``cache_rules`` (:func:`.options.nginx_cache_rules`). The
        management listener purges (:data:`PURGE_PATH`), prefetches
        (:data:`PREFETCH_PATH`) and serves the keys log (:data:`KEYS_LOG_PATH`) with them
        where the template loads the purge module (:mod:`cdnaas.ro.vim.purge`).
    :param shield: this cache is the vCDN's origin shield (the tier its caches fetch
        from): its answers say ``X-Shield-Cache-Status`` and ``X-Shield-Served-By``, which
        the caches pass on beside their own ``X-Cache-Status`` and ``X-Served-By``.
    :param also_listen: more addresses the public listener also takes, on
        ``listen_port`` (a shield's leg in each region it serves).
    :param usage_log: the cache logs every viewer request as a balancer of ours does
        (``usage.log``, served at :data:`USAGE_LOG_PATH` on the management listener):
        where the balancer is not ours (Octavia's).
    :param service: the SIG's ``service``, whose delivery options the template gets
        (:func:`.options.delivery_values`) and whose ``slice_size`` is the size of the slices the
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
        fields.refuse("also_listen", also_listen, "is not a list of addresses")
    more_listeners = [fields.host_port(fields.address(f"also_listen[{index}]", address),
                                       listen_port)
                      for index, address in enumerate(also_listen)]
    primary = options.fetched("origin", origin, origin_address)
    values = options.delivery_values(service, "cache")
    values[access.FIELD] = _cache_access(values[access.FIELD], region, real_ip_from,
                                         listen_address)
    fetch = None
    if values["origins"]["fetch"] and not fields.boolean("behind_shield", behind_shield):
        if fetch_port in (listen_port, management_port):
            fields.refuse("fetch_port", fetch_port, "is the public or management port")
        fetch = {"listen": fields.host_port(fields.address("listen_address", listen_address),
                                      fields.port("fetch_port", fetch_port)),
                 "allow": listen_address, "primary": primary,
                 "secondary": options.secondary_fetched(service, secondary_address)}
    scheme, server = ("http", fetch["listen"]) if fetch else (primary["scheme"],
                                                             primary["server"])
    workers = fields.integer("workers", workers, 1, 64)
    limits = sizing.nginx_limits(sizing.CONNECTIONS_PER_VCPU * workers
                                 if planned_connections is None else planned_connections,
                                 workers, max_files=max_files)
    rules = options.nginx_cache_rules(cache_rules, values["origins"]["paths"],
                                      access.signs(service))
    thumbprint = None if shield else options.acme_thumbprint(service)  # a shield answers no viewer
    text = templates.render_flavored(
        templates.CACHE_TEMPLATE, flavor, name=fields.name("name", name), limits=limits,
        **listeners.listeners(listen_address, listen_port, management_port,
                              management_sources),
        origin_scheme=scheme, origin_server=server,
        origin_host_header=primary["host_header"], origin_sni_name=primary["sni"],
        origin_fetch=fetch,
        prefix_dir=fields.path("prefix_dir", prefix_dir),
        cache_max_size_mb=fields.integer("cache_max_size_mb", cache_max_size_mb, 1, 1 << 24),
        cache_inactive=fields.match("cache_inactive", cache_inactive, _NGINX_TIME,
                              "is not an nginx time like 60m, 12h or 7d"),
        cache_rules=rules, slice_size=options.nginx_slice_size((service or {}).get("slice_size")),
        slice_range=SLICE_RANGE_VARIABLE,
        cache_key=options.keyed_by_slice(rules.key, SLICE_RANGE_VARIABLE),
        purge_slice_key=options.keyed_by_slice(rules.key,
                                               fields.header_variable(PURGE_SLICE_HEADER)),
        purge_path=PURGE_PATH, prefetch_path=PREFETCH_PATH, keys_log=KEYS_LOG_PATH,
        purge_module_file=PURGE_MODULE,
        usage_log=USAGE_LOG_PATH if fields.boolean("usage_log", usage_log) else None,
        daemon=fields.boolean("daemon", daemon), user=fields.optional_name("user", user),
        shield=fields.boolean("shield", shield), also_listen=more_listeners,
        acme_thumbprint=thumbprint, **values)
    template = (flavor and flavor.template) or templates.CACHE_TEMPLATE
    if fetch and f"listen {fetch['listen']};" not in text:
        raise ConfigError(f"the cache template {template} does not render the vCDN's origins "
                          "(its misses would find no fetch server): include "
                          "nginx-cache-origins.conf.j2 as nginx-cache.conf.j2 does")
    if values["response_rules"] != responses.render(None) and not shield \
            and RESPONSE_RULES_MARK not in text:
        raise ConfigError(f"the cache template {template} does not render the vCDN's response "
                          "rules: import nginx-cache-responses.conf.j2 as nginx-cache.conf.j2 "
                          "does")
    if thumbprint and f'return 200 "$1.{thumbprint}";' not in text:
        raise ConfigError(f"the cache template {template} answers no ACME challenge though the "
                          "vCDN's certificate is managed: include nginx-acme-challenge.conf.j2 "
                          "at the top of its public server block as nginx-cache.conf.j2 does")
    if values[access.FIELD]["on"] and not shield and ACCESS_MARK not in text:
        raise ConfigError(f"the cache template {template} does not render the vCDN's access "
                          "control: include nginx-cache-access.conf.j2 as nginx-cache.conf.j2 "
                          "does")
    return generation.stamp(text)


def _cache_access(rendered, region, real_ip_from, listen_address):
    """A cache's ``access`` variable: the option's ``rendered`` values with the cache's own
    facts (``region``, ``real_ip_from``: the balancers whose X-Forwarded-For names the
    viewer, ``own_address``: its prefetches pass, ``js_module_file``, ``script`` and
    ``secrets``: the njs module and the files :func:`cdnaas.delivery.access.vnf_files`
    writes)."""
    return {**rendered, "region": fields.optional_name("region", region),
            "real_ip_from": fields.sources("real_ip_from", real_ip_from),
            "own_address": fields.address("listen_address", listen_address),
            "js_module_file": JS_MODULE, "script": access.SCRIPT_FILE,
            "secrets": access.KEYS_FILE}
