"""The zone publisher interface: how a vCDN's name enters the operator's DNS zone.

A vCDN's entry point is ``<label>.<zone>`` (``<vcdn>.<tenant>.<CDNAAS_DNS_DOMAIN>``):
the operator's zone delegates that name, by NS records, to the vCDN's own DNS VNFs,
which answer each client with its region's balancer. The NS names are stable, one
per DNS VNF and named after it (``<vnf>.<label>.<zone>``, e.g.
``dns-0.web.acme.cdn.example.net``), with glue A/AAAA records giving the VNF's
current addresses: when regions come and go the glue changes, never the names a
customer delegated or CNAMEd to.

Publishers are selected, as Octavia's provider drivers, by entry-point name
(group ``cdnaas.zone_publishers``, setting ``CDNAAS_ZONE_PUBLISHER``): ``local`` (an
authoritative server the stack starts, updated by RFC 2136), ``designate``
(OpenStack's DNS service), ``noop`` (in memory, for tests without DNS). Only RO
calls them. Every publisher speaks the dataclasses below and passes the same
contract test (``tests/system/test_zone_contract.py``); the records it must hold for a
delegation are worked out once, here (:func:`plan`, :meth:`Delegation.records`), so
that no publisher names things its own way.

Every method is idempotent (publishing what is published changes nothing,
withdrawing what is gone is success) and validates what it is given
(:func:`check_label`, :func:`check_zone`, :class:`NameServer`) before anything is
rendered into a request or a server's configuration.
"""
import abc
import dataclasses
import ipaddress
import re

from cdnaas.common import config
from cdnaas.common.entry_points import name_server

#: one DNS label as a host name may have it (RFC 1123): letters, digits, inner hyphens
_LDH = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
#: the longest name a delegation may hold, without the root's trailing dot (RFC 1035)
MAX_NAME = 253


class ZoneError(Exception):
    """A publisher could not do what it was asked (RO records it on the operation)."""


class ZoneRefused(ZoneError, ValueError):
    """A label, zone, name server or address is not acceptable; nothing was changed.
    The message names the field and why."""


class ZoneUnavailable(ZoneError):
    """The DNS service could not be reached or failed; what is published is either the
    old delegation or the new one (never none); retry later."""


@dataclasses.dataclass(frozen=True)
class NameServer:
    """One DNS VNF of a vCDN as the zone names it.

    :param host: one DNS label, stable for the VNF's whole life (its VNF name,
        ``dns-0``); the NS name is ``<host>.<label>.<zone>``.
    :param addresses: its current addresses (IPv4 and/or IPv6, at least one), the glue.
    """

    host: str
    addresses: tuple

    def __post_init__(self):
        if not isinstance(self.host, str) or not _LDH.match(self.host):
            raise ZoneRefused(f"name server host {self.host!r} must be one lower-case DNS "
                              "label (letters, digits, inner hyphens, at most 63)")
        if isinstance(self.addresses, str) or not self.addresses:
            raise ZoneRefused(f"name server {self.host} needs at least one address")
        checked = []
        for address in self.addresses:
            try:
                checked.append(str(ipaddress.ip_address(address)))
            except (TypeError, ValueError):
                raise ZoneRefused(f"name server {self.host}: {address!r} is not an IP "
                                  "address") from None
        object.__setattr__(self, "addresses", tuple(sorted(set(checked))))


@dataclasses.dataclass(frozen=True)
class Glue:
    """The address records of one NS name."""

    name: str
    addresses: tuple

    @property
    def ipv4(self):
        return [a for a in self.addresses if ":" not in a]

    @property
    def ipv6(self):
        return [a for a in self.addresses if ":" in a]


@dataclasses.dataclass(frozen=True)
class Delegation:
    """A vCDN's name in the operator's zone and who answers for it.

    :param name: the delegated name, ``<label>.<zone>`` (no trailing dot): the entry
        point customers CNAME to.
    :param name_servers: its NS names (``<host>.<name>``), in host order.
    :param glue: the address records of those names, in the same order.
    :param ttl: seconds resolvers keep the NS and glue records.
    """

    name: str
    name_servers: tuple
    glue: tuple
    ttl: int

    def records(self):
        """``[(owner, type, [values])]``: every RRset the zone holds for this delegation
        (the NS set, then each NS name's A and AAAA sets where it has addresses), names
        absolute without the trailing dot."""
        found = [(self.name, "NS", list(self.name_servers))]
        for glue in self.glue:
            found += [(glue.name, kind, values) for kind, values
                      in (("A", glue.ipv4), ("AAAA", glue.ipv6)) if values]
        return found

    def to_dict(self):
        """The entry point as the API shows it: the name and its name servers."""
        return {"hostname": self.name, "name_servers": [
            {"name": glue.name, "addresses": list(glue.addresses)} for glue in self.glue]}


def operator_zone():
    """The operator's zone (``CDNAAS_DNS_DOMAIN``), checked and lower-cased."""
    return check_zone(config.dns_domain())


