"""Checks of values that end up in VNF configuration (nginx, dnsmasq, nftables).

Anything a customer or operator sends that will be rendered into a config is
parsed here into a narrow, known-safe form, or refused with a message that
says what to send instead. Renderers may rely on these forms:

- an :class:`Origin`'s ``scheme`` is ``http`` or ``https``, its ``host`` a
  lower-case DNS name (ASCII labels; an IDN in its ``xn--`` form) or an IP
  address in canonical text (IPv6 without brackets and without a zone), its
  ``port`` an int from 1 to 65535;
- a prefix is an IPv4 or IPv6 network in canonical CIDR text, without a zone.

Every pattern is applied to the whole string (``fullmatch``: ``$`` would let a
trailing newline through) and only to printable ASCII.
"""
import ipaddress
import re

from cdnaas.common import errors
from cdnaas.common.sig import Origin

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
#: A DNS name: labels of a-z, 0-9 and -, the last starting with a letter, so that
#: numeric forms resolvers read as addresses (``127.1``, ``2130706433``,
#: ``0x7f000001``) never pass as names.
HOSTNAME = re.compile(rf"(?:{_LABEL}\.)*[a-z](?:[a-z0-9-]{{0,61}}[a-z0-9])?")
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<authority>[^/?#]*)(?P<rest>.*)")
_BRACKETED = re.compile(r"\[(?P<address>[^\]]*)\](?::(?P<port>.*))?")
_PORT = re.compile(r"[0-9]{1,5}")
_PREFIX = re.compile(r"[0-9A-Fa-f:.]{2,45}(?:/[0-9]{1,3})?")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_EXAMPLE_ORIGIN = "http://origin.example.com:8080"
MAX_URL = 300
MAX_HOSTNAME = 253


def parse_origin(url, field="origin"):
    """Parse the customer's origin URL into an :class:`Origin` (the operator's origin
    policy is :func:`cdnaas.common.origin_policy.accepted_origin`'s to apply).

    Accepts ``http(s)://host[:port][/]``: ``host`` a DNS name, an IPv4 address or an
    IPv6 address in brackets (no zone), ``port`` 1 to 65535 in ASCII digits. Refuses
    paths, queries, fragments, credentials and any byte outside printable ASCII.

    :raises BadRequest: naming ``field`` and the fix.
    """
    return _parse_url(url, field)


def _parse_url(url, field):
    def refuse(problem):
        raise errors.BadRequest(f"{field} {problem}; send an http(s) URL with a host and an "
                                f"optional port from 1 to 65535, like {_EXAMPLE_ORIGIN}",
                                field=field, details=[{"field": field, "problem": problem}])

    if not isinstance(url, str):
        refuse("must be a string")
    if len(url) > MAX_URL:
        refuse(f"is longer than {MAX_URL} characters")
    if not is_printable_ascii(url):
        refuse("contains spaces, control or non-ASCII characters (write an international "
               "host name in its xn-- form)")
    parts = _URL.fullmatch(url)
    if parts is None:
        refuse("is not a URL")
    scheme, authority = parts["scheme"].lower(), parts["authority"]
    if scheme not in _DEFAULT_PORTS:
        refuse("must start with http:// or https://")
    if parts["rest"] not in ("", "/"):
        refuse("must not have a path, query or fragment (the origin is a server)")
    if "@" in authority:
        refuse("must not carry credentials")
    try:
        host, port = host_and_port(authority)
    except ValueError as exc:
        refuse(str(exc))
    return Origin(scheme=scheme, host=host, port=_DEFAULT_PORTS[scheme] if port is None else port)


def host_and_port(authority):
    """``(host, port or None)`` of an URL's authority; ValueError says what is wrong."""
    if authority.startswith("["):
        found = _BRACKETED.fullmatch(authority)
        if found is None:
            raise ValueError("has an IPv6 address not written [address] or [address]:port")
        host, port = _ipv6(found["address"]), found["port"]
    elif authority.count(":") > 1:
        raise ValueError("has an IPv6 address outside brackets; write it [address]")
    else:
        host, colon, port = authority.partition(":")
        port = port if colon else None
        host = _ipv4_or_hostname(host)
    return host, None if port is None else parse_port(port)


def parse_port(text):
    """The port in ``text`` (ASCII digits, 1 to 65535); ValueError otherwise."""
    if not _PORT.fullmatch(text) or not 1 <= int(text) <= 65535:
        raise ValueError(f"has port {shown(text)}, not a number from 1 to 65535")
    return int(text)


def _ipv6(text):
    if "%" in text:
        raise ValueError("has an IPv6 zone (%...), which origins cannot have")
    try:
        return str(ipaddress.IPv6Address(text))
    except ValueError:
        raise ValueError(f"has {shown(text)} in brackets, which is not an IPv6 address") from None


def _ipv4_or_hostname(text):
    if not text:
        raise ValueError("has no host")
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        pass
    host = text.lower()
    if len(host) > MAX_HOSTNAME or not HOSTNAME.fullmatch(host):
        raise ValueError(f"has host {shown(text)}, which is neither a DNS name (labels of "
                         "a-z, 0-9 and -, the last starting with a letter) nor an IPv4 address")
    return host


def parse_prefixes(prefixes, field="client_prefixes"):
    """Normalise client address prefixes (CIDR, IPv4 or IPv6, no zone); refuse invalid ones.

    :raises BadRequest: naming each refused item (``client_prefixes[2]``).
    """
    normalised, problems = [], []
    for index, prefix in enumerate(prefixes):
        try:
            normalised.append(str(parse_prefix(prefix)))
        except ValueError as exc:
            problems.append({"field": f"{field}[{index}]", "problem": str(exc)})
    if problems:
        raise errors.BadRequest("; ".join(f"{p['field']}: {p['problem']}" for p in problems),
                                field=problems[0]["field"], details=problems)
    return normalised


def parse_prefix(prefix):
    """An :class:`ipaddress.IPv4Network` or ``IPv6Network`` from CIDR text without a zone.

    :raises ValueError: saying what is wrong, and what to send.
    """
    if isinstance(prefix, str) and "%" in prefix:
        raise ValueError(f"{shown(prefix)} has an IPv6 zone (%...), which prefixes cannot have")
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise ValueError(f"{shown(prefix)} is not an address prefix like 10.1.0.0/16 or "
                         "2001:db8::/32")
    try:
        return ipaddress.ip_network(prefix, strict=False)
    except ValueError:
        raise ValueError(f"{shown(prefix)} is not an address prefix like 10.1.0.0/16 or "
                         "2001:db8::/32") from None


def is_printable_ascii(text):
    """Whether ``text`` has only printable ASCII (no space, control or non-ASCII character)."""
    return text.isascii() and text.isprintable() and " " not in text


def shown(value, limit=60):
    """``value`` as a message may quote it: its repr, cut at ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "...'"
