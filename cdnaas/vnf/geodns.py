"""The geo-DNS VNF's configs: a dnsmasq per region answering the vCDN's names with that
region's balancer, and the nftables steering that sends each client prefix's queries to
its region's dnsmasq. :func:`dns_of` and :func:`steering_of` build them from the SIG."""
import re

from cdnaas.vnf import fields, generation, templates
from cdnaas.vnf.balancer import served_names
from cdnaas.vnf.endpoints import GENERATION_NAME
from cdnaas.vnf.fields import ConfigError
from cdnaas.vnf.templates import FlavorConfig

_TABLE = re.compile(r"[a-z][a-z0-9-]{0,62}")
#: The nftables table of the geo-DNS steering.
STEERING_TABLE = "cdnaas-geo"


def dns_of(sig, vnf, region: str, *, name_suffix: str = "", **placed) -> str:
    """The dnsmasq config of DNS ``vnf`` of ``sig`` for ``region`` (:func:`dns_config`,
    named ``<vnf>-<region><name_suffix>``): every name of the vCDN answered with
    ``placed["answer_address"]`` (the region's balancer); ``placed``: what the driver
    decided (listen addresses, port, prefix).

    :raises ConfigError: a value is refused (named, with the reason).
    """
    names = served_names(sig)
    return dns_config(name=f"{vnf.name}-{region}{name_suffix}", hostname=names[0],
                      aliases=names[1:], flavor=templates.flavor_config(sig, vnf), **placed)


def steering_of(sig, ports: dict) -> str:
    """The steering ruleset of ``sig`` (:func:`steering_rules`): each region's client
    prefixes to its port of ``ports`` (region name -> port), others to the default
    region's."""
    return steering_rules(table=STEERING_TABLE,
                          rules=[(prefix, ports[r.name]) for r in sig.regions
                                 for prefix in r.client_prefixes],
                          default_port=ports[sig.default_region])


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
    the config's generation (:func:`.generation.stamp`).

    :param listen_addresses: addresses to bind (``bind-interfaces``: they must exist).
    :param log_queries: log every query to the log file (large under load).
    :param flavor: as for :func:`.cache.cache_config` (None: ``dnsmasq-geo.conf.j2``).
    :raises ConfigError: a value is refused (named, with the reason).
    """
    if not isinstance(listen_addresses, (list, tuple)) or not listen_addresses:
        raise ConfigError("listen_addresses must be a non-empty list of IP addresses")
    answer = fields.address("answer_address", answer_address)
    return generation.stamp(templates.render_flavored(
        templates.DNS_TEMPLATE, flavor, name=fields.name("name", name),
        hostname=fields.hostname("hostname", hostname),
        aliases=fields.hostnames("aliases", aliases or []), answer_address=answer,
        answer_type="AAAA" if ":" in answer else "A",
        listen_addresses=[fields.address(f"listen_addresses[{i}]", a)
                          for i, a in enumerate(listen_addresses)],
        port=fields.port("port", port), prefix_dir=fields.path("prefix_dir", prefix_dir),
        ttl=fields.integer("ttl", ttl, 0, 86400),
        log_queries=fields.boolean("log_queries", log_queries),
        generation_name=GENERATION_NAME, generation=generation.SLOT))


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
        prefix = fields.prefix(f"rules[{index}].prefix", rule[0])
        rendered.append(("ip" if prefix.version == 4 else "ip6", str(prefix),
                         fields.port(f"rules[{index}].port", rule[1])))
    return templates.render(templates.STEERING_TEMPLATE,
                  table=fields.match("table", table, _TABLE, "is not a table name (letter first, "
                                                       "then a-z, 0-9, -)"),
                  rules=rendered, default_port=fields.port("default_port", default_port))
