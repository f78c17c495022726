"""The operator's origin policy: which servers a customer's caches may fetch from.

A vCDN's caches connect to its origin from inside the operator's network, so an
origin on this machine, on a link-local network or at a cloud's metadata address
would let a tenant reach what only the operator should. Two settings, read on
every check (:mod:`cdnaas.common.config`), decide:

``CDNAAS_ORIGIN_ALLOW``
    Comma-separated addresses, CIDRs and host names, each optionally with
    ``:port`` (``127.0.0.1:8080``, ``[::1]:8080``, ``origin.example.com``,
    ``10.20.0.0/16``). An origin whose host name is listed, or whose every
    address is in a listed network, is allowed whatever the deny list says.
``CDNAAS_ORIGIN_DENY``
    Comma-separated addresses, CIDRs, host names and keywords (see
    :data:`KEYWORDS`); unset, :data:`cdnaas.common.settings.ORIGIN_DENY_DEFAULT`.
    ``default`` stands for that default list (``default,private`` adds private
    networks), ``none`` refuses nothing.

A host name is resolved (A and AAAA, within ``CDNAAS_ORIGIN_RESOLVE_TIMEOUT``
seconds, default 2) and refused if any of its addresses is denied. A name that
does not resolve then (no such name, no address, or no answer in time) is
allowed, since a customer may lease a vCDN before the origin's DNS record
exists, unless the deny list has the keyword ``unresolved``. IPv4-mapped
(``::ffff:a.b.c.d``) and NAT64 (``64:ff9b::a.b.c.d``) addresses are also judged by
the IPv4 address they carry.
"""
import concurrent.futures
import contextlib
import dataclasses
import ipaddress
import logging
import socket

from cdnaas.common import config, errors, settings, validation

LOG = logging.getLogger(__name__)

#: Keywords of ``CDNAAS_ORIGIN_DENY``: the networks each stands for (``vnf-pool``:
#: ``CDNAAS_LOCAL_POOL``, the local driver's VNF addresses) and how messages call them.
KEYWORDS = {
    "loopback": (("127.0.0.0/8", "::1/128"), "a loopback address"),
    "link-local": (("169.254.0.0/16", "fe80::/10"), "a link-local address"),
    "metadata": (("169.254.169.254/32", "fd00:ec2::254/128"), "the cloud metadata address"),
    "unspecified": (("0.0.0.0/8", "::/128"), "an unspecified address"),
    "private": (("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"),
                "a private address"),
    "vnf-pool": ((), "an address of the VNF pool"),
    "unresolved": ((), "a name that does not resolve"),
}
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
#: (host, port) of origins this process serves for the operator itself (a calibration's
#: sample origin in RO), allowed while they serve: see :func:`operator_origin`
_OPERATOR_ORIGINS = set()
_resolver = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="origin-resolve")


@dataclasses.dataclass(frozen=True)
class Entry:
    """One item of a policy setting: a network or a host name, a port or any port."""

    text: str
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    hostname: str | None = None
    port: int | None = None
    why: str = ""

    def covers_name(self, origin):
        return self.hostname == origin.host and self.port in (None, origin.port)

    def covers_address(self, address, port):
        return (self.network is not None and address.version == self.network.version
                and address in self.network and self.port in (None, port))


@contextlib.contextmanager
def operator_origin(host, port):
    """Allow the origin at ``host``:``port``, which this process serves for the operator
    (never a tenant's: only code of the process can name one), while the block runs."""
    key = (host, port)
    _OPERATOR_ORIGINS.add(key)
    try:
        yield
    finally:
        _OPERATOR_ORIGINS.discard(key)


def accepted_origin(url, field="origin"):
    """The customer's origin URL parsed (:func:`cdnaas.common.validation.parse_origin`) and
    checked against the policy (:func:`check`).

    :raises BadRequest: naming ``field``, what is wrong and what to send instead.
    """
    origin = validation.parse_origin(url, field)
    check(origin, field)
    return origin


def check(origin, field="origin"):
    """Refuse ``origin`` (an :class:`~cdnaas.common.sig.Origin`) if the policy denies it.

    :raises BadRequest: naming ``field``, why the origin is refused and what to do.
    :raises CdnaasError: (500) a policy setting has an item that means nothing.
    """
    if (origin.host, origin.port) in _OPERATOR_ORIGINS:
        return
    allow, deny, refuse_unresolved = _policy()
    if any(entry.covers_name(origin) for entry in allow):
        return
    for entry in deny:
        if entry.covers_name(origin):
            _refuse(field, origin, f"its host {origin.host} is on the operator's deny list")
    try:
        addresses = [ipaddress.ip_address(origin.host)]
    except ValueError:
        addresses = _resolve(origin.host)
        if not addresses:
            if refuse_unresolved:
                _refuse(field, origin, f"its host {origin.host} does not resolve; the operator "
                                       "accepts only origins whose name resolves")
            LOG.info("origin host %s does not resolve; allowed (policy checked again when "
                     "it does)", origin.host)
            return
    _check_addresses(allow, deny, origin, addresses, field)


