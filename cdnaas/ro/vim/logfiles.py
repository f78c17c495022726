"""Reading a VNF's log over HTTP from a byte position, across one rotation.

An nginx VNF serves its log and the log's previous generation on its management
listener (``<path>`` and ``<path>.1``: see ``templates/nginx-management.conf.j2``).
A reader keeps a :class:`~cdnaas.ro.vim.base.LogPosition`: which file it was in,
named by a fingerprint of the file's first line (a line holds the request's time in
milliseconds, its client and URI, so two generations never share it), and the byte
offset it had read to. Each read asks for the first 4 KB of both files (Range
requests) to find the position's file again, then for at most ``max_bytes`` from the
offset on, and returns whole lines only:

- the position's file is the current one: read on from the offset;
- it is the previous one (the log was rotated since): the rest of it, then the
  current one from its start;
- neither (rotated twice, or a position of another log): both files from their start,
  and the lines between are reported lost;
- no position: both files from their start (everything the VNF still holds).

The local driver reads its balancers' logs this way, the OpenStack driver its caches'
(Octavia's balancers log nothing RO reads), through the operator's management network.
"""
import dataclasses
import hashlib
import http.client
import json
import re

from cdnaas.delivery import logstreams
from cdnaas.ro.vim.base import LogChunk, LogPosition, VimError
from cdnaas.vnf import endpoints

#: bytes of a file's start its fingerprint is taken from (its first line, at most this)
HEAD_BYTES = 4096
#: bytes one read returns at most per VNF by default
READ_BYTES = 4 << 20
_CONTENT_RANGE = re.compile(r"bytes (?:(\d+)-(\d+)|\*)/(\d+)")
_TIMEOUT = 5.0
_NOTHING = LogPosition(log="", offset=0)


@dataclasses.dataclass
class LogRead:
    """What :func:`read` found: whole lines, the position after them, and the current
    file's size and whether the position is in it (a rotation may follow only then)."""

    data: bytes
    position: LogPosition
    more: bool
    lost: bool
    current_size: int
    in_current: bool


def fingerprint(head: bytes) -> str:
    """The name of a log file from its first bytes: a digest of its first line (of its
    first :data:`HEAD_BYTES` bytes when that line is longer), or ``""`` while the file
    holds no whole line yet."""
    end = head.find(b"\n")
    if end < 0 and len(head) < HEAD_BYTES:
        return ""
    first = head[:end + 1] if end >= 0 else head[:HEAD_BYTES]
    return hashlib.sha256(first).hexdigest()[:32]


class _Files:
    """GETs with Range on one kept-alive connection to a management listener."""

    def __init__(self, address, port):
        self.connection = http.client.HTTPConnection(address, port, timeout=_TIMEOUT)
        self.where = f"{address}:{port}"

    def range(self, path, start, length):
        """``(bytes from start, the file's size)``; a missing file is empty."""
        try:
            self.connection.request("GET", path,
                                    headers={"Range": f"bytes={start}-{start + length - 1}"})
            response = self.connection.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise VimError(f"cannot read {path} at {self.where}: {exc}") from exc
        if response.status == 404:
            return b"", 0
        if response.status == 416:  # nothing at or after start
            return b"", _size(response.getheader("Content-Range"), path, start)
        if response.status == 200:  # a server that ignores ranges: the whole file
            return body[start:start + length], len(body)
        if response.status != 206:
            raise VimError(f"{path} at {self.where} answered HTTP {response.status}")
        return body, _size(response.getheader("Content-Range"), path, start)

    def close(self):
        self.connection.close()


def _size(content_range, path, start):
    match = _CONTENT_RANGE.fullmatch((content_range or "").strip())
    if match is None:
        raise VimError(f"{path} answered a range from {start} without a size "
                       f"(Content-Range {content_range!r})")
    return int(match.group(3))


