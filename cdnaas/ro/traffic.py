"""Traffic of a deployment from its usage logs: records, per-minute figures, cursors and
the raw export.

Each balancer (behind Octavia: each cache, :attr:`~cdnaas.ro.vim.base.VimDriver.logging_role`)
logs every viewer request as one JSON line (``templates/nginx-usage-log.conf.j2``, nginx
``escape=json``)::

    {"t":1767225600.123,"s":"200","b":445712,"bb":445440,"rt":0.004,"c":"HIT",
     "m":"GET","u":"/video/hd/seg-1.m4s","a":"10.1.0.10"}

``t`` the time the request ended (epoch seconds with milliseconds), ``s`` the status,
``b`` the bytes sent to the viewer (status line, headers and body: what it received),
``bb`` the body bytes, ``rt`` the request time in seconds, ``c`` the serving cache's
``X-Cache-Status``, ``m``/``u``/``a`` method, URI and client address. Lines carry as
well (logs written before they did still parse without them) ``h`` the Host name,
``sni`` the TLS SNI name, ``p`` the protocol (``HTTP/1.1``, ``HTTP/2.0``), ``tls`` the TLS
version (``TLSv1.3``; empty over plain HTTP), ``ua`` the user agent and ``r`` the
referer. A line that is not exactly that (cut, not UTF-8 where it must be, too long, a
key twice, missing or unknown, a value of another type) is skipped and counted, never
trusted in part.

A **cursor** is the readers' positions (``{balancer: LogPosition}``) as base64url JSON:
opaque to its holder, checked here when it comes back.
"""
import base64
import binascii
import dataclasses
import datetime as dt
import json
import re

from cdnaas.common import errors
from cdnaas.common.timeutil import LATEST, isoformat
from cdnaas.ro.vim.base import LogPosition, VimError

#: longest log line parsed (nginx refuses request lines past its header buffers, 8 KB)
MAX_LINE = 64 << 10
#: longest cursor accepted (a position per balancer, a few dozen bytes each)
MAX_CURSOR = 8192
#: cache statuses served from the cache, and fetched from the origin
HITS = frozenset({"HIT", "STALE", "UPDATING", "REVALIDATED"})
MISSES = frozenset({"MISS", "EXPIRED", "BYPASS"})
STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx")
_KEYS = {"t": (int, float), "s": str, "b": int, "bb": int, "rt": (int, float), "c": str,
         "m": str, "u": str, "a": str}
#: keys of the request's names and client, each a text, in lines since they were logged
_DETAILS = {"h": "host", "sni": "sni", "p": "protocol", "tls": "tls_version",
            "ua": "user_agent", "r": "referer"}
_STATUS = re.compile(r"[0-9]{3}")
_LOG_NAME = re.compile(r"[A-Za-z0-9_.-]{0,64}")
_VNF_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
#: times a record may carry (seconds since the epoch): 1970 to 9000, as every API time
_LATEST = LATEST.timestamp()


@dataclasses.dataclass(frozen=True)
class Record:
    """One request as a balancer logged it (see the module docstring)."""

    time: float
    status: int
    bytes_sent: int
    body_bytes_sent: int
    request_time: float
    cache_status: str
    method: str
    uri: str
    client: str
    host: str = ""
    sni: str = ""
    protocol: str = ""
    tls_version: str = ""
    user_agent: str = ""
    referer: str = ""

    def export(self, region):
        """The record as the access-log export writes it (one JSON object; what the log
        left empty is null)."""
        return {"time": _time_text(self.time), "region": region, "status": self.status,
                "bytes_sent": self.bytes_sent,
                "body_bytes_sent": self.body_bytes_sent, "request_time": self.request_time,
                "cache_status": self.cache_status or None, "method": self.method,
                "uri": self.uri, "client": self.client,
                **{name: getattr(self, name) or None for name in _DETAILS.values()}}


def _time_text(seconds):
    moment = dt.datetime.fromtimestamp(seconds, dt.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _no_duplicates(pairs):
    found = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"key {key} twice")
        found[key] = value
    return found


def parse_line(line: bytes) -> Record | None:
    """The :class:`Record` of one log line (without its newline), or None if it is not one."""
    if len(line) > MAX_LINE:
        return None
    try:
        # nginx escapes quotes, backslashes and control bytes but passes other bytes as
        # they came: a URI's invalid UTF-8 becomes U+FFFD, the record still counts
        fields = json.loads(line.decode("utf-8", "replace"), object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError):
        return None
    if not isinstance(fields, dict) or not set(_KEYS) <= set(fields) <= set(_KEYS) | \
            set(_DETAILS):
        return None
    for key, kinds in _KEYS.items():
        if isinstance(fields[key], bool) or not isinstance(fields[key], kinds):
            return None
    if not all(isinstance(fields.get(key, ""), str) for key in _DETAILS):
        return None
    if not _STATUS.fullmatch(fields["s"]) or fields["b"] < 0 or fields["bb"] < 0 \
            or fields["bb"] > fields["b"] or not 0 <= fields["t"] < _LATEST \
            or not 0 <= fields["rt"] < 1e7:
        return None
    return Record(time=float(fields["t"]), status=int(fields["s"]), bytes_sent=fields["b"],
                  body_bytes_sent=fields["bb"], request_time=float(fields["rt"]),
                  cache_status=fields["c"], method=fields["m"], uri=fields["u"],
                  client=fields["a"],
                  **{name: fields.get(key, "") for key, name in _DETAILS.items()})


