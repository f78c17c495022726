"""A sample origin: deterministic test objects of the CDNaaS paper's sizes.

Paths served (``GET`` and ``HEAD``):

- ``/objects/small`` (43 B), ``/objects/chunk-low`` (73 KB), ``/objects/chunk-hd`` (435 KB);
- ``/video/manifest.mpd``: a DASH-like MPD listing :data:`SEGMENTS` segments of 2 s
  per quality, ``/video/hd/seg-<n>.m4s`` (435 KB) and ``/video/low/seg-<n>.m4s``
  (73 KB), ``n`` from 1;
- ``/nocache/<anything>``: 43 B sent with ``Cache-Control: no-store``.
- ``/plain/<anything>``: 43 B sent without ``Cache-Control`` (the cache's rules decide).

Everything else answers 404. Objects carry ``Cache-Control: public, max-age=3600``
unless said otherwise; their bytes are a pattern derived from the path, so the
same path always gives the same bytes (:func:`object_bytes`).

Every request for an object (any status) is counted per path: ``GET /_stats``
returns the counts as JSON, ``POST /_stats/reset`` clears them. The headers of the last
request for each path are kept (:meth:`OriginServer.headers_of`), and an origin told to
fail (:attr:`OriginServer.failing`: a status) answers every object request with it.

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

_SEGMENT = re.compile(r"^/video/(?P<quality>[a-z]+)/seg-(?P<number>[1-9][0-9]*)\.m4s$")


@functools.lru_cache(maxsize=64)
def object_bytes(path: str, size: int) -> bytes:
    """``size`` deterministic bytes for ``path``: the path and its SHA-256, repeated."""
    unit = path.encode() + b"\n" + hashlib.sha256(path.encode()).digest()
    return (unit * (size // len(unit) + 1))[:size]


@functools.cache
def manifest() -> bytes:
    """The DASH-like MPD of ``/video``: one period, an hd and a low representation."""
    total = SEGMENTS * SEGMENT_SECONDS
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


def lookup(path: str):
    """``(body, content type, Cache-Control or None)`` of ``path``, or None if there is no
    such object."""
    if path in OBJECTS:
        return object_bytes(path, OBJECTS[path]), "application/octet-stream", CACHEABLE
    if path == "/video/manifest.mpd":
        return manifest(), "application/dash+xml", CACHEABLE
    segment = _SEGMENT.match(path)
    if segment and segment["quality"] in QUALITIES and int(segment["number"]) <= SEGMENTS:
        return object_bytes(path, QUALITIES[segment["quality"]]), "video/iso.segment", CACHEABLE
    if path.startswith("/nocache/") and len(path) > len("/nocache/"):
        return object_bytes(path, OBJECTS["/objects/small"]), "application/octet-stream", NO_STORE
    if path.startswith("/plain/") and len(path) > len("/plain/"):
        return object_bytes(path, OBJECTS["/objects/small"]), "application/octet-stream", None
    return None


class OriginServer(http.server.ThreadingHTTPServer):
    """A threaded HTTP/1.1 server (keep-alive) that counts fetches per path."""

    daemon_threads = True
    request_queue_size = 1024

    def __init__(self, address):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self._lock = threading.Lock()
        self._fetches = collections.Counter()
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

    def stats(self) -> dict[str, int]:
        """Requests received per path since start or the last :meth:`reset`."""
        with self._lock:
            return dict(self._fetches)

    def reset(self):
        with self._lock:
            self._fetches.clear()
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
        if path == "/_stats":
            body = json.dumps(self.server.stats(), sort_keys=True).encode()
            self._send(200, body, "application/json", NO_STORE, send_body)
            return
        self.server.count(path, self.headers)
        found = lookup(path)
        if self.server.failing is not None:
            self._send(self.server.failing, b"failing\n", "text/plain", NO_STORE, send_body)
        elif found is None:
            self._send(404, b"not found\n", "text/plain", NO_STORE, send_body)
        else:
            self._send(200, *found, send_body)

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
