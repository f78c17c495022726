"""A sample origin: deterministic test objects of the CDNaaS paper's sizes.

Paths served (``GET`` and ``HEAD``):

- ``/objects/small`` (43 B), ``/objects/chunk-low`` (73 KB), ``/objects/chunk-hd`` (435 KB);
- ``/video/manifest.mpd``: a DASH-like MPD listing :data:`SEGMENTS` segments of 2 s
  per quality, ``/video/hd/seg-<n>.m4s`` (435 KB) and ``/video/low/seg-<n>.m4s``
  (73 KB), ``n`` from 1;
- the same video as one media file per quality, ``/video/<quality>/media.mp4`` (its
  segments back to back), played by byte ranges: ``/video/manifest-ranges.mpd`` (DASH,
  each segment a ``SegmentURL mediaRange`` of the file) and ``/video/<quality>/media.m3u8``
  (HLS, an ``EXT-X-BYTERANGE`` per segment);
- ``/large/<n>m.bin`` and ``/large/<n>g.bin``: ``n`` MiB or GiB (at most
  :data:`LARGE_MAX_BYTES`), made as they are sent, never held in memory;
- ``/nocache/<anything>``: 43 B sent with ``Cache-Control: no-store``.
- ``/plain/<anything>``: 43 B sent without ``Cache-Control`` (the cache's rules decide).

Everything else answers 404. Objects carry ``Cache-Control: public, max-age=3600``
unless said otherwise; their bytes are a pattern derived from the path, so the
same path always gives the same bytes (:func:`object_bytes`, :func:`object_range`).

Ranges (RFC 9110): every object says ``Accept-Ranges: bytes``, a strong ``ETag`` and a
``Last-Modified``; a ``GET`` with one satisfiable byte range answers 206 with
``Content-Range``, one no byte of the object satisfies 416 (``Content-Range: bytes
*/<size>``); several ranges, a Range header that does not parse, or an ``If-Range`` that
is not the object's ETag or Last-Modified get the whole object (200), as RFC 9110 allows.

Every request for an object (any status) is counted per path, and so are the body bytes
sent: ``GET /_stats`` returns the request counts as JSON, ``GET /_bytes`` the bytes,
``POST /_stats/reset`` clears both.
The headers of the last request for each path are kept (:meth:`OriginServer.headers_of`),
and an origin told to fail (:attr:`OriginServer.failing`: a status) answers every object
request with it.

Run it with ``python -m cdnaas.origin.server --host H --port P``, or in a thread
with :func:`serve_in_thread`.
"""
import argparse
import collections
import functools
import hashlib
import http.server
import json
import logging
import re
import socket
import threading

from werkzeug import http as http_headers

log = logging.getLogger(__name__)

KB = 1024
#: Fixed objects and their sizes in bytes.
OBJECTS = {"/objects/small": 43, "/objects/chunk-low": 73 * KB, "/objects/chunk-hd": 435 * KB}
#: Segment size in bytes per video quality.
QUALITIES = {"hd": 435 * KB, "low": 73 * KB}
SEGMENTS = 300
SEGMENT_SECONDS = 2
CACHEABLE = "public, max-age=3600"
NO_STORE = "no-store"

#: the largest ``/large/`` object
LARGE_MAX_BYTES = 4 << 30
#: a large object is made and sent this many bytes at a time
SEND_CHUNK = 256 * KB
#: what every object says it was last modified (its bytes never change)
LAST_MODIFIED = "Thu, 01 Jan 2026 00:00:00 GMT"
MEDIA_FILE = "media.mp4"

_SEGMENT = re.compile(r"^/video/(?P<quality>[a-z]+)/seg-(?P<number>[1-9][0-9]*)\.m4s$")
_MEDIA = re.compile(r"^/video/(?P<quality>[a-z]+)/media\.(?P<kind>mp4|m3u8)$")
_LARGE = re.compile(r"^/large/(?P<count>[1-9][0-9]{0,4})(?P<unit>[mg])\.bin$")


