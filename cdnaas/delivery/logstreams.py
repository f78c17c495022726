"""Log streams: a vCDN's access records pushed to the customer's collectors as they happen.

The option ``log_streams`` is a list of at most :data:`MAX_STREAMS` destinations, each

- ``{"type": "syslog", "address": "host:port", "transport": "tcp" | "tls",
  "ca_certificate": PEM}``: RFC 5424 messages, octet-counted (RFC 6587 over TCP, RFC 5425
  over TLS; ``ca_certificate``, TLS only, is the collector's issuer, else the system's);
- ``{"type": "https", "url": "https://host[:port]/path", "headers": {...},
  "batch_records": N, "batch_seconds": S}``: NDJSON batches POSTed (``http://`` only to a
  loopback collector, for tests), with the whitelisted ``headers`` (:data:`HEADER_NAMES`,
  or ``X-...``).

Hosts are DNS names or IP addresses judged by the operator's origin policy
(:mod:`cdnaas.common.origin_policy`: a collector is reached from the operator's network,
as an origin is). The VNF that writes the usage log also sends each record as a UDP syslog
datagram to :data:`SYSLOG_PORT` on its loopback (never blocking nginx), where the shipper
(:mod:`cdnaas.ro.vim.logship`) queues it, bounded, and forwards it; :func:`shipper_config`
is the shipper's config.
"""
import ipaddress
import re
import urllib.parse

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from cdnaas.common import config, errors, validation
from cdnaas.common.sig import Origin

FIELD = "log_streams"
#: the caches render it on OpenStack (they write the usage log there), the balancers on
#: the local driver
ROLES = ("cache", "load_balancer")

MAX_STREAMS = 2
#: the VNF's loopback UDP port nginx sends each usage record to, and the shipper's status
SYSLOG_PORT = 5140
STATUS_PORT = 5141
#: the syslog APP-NAME nginx tags the records with (and the shipper's RFC 5424 APP-NAME)
TAG = "cdnaas"
#: where the management listener answers the shipper's counts (JSON; ``/metrics`` after it:
#: Prometheus counters)
STATUS_PATH = "/cdnaas/log-stream"
HEADER_NAMES = {"authorization", "x-api-key", "dd-api-key", "x-insert-key"}
_HEADER_NAME = re.compile(r"x-[a-z0-9-]{1,60}")
MAX_HEADERS = 8
MAX_HEADER_VALUE = 1000
MAX_CA_BYTES = 32 << 10
BATCH_RECORDS = (1, 10_000, 500)  # least, most, default
BATCH_SECONDS = (1, 60, 5)
_KEYS = {"syslog": {"type", "address", "transport", "ca_certificate"},
         "https": {"type", "url", "headers", "batch_records", "batch_seconds"}}
_DEFAULT_PORTS = {"http": 80, "https": 443}
MASK = "********"


def check(value, field):
    """``value`` (a list of destinations) checked into its stored form (defaults filled
    in), or None for none.

    :raises BadRequest: naming the first refused field (``log_streams[1].address``).
    """
    if not isinstance(value, list):
        _refuse(field, "must be a list of destinations (syslog or https)")
    if len(value) > MAX_STREAMS:
        _refuse(field, f"has {len(value)} destinations; at most {MAX_STREAMS}")
    stored = [_destination(item, f"{field}[{index}]") for index, item in enumerate(value)]
    return stored or None


def view(stored):
    """The destinations as the vCDN's view shows them: header values masked."""
    return [{**d, "headers": {name: MASK for name in d["headers"]}} if "headers" in d else d
            for d in stored or []]


def render(stored):
    """What the nginx templates get, or None (no streams): ``server`` (where the VNF sends
    its usage records to its shipper), ``tag``, and ``status`` / ``status_path`` (where the
    shipper answers its counts, and where the management listener shows them)."""
    if not stored:
        return None
    return {"server": f"127.0.0.1:{SYSLOG_PORT}", "tag": TAG,
            "status": f"127.0.0.1:{STATUS_PORT}", "status_path": STATUS_PATH}


def shipper_config(stored, hostname, connect_to=lambda host, port: host):
    """The shipper's config (:mod:`cdnaas.ro.vim.logship`) for the stored destinations.

    :param hostname: the RFC 5424 HOSTNAME of the records (the VNF's name).
    :param connect_to: ``(host, port) ->`` the address the VNF reaches a collector at (the
        local driver's VNFs reach this machine at their bridge's gateway).
    """
    destinations = []
    for index, item in enumerate(stored or []):
        if item["type"] == "syslog":
            host, port = validation.host_and_port(item["address"])
            destinations.append({"name": f"{index}:syslog", "type": "syslog", "host": host,
                                 "port": port, "connect": connect_to(host, port),
                                 "tls": item["transport"] == "tls",
                                 "ca_certificate": item.get("ca_certificate")})
        else:
            url = urllib.parse.urlsplit(item["url"])
            host, port = validation.host_and_port(url.netloc)
            port = port or _DEFAULT_PORTS[url.scheme]
            destinations.append({
                "name": f"{index}:https", "type": "https", "host": host,
                "port": port, "connect": connect_to(host, port),
                "tls": url.scheme == "https",
                "path": urllib.parse.urlunsplit(("", "", url.path or "/", url.query, "")),
                "headers": item["headers"], "batch_records": item["batch_records"],
                "batch_seconds": item["batch_seconds"]})
    return {"listen": f"127.0.0.1:{SYSLOG_PORT}", "status": f"127.0.0.1:{STATUS_PORT}",
            "app": TAG, "hostname": hostname,
            "queue_records": config.setting("CDNAAS_LOG_STREAM_QUEUE_RECORDS"),
            "destinations": destinations}


