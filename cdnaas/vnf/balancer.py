"""The nginx config of a region's load balancer over its caches, rendered from the
flavor's template once every value is checked (:mod:`.fields`). :func:`balancer_of` builds
it from the SIG and what the driver placed; :func:`lb_config` takes every value."""
from cdnaas.delivery import access
from cdnaas.vnf import fields, generation, listeners, options, sizing, templates
from cdnaas.vnf.endpoints import MANAGEMENT_PORT, MEMBER_FAIL_SECONDS, USAGE_LOG_PATH
from cdnaas.vnf.fields import ConfigError
from cdnaas.vnf.templates import FlavorConfig


def served_names(sig) -> list[str]:
    """Every name ``sig``'s balancers and geo-DNS answer: its own hostname, then the
    customer's (``service.hostnames``)."""
    return [sig.hostname, *sig.service.get("hostnames", [])]


def balancer_of(sig, vnf, **placed) -> str:
    """The config of balancer ``vnf`` of ``sig`` (:func:`lb_config`): its name, workers,
    planned connections (its region's viewers), flavor, served names, cache rules and
    service options as the SIG says; ``placed``: what the driver decided (address,
    members, prefix, TLS files...), as :func:`lb_config` takes them.

    :raises ConfigError: a value is refused (named, with the reason).
    """
    return lb_config(name=vnf.name, workers=vnf.vcpus,
                     planned_connections=sizing.planned_connections(sig, vnf),
                     flavor=templates.flavor_config(sig, vnf), server_names=served_names(sig),
                     cache_rules=sig.service.get("cache_rules"), service=sig.service, **placed)


def _balance_key(cache_rules, service):
    """What a balancer hashes requests on: the caches' key (:func:`.options.nginx_cache_rules`),
    the path alone where that key has the whole query string and the vCDN signs URLs (a
    token differs per viewer: every viewer of an object reaches one cache)."""
    key = options.nginx_cache_rules(cache_rules).key
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
    :param planned_connections, max_files: as for :func:`.cache.cache_config` (planned: the
        region's viewers).
    :param management_sources, management_port, user, flavor: as for :func:`.cache.cache_config`.
    :param server_names: the names it serves (the vCDN's hostname, then the customer's);
        None or empty: any name (``server_name _``).
    :param tls: HTTPS (HTTP/2) beside HTTP: ``{"port": 443, "certificate": path of the
        PEM chain, "key": path of the PEM key}`` (files the driver wrote, readable by
        root only; nginx reads them at start and reload), optionally ``"stapling": True``
        where the certificate names an OCSP responder, with a shared session cache
        (``nginx-lb-tls.conf.j2``; TLS versions, unknown names, plain HTTP and HSTS as the
        vCDN's ``https_policy`` says, ``nginx-lb-https-policy.conf.j2``); None: HTTP only.
    :param cache_rules: the vCDN's cache rules (as for :func:`.cache.cache_config`): requests are
        spread over the caches by their cache key (``balance_key``), so the requests of
        one object go to one cache whatever else their query strings carry.
    :param service: as for :func:`.cache.cache_config`; where it has an ``acme_thumbprint``,
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
        member_name = fields.name(f"members[{index}].name", member[0])
        if member_name in seen:
            raise ConfigError(f"members[{index}].name {member_name!r} is used twice")
        seen.add(member_name)
        address = fields.address(f"members[{index}].address", member[1])
        port = fields.port(f"members[{index}].port", member[2])
        rendered.append((member_name, fields.host_port(address, port)))
    workers = fields.integer("workers", workers, 1, 64)
    limits = sizing.nginx_limits(sizing.CONNECTIONS_PER_VCPU * workers
                                 if planned_connections is None else planned_connections,
                                 workers, len(rendered), max_files, proxied=True)
    listening = listeners.listeners(listen_address, listen_port, management_port,
                                    management_sources)
    https = listeners.tls(tls, listen_address, (listen_port, management_port))
    values = options.delivery_values(service, "load_balancer")
    if https is None and values["https_policy"]["http"] != "allow":
        raise ConfigError(f"https_policy.http {values['https_policy']['http']} needs HTTPS, "
                          "and the vCDN has no certificate")
    text = templates.render_flavored(
        templates.LB_TEMPLATE, flavor, name=fields.name("name", name), limits=limits, **listening,
        members=rendered, member_fail_seconds=MEMBER_FAIL_SECONDS,
        prefix_dir=fields.path("prefix_dir", prefix_dir), usage_log=USAGE_LOG_PATH,
        daemon=fields.boolean("daemon", daemon), user=fields.optional_name("user", user),
        server_names=fields.hostnames("server_names", server_names or []), tls=https,
        balance_key=_balance_key(cache_rules, service),
        acme_answered=options.acme_thumbprint(service) is not None, **values)
    if https and https["certificate"] not in text:
        template = (flavor and flavor.template) or templates.LB_TEMPLATE
        raise ConfigError(f"the balancer template {template}"
                          " serves no HTTPS though the vCDN has a certificate: include "
                          "nginx-lb-tls.conf.j2 in its server block")
    return generation.stamp(text)