def parse(data: bytes) -> tuple[list[Record], int]:
    """``(records, lines skipped)`` of whole log lines."""
    records, skipped = [], 0
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        record = parse_line(line)
        if record is None:
            skipped += 1
        else:
            records.append(record)
    return records, skipped


def status_class(status):
    """``"2xx"`` ... ``"5xx"``, or None for any other status."""
    name = f"{status // 100}xx"
    return name if name in STATUS_CLASSES else None


def minutes(records):
    """Per-minute figures of ``records``, oldest minute first: ``[{"minute" (ISO, the
    minute's start), "requests", "bytes_out", "hits", "misses", "status": {"2xx"...}}]``."""
    found = {}
    for record in records:
        start = int(record.time // 60) * 60
        figures = found.get(start)
        if figures is None:
            figures = found[start] = {"requests": 0, "bytes_out": 0, "hits": 0, "misses": 0,
                                      "status": dict.fromkeys(STATUS_CLASSES, 0)}
        figures["requests"] += 1
        figures["bytes_out"] += record.bytes_sent
        figures["hits"] += record.cache_status in HITS
        figures["misses"] += record.cache_status in MISSES
        kind = status_class(record.status)
        if kind:
            figures["status"][kind] += 1
    return [{"minute": isoformat(dt.datetime.fromtimestamp(start, dt.timezone.utc)),
             **found[start]} for start in sorted(found)]


# -- cursors --------------------------------------------------------------------------

def encode_cursor(positions: dict[str, LogPosition]) -> str:
    """The cursor of ``positions`` (base64url JSON, no padding)."""
    document = {name: [p.log, p.offset] for name, p in sorted(positions.items())}
    text = json.dumps(document, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(text).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> dict[str, LogPosition]:
    """The positions in ``cursor`` ({} for none).

    :raises BadRequest: (field ``cursor``) it is not one :func:`encode_cursor` made.
    """
    if not cursor:
        return {}
    refused = errors.BadRequest("cursor is not one this service returned; send the "
                                "cursor of the previous answer as it was, or none to "
                                "read from the start", field="cursor")
    if len(cursor) > MAX_CURSOR or not re.fullmatch(r"[A-Za-z0-9_-]+", cursor):
        raise refused
    try:
        document = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error):
        raise refused from None
    if not isinstance(document, dict):
        raise refused
    positions = {}
    for name, value in document.items():
        if not (_VNF_NAME.fullmatch(name) and isinstance(value, list) and len(value) == 2
                and isinstance(value[0], str) and _LOG_NAME.fullmatch(value[0])
                and isinstance(value[1], int) and not isinstance(value[1], bool)
                and 0 <= value[1] < 1 << 62):
            raise refused
        positions[name] = LogPosition(log=value[0], offset=value[1])
    return positions


# -- reading through the driver -------------------------------------------------------

#: reads of every balancer one export makes at most (each up to the driver's read size)
MAX_EXPORT_READS = 256
#: records an export returns by default (at most 1,000,000: api-spec/ro.yaml, checked at the gate)
EXPORT_LIMIT = 100_000
#: the longest window an export may ask for, and the default one
EXPORT_LONGEST = dt.timedelta(days=7)
EXPORT_DEFAULT = dt.timedelta(hours=1)


def read(driver, deployment, cursor):
    """New traffic of ``deployment`` since ``cursor``, per region and minute.

    The driver reads every balancer in parallel and may let go of what was read
    (``release``): the caller keeps the returned cursor.

    :returns: ``{"cursor", "more", "regions": [{"region", "vnf", "minutes", "records",
        "skipped", "lost"}]}`` (see ``api-spec/ro.yaml``).
    :raises BadRequest: the cursor is not one this service made.
    :raises VimError: a balancer could not be read.
    """
    positions = decode_cursor(cursor)
    chunks = driver.read_logs(deployment, positions, release=True)
    regions = []
    for chunk in chunks:
        records, skipped = parse(chunk.data)
        regions.append({"region": chunk.region, "vnf": chunk.name, "minutes": minutes(records),
                        "records": len(records), "skipped": skipped, "lost": chunk.lost})
    return {"cursor": encode_cursor({c.name: c.position for c in chunks}),
            "more": any(c.more for c in chunks), "regions": regions}


def export(driver, deployment, since, until, limit):
    """NDJSON lines (bytes) of the records of ``deployment`` whose time is within
    ``[since, until)`` (epoch seconds), at most ``limit``, balancer by balancer as read
    (every balancer holds its log and the previous generation), each read's records in
    time order (each nginx worker buffers its own lines: a log is in the order they were
    written). Reads release nothing.

    :raises VimError: a balancer could not be read (before the first line; later the
        stream ends early and its last line says why).
    """
    positions, sent = {}, 0
    for _read in range(MAX_EXPORT_READS):
        try:
            chunks = driver.read_logs(deployment, positions)
        except VimError as exc:
            if not positions:
                raise
            yield ndjson_line({"error": f"the export stopped early: {exc}"})
            return
        for chunk in chunks:
            for record in sorted(parse(chunk.data)[0], key=lambda r: r.time):
                if since <= record.time < until:
                    if sent >= limit:
                        return
                    sent += 1
                    yield ndjson_line(record.export(chunk.region))
        positions = {c.name: c.position for c in chunks}
        if not any(c.more for c in chunks):
            return


def ndjson_line(document):
    """``document`` as one NDJSON line (ASCII: a URI's odd characters are escaped)."""
    return json.dumps(document, separators=(",", ":")).encode() + b"\n"
