"""One grammar per field of a VNF's configuration: every value is checked here before it
reaches a template, against a narrow form that cannot carry a directive (no spaces,
quotes, ``;``, braces, ``$`` or newlines), so a rendered config only ever says what the
template says. A refused value raises :class:`ConfigError` naming the field and why.

DNS names follow the one grammar of :data:`cdnaas.common.validation.HOSTNAME` (what the
customer API accepts is what a config renders).
"""
import ipaddress
import re

from cdnaas.common import validation
from cdnaas.common.sig import Origin

NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
_PATH = re.compile(r"/[A-Za-z0-9_./-]*")


class ConfigError(Exception):
    """A value refused before rendering, or a rendered config the tool rejects.

    The message names the value and why, or quotes the tool's own words.
    """


def refuse(field, value, why):
    """Raise :class:`ConfigError`: ``field`` ``value`` and ``why`` it is refused."""
    raise ConfigError(f"{field} {value!r} {why}")


def match(field, value, pattern, why):
    """``value``, a string the whole of which ``pattern`` matches, or refused ``why``."""
    if not isinstance(value, str) or not pattern.fullmatch(value):
        refuse(field, value, why)
    return value


def name(field, value):
    """A VNF, user or region name: a-z, 0-9 and -, at most 63, not starting with -."""
    return match(field, value, NAME, "is not a name (a-z, 0-9 and -, at most 63, "
                                       "not starting with -)")


def optional_name(field, value):
    """:func:`name`, or None."""
    return None if value is None else name(field, value)


def hostname(field, value):
    """A DNS name (:data:`cdnaas.common.validation.HOSTNAME`)."""
    if not isinstance(value, str) or len(value) > validation.MAX_HOSTNAME \
            or not validation.HOSTNAME.fullmatch(value):
        refuse(field, value, "is not a DNS name (labels of a-z, 0-9 and - joined by dots, "
                              "the last starting with a letter)")
    return value


def hostnames(field, values):
    """A list of distinct DNS names (at most 64)."""
    if not isinstance(values, (list, tuple)) or len(values) > 64:
        refuse(field, values, "is not a list of at most 64 DNS names")
    names = [hostname(f"{field}[{i}]", v) for i, v in enumerate(values)]
    if len(set(names)) != len(names):
        refuse(field, values, "names a host twice")
    return names


def address(field, value):
    """An IP address in its canonical text form (which has only hex digits, ``.`` and ``:``)."""
    try:
        address = ipaddress.ip_address(value)
    except (TypeError, ValueError):
        address = None
    if address is None:
        refuse(field, value, "is not an IP address")
    if getattr(address, "scope_id", None) is not None:
        refuse(field, value, "has a zone (%...), which is not allowed")
    return str(address)


def prefix(field, value):
    """An address prefix (an :mod:`ipaddress` network, host bits allowed), without a zone."""
    try:
        prefix = ipaddress.ip_network(value, strict=False) if isinstance(value, str) else None
    except ValueError:
        prefix = None
    if prefix is None:
        refuse(field, value, "is not an address prefix like 10.1.0.0/16")
    if getattr(prefix.network_address, "scope_id", None) is not None:
        refuse(field, value, "has a zone (%...), which is not allowed")
    return prefix


def sources(field, values):
    """Addresses or prefixes as nginx's ``allow`` and ``set_real_ip_from`` take them (a
    single address written as such)."""
    if not isinstance(values, (list, tuple)):
        refuse(field, values, "is not a list of addresses or prefixes")
    sources = []
    for index, source in enumerate(values):
        network = prefix(f"{field}[{index}]", source)
        single = network.prefixlen == network.max_prefixlen  # one address: written as such
        sources.append(str(network.network_address) if single else str(network))
    return sources


def integer(field, value, low, high):
    """An int (not a bool) from ``low`` to ``high``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        refuse(field, value, f"is not an integer from {low} to {high}")
    return value


def port(field, value):
    """A port number, 1 to 65535."""
    return integer(field, value, 1, 65535)


def boolean(field, value):
    """True or False (nothing else)."""
    if not isinstance(value, bool):
        refuse(field, value, "is not true or false")
    return value


def path(field, value):
    """An absolute path of A-Z, a-z, 0-9, _ . / - without ``..``, its trailing / removed."""
    if (not isinstance(value, str) or not _PATH.fullmatch(value)
            or ".." in value.split("/") or value.rstrip("/") == ""):
        refuse(field, value, "is not an absolute path of A-Z, a-z, 0-9, _ . / - "
                              "(without ..)")
    return value.rstrip("/")


def origin(origin):
    """``(scheme, host, port)`` of ``origin``, host a DNS name or an IP address."""
    if not isinstance(origin, Origin):
        refuse("origin", origin, "is not an Origin")
    if origin.scheme not in ("http", "https"):
        refuse("origin.scheme", origin.scheme, "is not http or https")
    try:
        host = address("origin.host", origin.host)
    except ConfigError:
        host = hostname("origin.host", origin.host)
    return origin.scheme, host, port("origin.port", origin.port)


def host_header(scheme, host, port):
    """``Host`` header for ``host``: the port only when not the scheme's default."""
    if port == {"http": 80, "https": 443}[scheme]:
        return f"[{host}]" if ":" in host else host
    return host_port(host, port)


def header_variable(header):
    """nginx's variable of request header ``header`` (``$http_x_cdnaas_slice``)."""
    return "$http_" + header.lower().replace("-", "_")


def host_port(address, port):
    """``address:port`` with an IPv6 address in brackets, as nginx wants it."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