def _destination(item, field):
    if not isinstance(item, dict):
        _refuse(field, "must be an object with type syslog or https")
    kind = item.get("type")
    if kind not in _KEYS:
        _refuse(f"{field}.type", "must be syslog or https")
    unknown = sorted(set(item) - _KEYS[kind])
    if unknown:
        _refuse(f"{field}.{unknown[0]}", f"is not a field of a {kind} destination "
                f"(it has {', '.join(sorted(_KEYS[kind]))})")
    return _syslog(item, field) if kind == "syslog" else _https(item, field)


def _syslog(item, field):
    host, port = _host_port(item.get("address"), f"{field}.address", "tcp")
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    transport = item.get("transport", "tcp")
    if transport not in ("tcp", "tls"):
        _refuse(f"{field}.transport", "must be tcp or tls")
    out = {"type": "syslog", "address": address, "transport": transport}
    if item.get("ca_certificate") is not None:
        if transport != "tls":
            _refuse(f"{field}.ca_certificate", "is for transport tls only")
        out["ca_certificate"] = _ca(item["ca_certificate"], f"{field}.ca_certificate")
    return out


def _https(item, field):
    name = f"{field}.url"
    url = item.get("url")
    if not isinstance(url, str) or len(url) > validation.MAX_URL \
            or not validation.is_printable_ascii(url):
        _refuse(name, f"must be a URL of at most {validation.MAX_URL} printable ASCII "
                "characters (no spaces or control characters)")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in _DEFAULT_PORTS or parts.fragment or "@" in parts.netloc:
        _refuse(name, "must be https://host[:port]/path (no credentials or fragment)")
    host, _port = _host_port(parts.netloc, name, parts.scheme, port_required=False)
    if parts.scheme == "http" and not _loopback(host):
        _refuse(name, "must use https (http only to a collector on this machine's loopback)")
    headers = item.get("headers", {})
    if not isinstance(headers, dict) or len(headers) > MAX_HEADERS:
        _refuse(f"{field}.headers", f"must be an object of at most {MAX_HEADERS} headers")
    checked = {}
    for header, value in headers.items():
        where = f"{field}.headers.{validation.shown(header, 40)}"
        if not isinstance(header, str) or not (header.lower() in HEADER_NAMES
                                               or _HEADER_NAME.fullmatch(header.lower())):
            _refuse(where, f"is not a header a collector may be sent: "
                    f"{', '.join(sorted(HEADER_NAMES))} or X-...")
        if not isinstance(value, str) or not value or len(value) > MAX_HEADER_VALUE \
                or not (value.isascii() and value.isprintable()):
            _refuse(where, f"must be 1 to {MAX_HEADER_VALUE} printable ASCII characters")
        if value == MASK:
            _refuse(where, "is the masked value the view shows: send the header's value again")
        checked[header] = value
    return {"type": "https", "url": url, "headers": checked,
            "batch_records": _number(item, "batch_records", field, BATCH_RECORDS),
            "batch_seconds": _number(item, "batch_seconds", field, BATCH_SECONDS)}


def _host_port(text, field, scheme, port_required=True):
    """``(host, port or None)`` of ``text`` (``host:port``), the host allowed by the origin
    policy."""
    if not isinstance(text, str) or not validation.is_printable_ascii(text) \
            or len(text) > validation.MAX_HOSTNAME + 8:
        _refuse(field, "must be host:port in printable ASCII (no spaces or control characters)")
    try:
        host, port = validation.host_and_port(text)
    except ValueError as exc:
        _refuse(field, str(exc))
    if port is None and port_required:
        _refuse(field, "has no port; send host:port, like collector.example.com:6514")
    from cdnaas.common import origin_policy  # pylint: disable=import-outside-toplevel
    origin_policy.check(Origin(scheme=scheme, host=host,
                               port=port or _DEFAULT_PORTS.get(scheme, 0)), field)
    return host, port


def _ca(pem, field):
    if not isinstance(pem, str) or len(pem) > MAX_CA_BYTES or not pem.isascii():
        _refuse(field, f"must be PEM text of at most {MAX_CA_BYTES} bytes")
    try:
        certificates = x509.load_pem_x509_certificates(pem.encode("ascii"))
    except ValueError:
        _refuse(field, "must be one or more PEM certificates (-----BEGIN CERTIFICATE-----)")
    return "".join(c.public_bytes(encoding=Encoding.PEM).decode("ascii") for c in certificates)


def _number(item, key, field, bounds):
    least, most, default = bounds
    value = item.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        _refuse(f"{field}.{key}", f"must be a whole number from {least} to {most}")
    return value


def _loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _refuse(field, problem):
    raise errors.BadRequest(f"{field} {problem}", field=field,
                            details=[{"field": field, "problem": problem}])

