"""Checks of values that end up in VNF configuration (nginx, dnsmasq).

Anything a customer or operator sends that will be rendered into a config is
parsed here into a narrow, known-safe form, or refused with a message that
says what to send instead. Renderers may rely on these forms.
"""
import ipaddress
import re
from urllib.parse import urlsplit

from cdnaas.common import errors
from cdnaas.common.sig import Origin

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")
_EXAMPLE_ORIGIN = "http://origin.example.com:8080"


def parse_origin(url, field="origin"):
    """Parse the customer's origin URL into an :class:`Origin`.

    Accepts ``http(s)://host[:port][/]`` where host is a DNS name or an IP
    address; refuses paths, queries, credentials and any character that could
    break out of a config value.

    :raises BadRequest: naming ``field`` and the fix.
    """
    def refuse(problem):
        raise errors.BadRequest(f"{field} {problem}; send an http(s) URL with a host, "
                                f"like {_EXAMPLE_ORIGIN}", field=field)

    if not isinstance(url, str) or any(c.isspace() or c in ";{}'\"\\$`<>|" for c in url):
        refuse("contains characters not allowed in an origin URL")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        refuse(f"is not a valid URL ({exc})")
    if parts.scheme not in ("http", "https"):
        refuse("must start with http:// or https://")
    if not parts.hostname:
        refuse("has no host")
    if parts.username or parts.password:
        refuse("must not carry credentials")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        refuse("must not have a path, query or fragment (the origin is a server)")
    host = parts.hostname
    if not _is_ip(host) and not _HOSTNAME.match(host):
        refuse(f"host {host!r} is neither a DNS name nor an IP address")
    default_port = 443 if parts.scheme == "https" else 80
    return Origin(scheme=parts.scheme, host=host.lower(), port=port or default_port)


def parse_prefixes(prefixes, field="client_prefixes"):
    """Normalise client address prefixes (CIDR, IPv4 or IPv6); refuse invalid ones."""
    normalised, problems = [], []
    for index, prefix in enumerate(prefixes):
        try:
            normalised.append(str(ipaddress.ip_network(prefix, strict=False)))
        except (ValueError, TypeError):
            problems.append({"field": f"{field}[{index}]",
                             "problem": f"{prefix!r} is not an address prefix like 10.1.0.0/16"})
    if problems:
        raise errors.BadRequest("; ".join(p["problem"] for p in problems),
                                field=problems[0]["field"], details=problems)
    return normalised


def _is_ip(host):
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False