def _unit(path):
    return path.encode() + b"\n" + hashlib.sha256(path.encode()).digest()


def object_range(path: str, start: int, stop: int) -> bytes:
    """Bytes ``start`` to ``stop`` (excluded) of ``path``'s pattern: the path and its
    SHA-256, repeated from offset 0."""
    unit = _unit(path)
    offset = start % len(unit)
    return (unit * ((offset + stop - start) // len(unit) + 1))[offset:offset + stop - start]


@functools.lru_cache(maxsize=64)
def object_bytes(path: str, size: int) -> bytes:
    """``size`` deterministic bytes for ``path`` (:func:`object_range` from 0)."""
    return object_range(path, 0, size)


def etag(path: str, size: int) -> str:
    """The strong ETag of the object ``path`` of ``size`` bytes."""
    return f'"{hashlib.sha256(path.encode()).hexdigest()[:16]}-{size:x}"'


def segment_ranges(quality: str) -> list[tuple[int, int]]:
    """``(first byte, last byte)`` of each segment of ``quality`` in its media file."""
    size = QUALITIES[quality]
    return [(n * size, (n + 1) * size - 1) for n in range(SEGMENTS)]


def _mpd(representations) -> bytes:
    """A static MPD of ``/video``'s one period holding ``representations`` (XML texts)."""
    total = SEGMENTS * SEGMENT_SECONDS
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" '
        f'mediaPresentationDuration="PT{total}S" minBufferTime="PT{SEGMENT_SECONDS}S" '
        'profiles="urn:mpeg:dash:profile:isoff-on-demand:2011">\n'
        '  <BaseURL>/video/</BaseURL>\n  <Period id="1" start="PT0S">\n'
        '    <AdaptationSet contentType="video" segmentAlignment="true">\n'
        + "\n".join(representations) +
        '\n    </AdaptationSet>\n  </Period>\n</MPD>\n')
    return body.encode()


@functools.cache
def manifest() -> bytes:
    """The DASH-like MPD of ``/video``: one period, an hd and a low representation."""
    representations = []
    for quality, size in QUALITIES.items():
        bandwidth = size * 8 // SEGMENT_SECONDS
        urls = "\n".join(f'          <SegmentURL media="{quality}/seg-{n}.m4s"/>'
                         for n in range(1, SEGMENTS + 1))
        representations.append(
            f'      <Representation id="{quality}" mimeType="video/mp4" codecs="avc1.64001f" '
            f'bandwidth="{bandwidth}">\n'
            f'        <SegmentList timescale="1" duration="{SEGMENT_SECONDS}">\n{urls}\n'
            f'        </SegmentList>\n      </Representation>')
    return _mpd(representations)


@functools.cache
def ranges_manifest() -> bytes:
    """The DASH MPD of ``/video`` played by byte ranges: per quality one media file
    (``BaseURL``), each segment a ``SegmentURL mediaRange`` of it."""
    representations = []
    for quality, size in QUALITIES.items():
        ranges = "\n".join(f'          <SegmentURL mediaRange="{first}-{last}"/>'
                           for first, last in segment_ranges(quality))
        representations.append(
            f'      <Representation id="{quality}" mimeType="video/mp4" codecs="avc1.64001f" '
            f'bandwidth="{size * 8 // SEGMENT_SECONDS}">\n'
            f'        <BaseURL>{quality}/{MEDIA_FILE}</BaseURL>\n'
            f'        <SegmentList timescale="1" duration="{SEGMENT_SECONDS}">\n{ranges}\n'
            f'        </SegmentList>\n      </Representation>')
    return _mpd(representations)


@functools.lru_cache(maxsize=8)
def hls_playlist(quality: str) -> bytes:
    """The HLS media playlist of ``quality``: each segment an ``EXT-X-BYTERANGE`` of its
    media file."""
    lines = ["#EXTM3U", "#EXT-X-VERSION:4", f"#EXT-X-TARGETDURATION:{SEGMENT_SECONDS}",
             "#EXT-X-PLAYLIST-TYPE:VOD", "#EXT-X-MEDIA-SEQUENCE:0"]
    for first, last in segment_ranges(quality):
        lines += [f"#EXTINF:{SEGMENT_SECONDS}.0,", f"#EXT-X-BYTERANGE:{last - first + 1}@{first}",
                  MEDIA_FILE]
    return ("\n".join(lines + ["#EXT-X-ENDLIST"]) + "\n").encode()


def lookup(path: str):
    """``(size, read, content type, Cache-Control or None)`` of ``path``, ``read(start,
    stop)`` giving its bytes ``start`` to ``stop`` (excluded); None if there is no such
    object."""
    if path in OBJECTS:
        return _pattern(path, OBJECTS[path], "application/octet-stream", CACHEABLE)
    if path == "/video/manifest.mpd":
        return _fixed(manifest(), "application/dash+xml", CACHEABLE)
    if path == "/video/manifest-ranges.mpd":
        return _fixed(ranges_manifest(), "application/dash+xml", CACHEABLE)
    segment = _SEGMENT.match(path)
    if segment and segment["quality"] in QUALITIES and int(segment["number"]) <= SEGMENTS:
        return _pattern(path, QUALITIES[segment["quality"]], "video/iso.segment", CACHEABLE)
    media = _MEDIA.match(path)
    if media and media["quality"] in QUALITIES:
        if media["kind"] == "m3u8":
            return _fixed(hls_playlist(media["quality"]), "application/vnd.apple.mpegurl",
                          CACHEABLE)
        return _pattern(path, QUALITIES[media["quality"]] * SEGMENTS, "video/mp4", CACHEABLE)
    large = _LARGE.match(path)
    if large:
        size = int(large["count"]) << (20 if large["unit"] == "m" else 30)
        if size <= LARGE_MAX_BYTES:
            return _pattern(path, size, "application/octet-stream", CACHEABLE)
    if path.startswith("/nocache/") and len(path) > len("/nocache/"):
        return _pattern(path, OBJECTS["/objects/small"], "application/octet-stream", NO_STORE)
    if path.startswith("/plain/") and len(path) > len("/plain/"):
        return _pattern(path, OBJECTS["/objects/small"], "application/octet-stream", None)
    return None


def body(path: str) -> bytes | None:
    """The whole body of ``path`` (:func:`lookup`), or None if there is no such object."""
    found = lookup(path)
    return None if found is None else found[1](0, found[0])


def _pattern(path, size, content_type, cache_control):
    return size, functools.partial(object_range, path), content_type, cache_control


def _fixed(body, content_type, cache_control):
    return len(body), lambda start, stop: body[start:stop], content_type, cache_control


class OriginServer(http.server.ThreadingHTTPServer):
    """A threaded HTTP/1.1 server (keep-alive) that counts fetches per path."""

    daemon_threads = True
    request_queue_size = 1024

    def __init__(self, address):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self._lock = threading.Lock()
        self._fetches = collections.Counter()
        self._bytes = collections.Counter()
        self._headers = {}
        #: a status every object request is answered with (None: serve normally)
        self.failing = None
        super().__init__(address, _Handler)

    def count(self, path, headers=None):
        with self._lock:
            self._fetches[path] += 1
            self._headers[path] = dict(headers or {})

    def headers_of(self, path) -> dict[str, str]:
        """The headers of the last request for ``path`` ({} if none came)."""
        with self._lock:
            return dict(self._headers.get(path, {}))

    def count_bytes(self, path, sent):
        with self._lock:
            self._bytes[path] += sent

    def stats(self) -> dict[str, int]:
        """Requests received per path since start or the last :meth:`reset`."""
        with self._lock:
            return dict(self._fetches)

    def bytes_served(self) -> dict[str, int]:
        """Body bytes sent per path since start or the last :meth:`reset`."""
        with self._lock:
            return dict(self._bytes)

    def reset(self):
        with self._lock:
            self._fetches.clear()
            self._bytes.clear()
            self._headers.clear()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "cdnaas-origin"

    def do_GET(self):
        self._answer(send_body=True)

    def do_HEAD(self):
        self._answer(send_body=False)

    def do_POST(self):
        if self.path == "/_stats/reset":
            self.server.reset()
            self._send(204, b"", "text/plain", NO_STORE, send_body=False)
        else:
            self._send(404, b"not found\n", "text/plain", NO_STORE)

    def _answer(self, send_body):
        path = self.path.split("?", 1)[0]
        if path in ("/_stats", "/_bytes"):
            counts = self.server.stats() if path == "/_stats" else self.server.bytes_served()
            body = json.dumps(counts, sort_keys=True).encode()
            self._send(200, body, "application/json", NO_STORE, send_body)
            return
        self.server.count(path, self.headers)
        found = lookup(path)
        if self.server.failing is not None:
            self._send(self.server.failing, b"failing\n", "text/plain", NO_STORE, send_body)
            return
        if found is None:
            self._send(404, b"not found\n", "text/plain", NO_STORE, send_body)
            return
        size, read, content_type, cache_control = found
        tag = etag(path, size)
        asked = self._range(size, tag) if send_body else None  # a Range applies to GET only
        if asked == ():
            self._head(416, content_type, None, 0, tag, {"Content-Range": f"bytes */{size}"})
            return
        start, stop = asked or (0, size)
        self._head(206 if asked else 200, content_type, cache_control, stop - start, tag,
                   {"Content-Range": f"bytes {start}-{stop - 1}/{size}"} if asked else {})
        if send_body:
            for offset in range(start, stop, SEND_CHUNK):
                chunk = read(offset, min(stop, offset + SEND_CHUNK))
                self.wfile.write(chunk)
                self.server.count_bytes(path, len(chunk))

    def _range(self, size, tag):
        """``(start, stop)`` of the one byte range asked for (206), ``()`` if no byte of
        the object satisfies it (416), or None: send the whole object (200)."""
        asked = http_headers.parse_range_header(self.headers.get("Range"))
        if asked is None or len(asked.ranges) != 1 or asked.units != "bytes":
            return None
        condition = self.headers.get("If-Range")
        if condition is not None and condition.strip() not in (tag, LAST_MODIFIED):
            return None  # a strong match only (RFC 9110 13.1.5), else the whole object
        return asked.range_for_length(size) or ()

    def _head(self, status, content_type, cache_control, length, tag, extra):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", tag)
        self.send_header("Last-Modified", LAST_MODIFIED)
        for name, value in extra.items():
            self.send_header(name, value)
        if cache_control is not None:
            self.send_header("Cache-Control", cache_control)
        self.end_headers()

    def _send(self, status, body, content_type, cache_control, send_body=True):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if cache_control is not None:
            self.send_header("Cache-Control", cache_control)
        self.end_headers()
        if send_body:
            self.wfile.write(body)

    def log_message(self, fmt, *args):
        log.debug("%s %s", self.address_string(), fmt % args)


def serve_in_thread(host: str, port: int) -> tuple[OriginServer, threading.Thread]:
    """Start an origin on ``host:port`` (0: any free port) in a daemon thread.

    Stop it with ``server.shutdown(); server.server_close()`` (within 0.1 s). The bound port is
    ``server.server_address[1]``.
    """
    server = OriginServer((host, port))
    thread = threading.Thread(target=server.serve_forever, args=(0.1,),
                              name=f"origin-{host}:{port}", daemon=True)
    thread.start()
    return server, thread


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    server = OriginServer((args.host, args.port))
    log.info("sample origin on http://%s:%d/", args.host, server.server_address[1])
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