def check_resolved(origin, addresses, field="origin"):
    """Refuse connecting to ``origin`` at ``addresses``, what a VIM driver resolved its host
    to when deploying: the name may point elsewhere than when the vCDN was accepted.

    :raises BadRequest: as :func:`check`.
    """
    if (origin.host, origin.port) in _OPERATOR_ORIGINS:
        return
    allow, deny, _refuse_unresolved = _policy()
    if any(entry.covers_name(origin) for entry in allow):
        return
    _check_addresses(allow, deny, origin, [ipaddress.ip_address(a) for a in addresses], field)


def _check_addresses(allow, deny, origin, addresses, field):
    for address in addresses:
        judged = _judged_as(address)
        if any(e.covers_address(a, origin.port) for e in allow for a in judged):
            continue
        denied = [e for e in deny for a in judged if e.covers_address(a, origin.port)]
        if denied:
            denied = max(denied, key=lambda e: e.network.prefixlen)  # the most specific reason
            where = "" if str(address) == origin.host else f"its host resolves to {address}, "
            _refuse(field, origin, f"{where}{denied.why}, which this operator refuses for "
                                   "origins")


def _refuse(field, origin, problem):
    message = (f"{field} {origin.url} is not allowed: {problem}; use a public origin server, "
               "or ask the operator to allow this one (CDNAAS_ORIGIN_ALLOW)")
    raise errors.BadRequest(message, field=field, details=[{"field": field, "problem": problem}])


def _judged_as(address):
    """``address`` and the IPv4 address it carries, if it is IPv4-mapped or NAT64."""
    found = [address]
    if address.version == 6:
        if address.ipv4_mapped is not None:
            found.append(address.ipv4_mapped)
        elif address in _NAT64:
            found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def _resolve(host):
    """Addresses of ``host``, or [] if it does not resolve within the timeout."""
    timeout = config.setting("CDNAAS_ORIGIN_RESOLVE_TIMEOUT")
    future = _resolver.submit(socket.getaddrinfo, host, None, proto=socket.IPPROTO_TCP)
    try:
        infos = future.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        LOG.warning("origin host %s did not resolve within %s s", host, timeout)
        return []
    except (OSError, UnicodeError):
        return []
    return sorted({ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos},
                  key=lambda a: (a.version, a))


def _policy():
    """``(allow entries, deny entries, refuse names that do not resolve)`` as set now."""
    allow = [_entry(item, "CDNAAS_ORIGIN_ALLOW", keywords=False) for item in config.origin_allow()]
    items = config.origin_deny()
    if "default" in items:
        items = [i for i in items if i != "default"] + settings.ORIGIN_DENY_DEFAULT
    if items == ["none"]:
        items = []
    deny = [entry for item in items
            for entry in _keyword(item) or [_entry(item, "CDNAAS_ORIGIN_DENY", keywords=True)]]
    return allow, deny, "unresolved" in items


def _keyword(item):
    """The entries a deny keyword stands for ([] if ``item`` is no keyword)."""
    if item not in KEYWORDS:
        return []
    networks, why = KEYWORDS[item]
    if item == "vnf-pool":
        networks = (config.local_pool(),)
    return [Entry(text=item, network=ipaddress.ip_network(n, strict=False), why=why)
            for n in networks] or [Entry(text=item, why=why)]


def _entry(item, setting, keywords):
    """One address, CIDR or host name (``:port`` optional) of ``setting``."""
    try:
        if item.startswith("["):
            inside, bracket, rest = item[1:].partition("]")
            if not bracket:
                raise ValueError(item)
            network_text, port = inside, _port(rest, item)
        elif item.count(":") == 1:
            network_text, port_text = item.split(":")
            port = validation.parse_port(port_text)
        else:
            network_text, port = item, None
        if "%" not in network_text:
            try:
                network = ipaddress.ip_network(network_text, strict=False)
                return Entry(text=item, network=network, port=port, why=f"it is in {item}")
            except ValueError:
                pass
        name = network_text.lower()
        if validation.HOSTNAME.fullmatch(name) and len(name) <= validation.MAX_HOSTNAME:
            return Entry(text=item, hostname=name, port=port)
    except ValueError:
        pass
    known = f" or a keyword ({', '.join(['default', 'none', *KEYWORDS])})" if keywords else ""
    raise errors.CdnaasError(f"the operator setting {setting} has {item!r}, which is not an "
                             f"address, CIDR or host name (optionally with :port){known}; "
                             "fix the setting", field=setting)


def _port(rest, item):
    if not rest:
        return None
    if not rest.startswith(":"):
        raise ValueError(item)
    return validation.parse_port(rest[1:])