def read(address, port, path, position, max_bytes=READ_BYTES):
    """Whole lines of the log at ``path`` (and ``path + ".1"``) after ``position``.

    :param position: a :class:`LogPosition` this function returned before, or None (from
        the start of what the VNF holds; so is ``LogPosition("", 0)``, which names no line).
    :param max_bytes: at most this many bytes are returned (at least :data:`HEAD_BYTES`);
        a line longer than that is returned cut (its reader drops it) so that reading
        always moves on, and so is a last line the previous file never finished.
    :raises VimError: the listener could not be read.
    """
    max_bytes = max(HEAD_BYTES, max_bytes)
    files = _Files(address, port)
    try:
        current_head, current_size = files.range(path, 0, HEAD_BYTES)
        previous_head, previous_size = files.range(path + ".1", 0, HEAD_BYTES)
        current, previous = fingerprint(current_head), fingerprint(previous_head)
        start, nothing = position or _NOTHING, position in (None, _NOTHING)
        lost = False
        if not nothing and start.log == current and start.offset <= current_size:
            segments = [(path, current, start.offset, current_size)]
        elif not nothing and start.log == previous and start.offset <= previous_size:
            segments = [(path + ".1", previous, start.offset, previous_size),
                        (path, current, 0, current_size)]
        else:
            lost = not nothing
            segments = [(path + ".1", previous, 0, previous_size)] if previous_size else []
            segments.append((path, current, 0, current_size))
        chunks, left, more = [], max_bytes, False
        where, at = LogPosition(log=segments[0][1], offset=segments[0][2]), segments[0][0]
        for name, log, offset, known in segments:
            if left <= 0:  # the previous file filled this read
                more = offset < known
                break
            final = name != path  # the previous file grows no more
            data, size = files.range(name, offset, left)
            whole = data if final and offset + len(data) >= size else \
                data[:data.rfind(b"\n") + 1]
            if not whole and len(data) == left:  # one line longer than a read: cut it
                whole = data
            chunks.append(whole)
            left -= len(whole)
            if whole:  # (a position never names a file nothing was read of: an empty
                #       current one may be rotated before it is named)
                if offset == 0 and not log:  # its first line came since
                    log = fingerprint(whole[:HEAD_BYTES])
                where, at = LogPosition(log=log, offset=offset + len(whole)), name
            if offset + len(whole) < size:  # stopped inside this file
                more = left <= 0
                break
        return LogRead(data=b"".join(chunks), position=where, more=more, lost=lost,
                       current_size=current_size, in_current=at == path)
    finally:
        files.close()


def read_chunk(vnf, position, max_bytes=READ_BYTES):
    """The usage log of VNF ``vnf`` (a :class:`~cdnaas.ro.vim.base.VnfInstance`) after
    ``position``, from its management listener (:func:`read`).

    :returns: ``(LogChunk, LogRead)``.
    :raises VimError: the listener could not be read.
    """
    found = read(vnf.address, endpoints.MANAGEMENT_PORT, endpoints.USAGE_LOG_PATH, position,
                 max_bytes)
    return LogChunk(name=vnf.name, region=vnf.region, data=found.data,
                    position=found.position, more=found.more, lost=found.lost), found


def stream_statuses(pool, deployment, role):
    """:meth:`~cdnaas.ro.vim.base.VimDriver.log_stream_status` of ``deployment``'s VNFs of
    ``role``, read on their management listeners through ``pool``."""
    return list(pool.map(lambda v: {"name": v.name, "region": v.region,
                                    "shipper": stream_status(v)},
                         [v for v in deployment.vnfs if v.role == role]))


def stream_status(vnf):
    """The counts of VNF ``vnf``'s log shipper (:mod:`cdnaas.ro.vim.logship`'s ``/status``)
    from its management listener, or None when it runs none or does not answer."""
    connection = http.client.HTTPConnection(vnf.address, endpoints.MANAGEMENT_PORT,
                                            timeout=_TIMEOUT)
    try:
        connection.request("GET", logstreams.STATUS_PATH)
        response = connection.getresponse()
        body = response.read()
        return json.loads(body) if response.status == 200 else None
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        connection.close()