def check_zone(zone):
    """``zone`` lower-cased without a trailing dot, if it is a host name of two labels
    or more.

    :raises ZoneRefused: it is not.
    """
    if not isinstance(zone, str):
        raise ZoneRefused("zone must be a DNS name")
    name = zone.lower().removesuffix(".")
    labels = name.split(".")
    if len(labels) < 2 or len(name) > MAX_NAME - 4 or not all(_LDH.match(p) for p in labels):
        raise ZoneRefused(f"zone {zone!r} must be a DNS name of two labels or more "
                          "(letters, digits, inner hyphens)")
    return name


def check_label(label, zone):
    """``label`` lower-cased, if ``<label>.<zone>`` can be delegated: one or more host
    name labels, short enough to leave room for the NS names below it.

    :raises ZoneRefused: it cannot (wildcards, underscores, empty labels, a trailing
        dot, spaces, quotes and anything else a server's configuration could misread).
    """
    if not isinstance(label, str):
        raise ZoneRefused("label must be a DNS name relative to the zone")
    name = label.lower()
    # room for the longest NS host (63) and its dot below the delegated name
    if not name or len(f"{name}.{zone}") > MAX_NAME - 64 \
            or not all(_LDH.match(p) for p in name.split(".")):
        raise ZoneRefused(f"label {label!r} must be DNS labels (letters, digits, inner "
                          f"hyphens) naming at most {MAX_NAME - 64} characters with "
                          f"the zone {zone}")
    return name


def plan(label, servers, zone, ttl):
    """The :class:`Delegation` of ``<label>.<zone>`` to ``servers``.

    :param servers: :class:`NameServer` of each DNS VNF (at least one, distinct hosts).
    :raises ZoneRefused: a value is not acceptable.
    """
    zone = check_zone(zone)
    name = f"{check_label(label, zone)}.{zone}"
    servers = sorted(servers or [], key=lambda s: s.host)
    if not servers or not all(isinstance(s, NameServer) for s in servers):
        raise ZoneRefused(f"{name} needs at least one name server")
    if len({s.host for s in servers}) != len(servers):
        raise ZoneRefused(f"{name}: two name servers share a host name")
    if not isinstance(ttl, int) or isinstance(ttl, bool) or not 1 <= ttl <= 86400:
        raise ZoneRefused(f"ttl {ttl!r} must be seconds from 1 to 86400")
    glue = tuple(Glue(name_server(s.host, name), s.addresses) for s in servers)
    return Delegation(name=name, name_servers=tuple(g.name for g in glue), glue=glue, ttl=ttl)


class ZonePublisher(abc.ABC):
    """Keeps vCDN delegations in the operator's zone. Subclasses set :attr:`name`
    (their entry-point name) and are built without arguments; they read their
    settings at call time.

    :attr:`zone` and :attr:`ttl` are read from the settings each time
    (``CDNAAS_DNS_DOMAIN``, ``CDNAAS_ZONE_TTL``); :meth:`delegation_of` gives a
    publisher the records it must hold.
    """

    name = "abstract"

    @property
    def zone(self):
        """The operator's zone, no trailing dot."""
        return operator_zone()

    @property
    def ttl(self):
        """TTL of the NS and glue records, in seconds."""
        return config.setting("CDNAAS_ZONE_TTL")

    def delegation_of(self, label, servers):
        """:func:`plan` in this publisher's zone and TTL."""
        return plan(label, servers, self.zone, self.ttl)

    @abc.abstractmethod
    def ensure_zone(self) -> None:
        """Make the operator's zone exist and be served (its SOA and apex NS as the
        operator set them); idempotent, called before the first publish and by
        ``cdnaas up``.

        :raises ZoneUnavailable: the DNS service could not be reached or refused.
        """

    @abc.abstractmethod
    def publish(self, label: str, servers: list) -> Delegation:
        """Delegate ``<label>.<zone>`` to ``servers``, replacing whatever delegation of
        that name is published.

        The change leaves no gap: the new NS names' glue is added before the NS set
        changes and a dropped NS name's glue is removed only after (or all in one atomic
        update), so a resolver asking at any moment gets the old delegation, the new one
        or both, never none. Idempotent: publishing the same servers again changes
        nothing.

        :param label: the name relative to the zone (``web.acme``), see
            :func:`check_label`.
        :param servers: a :class:`NameServer` per DNS VNF.
        :returns: the :class:`Delegation` now published.
        :raises ZoneRefused: a value is not acceptable (nothing changed).
        :raises ZoneUnavailable: the DNS service failed (the old or the new delegation
            is published, see above).
        """

    @abc.abstractmethod
    def withdraw(self, label: str) -> None:
        """Remove the delegation of ``<label>.<zone>``: its NS set and every glue record
        below it. Withdrawing a name not published is success.

        :raises ZoneRefused: ``label`` is not acceptable.
        :raises ZoneUnavailable: the DNS service failed.
        """

    @abc.abstractmethod
    def published(self, label: str) -> Delegation | None:
        """The delegation of ``<label>.<zone>`` as the DNS service holds it now (read
        back from it, not remembered), or None when there is none.

        :raises ZoneRefused: ``label`` is not acceptable.
        :raises ZoneUnavailable: the DNS service could not be read.
        """
