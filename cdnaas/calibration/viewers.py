"""Simulated DASH viewers: many HD video players in one process, for QoE measurements.

Each viewer plays a video of chunks of ``chunk_seconds`` fetched over one kept-alive
HTTP/1.1 connection, as the CDNaaS paper's emulated viewers (section IV-D1: one 435 KB
chunk every 2 s, no rate adaptation) and a DASH player's buffer:

- it starts at a time of its own, spread evenly over the first chunk period, viewer ``i``
  at segment ``i`` of the ``segments`` the origin has (then the next ones, wrapping), so
  every segment is asked for and viewers do not move in step;
- playback starts when the first chunk has arrived (startup delay: request to arrival);
- it keeps ``buffer_chunks`` chunks of buffer: chunk ``k`` is requested once chunk
  ``k - 1`` has arrived and the playhead is within ``buffer_chunks`` chunks of it, so
  in steady state it fetches one chunk per chunk period;
- when the playhead reaches a chunk that has not arrived, playback stalls until it
  arrives (a rebuffering event of that duration);
- a connection that fails mid-response (reset, refused, timed out after
  ``request_timeout`` s, a status other than 200) ends the viewer's playback, as the
  paper counts a terminated playout. An idle kept-alive connection the server closed
  is opened again, as browsers do.

Byte-range sessions (``ranges``; ``--manifest`` on the command line): each segment is a
``Range`` request into one media file, answered 206, as a DASH player of a ``SegmentList``
of ``mediaRange`` attributes (or a ``SegmentBase`` whose index it has read) and an HLS
player of an ``EXT-X-BYTERANGE`` playlist do; :func:`manifest_ranges` reads either
manifest (the sample origin's ``/video/manifest-ranges.mpd`` and
``/video/<quality>/media.m3u8``). Stalls are counted as for segment files.

Per viewer and per window of ``window_seconds`` (from the start of the run) it reports
``[stalls, stalled seconds, longest stall, startup seconds or None, failed]``; a stall
counts in the window where it began. :mod:`cdnaas.calibration.qoe` turns those into MOS.

It is one ``selectors`` (epoll) loop over non-blocking sockets; response bodies are
discarded in the kernel (``recv`` with ``MSG_TRUNC``), never copied, so one process
drives thousands of viewers. It reports its own CPU time so a measurement can say what
the generator cost. Standard library only: a load-generator host runs it as
``python3 viewers.py --address A ...``; it prints one JSON document.
"""
import argparse
import errno
import heapq
import http.client
import json
import random
import re
import resource
import selectors
import socket
import sys
import time
import urllib.parse
import xml.etree.ElementTree as ET

TOOL = "cdnaas-viewers 1"
#: exit status when the load asked for is beyond what this generator can simulate
LIMIT_STATUS = 3
#: the most body bytes one recv discards
DISCARD = 1 << 20
_WAIT, _CONNECTING, _HEADERS, _BODY, _DONE = range(5)


class Viewer:
    """One simulated player and its connection."""

    __slots__ = ("index", "start", "segment", "state", "sock", "requested", "received",
                 "play_start", "stalled", "buffer", "remaining", "retried", "windows", "failed")

    def __init__(self, index, start, segment, windows):
        self.index, self.start, self.segment = index, start, segment
        self.state, self.sock = _WAIT, None
        self.requested = self.play_start = None
        self.received, self.stalled, self.remaining = 0, 0.0, 0
        self.buffer, self.retried, self.failed = b"", False, False
        self.windows = [[0, 0.0, 0.0, None, False] for _ in range(windows)]


class Simulation:
    """``viewers`` players against ``address:port`` for ``seconds``; see the module doc.

    :param path: the segments' path, ``{n}`` standing for the segment's number (from 1).
    :param ranges: a byte-range session instead: ``(path, first byte, last byte)`` of each
        segment (:func:`manifest_ranges`), ``segments`` their number.
    """

    def __init__(self, address, port, path, viewers, seconds, chunk_seconds=2.0, segments=300,
                 window_seconds=16.0, buffer_chunks=2, request_timeout=20.0, host="calibration",
                 seed=None, ranges=None):
        self.ranges = list(ranges) if ranges else None
        segments = len(self.ranges) if self.ranges else segments
        self.address, self.port, self.path = address, port, path
        self.chunk, self.window, self.buffer_chunks = chunk_seconds, window_seconds, buffer_chunks
        self.segments, self.timeout, self.host = segments, request_timeout, host
        self.count = max(1, int(seconds // window_seconds))
        self.seconds = self.count * window_seconds
        first = random.Random(seed).randrange(segments) if seed is not None else 0
        self.viewers = [Viewer(i, i * chunk_seconds / viewers, (first + i) % segments + 1,
                               self.count) for i in range(viewers)]
        self.selector = selectors.DefaultSelector()
        self.timers = []
        self.latencies = []
        self.requests = self.errors = self.non_2xx = 0
        self.scratch = bytearray(DISCARD)
        self.t0 = 0.0

    # -- time and windows ------------------------------------------------------------

    def _window(self, now):
        return min(int((now - self.t0) // self.window), self.count - 1)

    def _at(self, when, viewer):
        heapq.heappush(self.timers, (when, viewer.index))

    # -- the loop --------------------------------------------------------------------

    def run(self):
        """Run the simulation; return its report (a JSON-ready dict)."""
        wanted = len(self.viewers) + 64
        allowed = raise_file_limit(wanted)
        if allowed < wanted:
            raise LimitReached(f"{len(self.viewers)} viewers need {wanted} open files; this "
                               f"generator may open {allowed}")
        cpu0 = _cpu_seconds()
        self.t0 = time.monotonic()
        end = self.t0 + self.seconds
        for viewer in self.viewers:
            self._at(self.t0 + viewer.start, viewer)
        next_check = self.t0 + 0.5
        while True:
            now = time.monotonic()
            if now >= end:
                break
            while self.timers and self.timers[0][0] <= now:
                _when, index = heapq.heappop(self.timers)
                self._request(self.viewers[index], now)
            wait = min(end - now, 0.05, max(0.0, self.timers[0][0] - now) if self.timers else 0.05)
            for key, _events in self.selector.select(wait):
                self._ready(key.data)
            if now >= next_check:
                self._expire(now)
                next_check = now + 0.5
        self._finish(end)
        return self._report(_cpu_seconds() - cpu0)

    def _request(self, viewer, now):
        """Send the viewer's next chunk request, connecting first when needed."""
        if viewer.state == _DONE:
            return
        viewer.requested = now if viewer.state == _WAIT else viewer.requested
        if viewer.sock is None:
            viewer.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            viewer.sock.setblocking(False)
            code = viewer.sock.connect_ex((self.address, self.port))
            if code not in (0, errno.EINPROGRESS):
                self._fail(viewer, now)
                return
            viewer.state = _CONNECTING
            self.selector.register(viewer.sock, selectors.EVENT_WRITE, viewer)
            return
        self._send(viewer, now)

    def _send(self, viewer, now):
        if self.ranges:
            path, first, last = self.ranges[viewer.segment - 1]
            asked = f"Range: bytes={first}-{last}\r\n"
        else:
            path, asked = self.path.format(n=viewer.segment), ""
        request = (f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n{asked}"
                   "User-Agent: cdnaas-viewer\r\n\r\n").encode()
        try:
            viewer.sock.send(request)
        except OSError:
            self._reconnect_or_fail(viewer, now)
            return
        viewer.state, viewer.buffer = _HEADERS, b""
        if self._registered(viewer):
            self.selector.modify(viewer.sock, selectors.EVENT_READ, viewer)
        else:
            self.selector.register(viewer.sock, selectors.EVENT_READ, viewer)

    def _registered(self, viewer):
        try:
            self.selector.get_key(viewer.sock)
            return True
        except KeyError:
            return False

    def _ready(self, viewer):
        now = time.monotonic()
        if viewer.state == _CONNECTING:
            if viewer.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                self._fail(viewer, now)
            else:
                self._send(viewer, now)
        elif viewer.state == _HEADERS:
            self._read_headers(viewer, now)
        elif viewer.state == _BODY:
            self._read_body(viewer, now)

    def _read_headers(self, viewer, now):
        try:
            data = viewer.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._reconnect_or_fail(viewer, now)
            return
        viewer.buffer += data
        head_end = viewer.buffer.find(b"\r\n\r\n")
        if head_end < 0:
            return
        head = viewer.buffer[:head_end].decode("latin-1").split("\r\n")
        status = int(head[0].split()[1]) if len(head[0].split()) > 1 else 0
        length = next((int(line.split(":", 1)[1]) for line in head[1:]
                       if line.lower().startswith("content-length:")), None)
        if status != (206 if self.ranges else 200) or length is None:
            self.non_2xx += 1
            self._fail(viewer, now)
            return
        viewer.remaining = length - (len(viewer.buffer) - head_end - 4)
        viewer.buffer = b""
        viewer.state = _BODY
        if viewer.remaining <= 0:
            self._arrived(viewer, now)

    def _read_body(self, viewer, now):
        try:
            got = viewer.sock.recv_into(self.scratch, min(viewer.remaining, DISCARD),
                                        socket.MSG_TRUNC)
        except BlockingIOError:
            return
        except OSError:
            got = 0
        if got == 0:
            self._fail(viewer, now)
            return
        viewer.remaining -= got
        if viewer.remaining <= 0:
            self._arrived(viewer, now)

    def _arrived(self, viewer, now):
        """Chunk ``viewer.received`` arrived at ``now``: play it, schedule the next."""
        self.requests += 1
        self.latencies.append(now - viewer.requested)
        viewer.retried = False
        if viewer.received == 0:
            viewer.play_start = now
            viewer.windows[self._window(now)][3] = now - (self.t0 + viewer.start)
        else:
            self._stall_until(viewer, now)
        viewer.received += 1
        viewer.segment = viewer.segment % self.segments + 1
        viewer.state = _WAIT
        self.selector.unregister(viewer.sock)
        due = viewer.play_start + viewer.stalled + (viewer.received + 1 - self.buffer_chunks) * self.chunk
        viewer.requested = None
        self._at(max(now, due), viewer)

    def _stall_until(self, viewer, now):
        """Count the stall, if any, that waiting for chunk ``viewer.received`` until ``now`` caused."""
        deadline = viewer.play_start + viewer.stalled + viewer.received * self.chunk
        if now > deadline:
            stall = now - deadline
            viewer.stalled += stall
            window = viewer.windows[self._window(deadline)]
            window[0] += 1
            window[1] += stall
            window[2] = max(window[2], stall)

    def _reconnect_or_fail(self, viewer, now):
        """The server closed a kept-alive connection: open it again once, else fail."""
        if viewer.retried:
            self._fail(viewer, now)
            return
        viewer.retried = True
        self._close(viewer)
        viewer.state = _HEADERS  # keeps ``requested``: the wait counts from the first try
        self._request(viewer, now)

    def _fail(self, viewer, now):
        self.errors += 1
        self._close(viewer)
        viewer.state, viewer.failed = _DONE, True
        for window in viewer.windows[self._window(now):]:
            window[4] = True

    def _close(self, viewer):
        if viewer.sock is not None:
            if self._registered(viewer):
                self.selector.unregister(viewer.sock)
            viewer.sock.close()
            viewer.sock = None

    def _expire(self, now):
        for viewer in self.viewers:
            if viewer.requested is not None and viewer.state in (_CONNECTING, _HEADERS, _BODY) \
                    and now - viewer.requested > self.timeout:
                self._fail(viewer, now)

    def _finish(self, end):
        """At the end, a viewer waiting past its chunk's play time is stalled until then."""
        for viewer in self.viewers:
            if viewer.state != _DONE and viewer.play_start is not None:
                self._stall_until(viewer, end - 1e-9)
            elif viewer.state != _DONE and end - (self.t0 + viewer.start) > self.window / 2:
                self._fail(viewer, end - 1e-9)  # never started playing: the paper's MOS 1.0
            self._close(viewer)

    def _report(self, cpu_seconds):
        latencies = sorted(self.latencies)
        return {"tool": TOOL, "seconds": self.seconds, "requests": self.requests,
                "errors": self.errors, "non_2xx": self.non_2xx,
                "requests_per_second": self.requests / self.seconds,
                "latency_ms": {f"p{p}": round(_percentile(latencies, p) * 1000, 3)
                               for p in (50, 90, 99)} if latencies else {},
                "cpu_seconds": round(cpu_seconds, 3),
                "windows": [[[w[0], round(w[1], 3), round(w[2], 3),
                              None if w[3] is None else round(w[3], 3), w[4]]
                             for w in viewer.windows] for viewer in self.viewers]}


_MPD = "{urn:mpeg:dash:schema:mpd:2011}"
_BYTERANGE = re.compile(r"#EXT-X-BYTERANGE:([0-9]+)(?:@([0-9]+))?")


def manifest_ranges(text, path, representation="hd") -> list[tuple[str, int, int]]:
    """``(path, first byte, last byte)`` of each segment a byte-range manifest lists.

    :param text: a DASH MPD whose ``representation`` lists ``SegmentURL mediaRange`` attributes
        of its ``BaseURL`` file, or an HLS media playlist of ``EXT-X-BYTERANGE`` tags.
    :param path: where the manifest was fetched (relative URLs are resolved against it).
    :raises ValueError: it lists no byte range.
    """
    if text.lstrip().startswith("#EXTM3U"):
        ranges, following, pending = [], {}, None
        for line in (line.strip() for line in text.splitlines()):
            if _BYTERANGE.fullmatch(line):
                pending = _BYTERANGE.fullmatch(line)
            elif line and not line.startswith("#") and pending:
                media = urllib.parse.urljoin(path, line)
                # no offset: the range follows the previous one of the same file
                first = following.get(media, 0) if pending[2] is None else int(pending[2])
                ranges.append((media, first, first + int(pending[1]) - 1))
                following[media], pending = first + int(pending[1]), None
    else:
        root = ET.fromstring(text)
        base = urllib.parse.urljoin(path, root.findtext(f"{_MPD}BaseURL", ""))
        chosen = next((r for r in root.iter(f"{_MPD}Representation")
                       if r.get("id") == representation), None)
        ranges = []
        if chosen is not None:
            media = urllib.parse.urljoin(base, chosen.findtext(f"{_MPD}BaseURL", ""))
            for segment in chosen.iter(f"{_MPD}SegmentURL"):
                first, _, last = (segment.get("mediaRange") or "-").partition("-")
                ranges.append((urllib.parse.urljoin(media, segment.get("media") or ""),
                               int(first), int(last)))
    if not ranges:
        raise ValueError(f"the manifest {path} lists no byte range"
                         + ("" if text.lstrip().startswith("#") else
                            f" for representation {representation}"))
    return ranges


def fetch_manifest(address, port, path, host="calibration", timeout=10.0) -> str:
    """The manifest at ``path`` of ``address:port`` (one GET).

    :raises OSError: it could not be fetched (a status other than 200 included).
    """
    connection = http.client.HTTPConnection(address, port, timeout=timeout)
    try:
        connection.request("GET", path, headers={"Host": host})
        answer = connection.getresponse()
        body = answer.read()
    except http.client.HTTPException as exc:
        raise OSError(f"cannot fetch the manifest {path}: {exc}") from exc
    finally:
        connection.close()
    if answer.status != 200:
        raise OSError(f"the manifest {path} answered HTTP {answer.status}")
    return body.decode("utf-8")


def _percentile(ordered, p):
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def _cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def raise_file_limit(wanted):
    """Raise this process's open-file limit towards ``wanted``; return the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else max(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, max(target, hard)
                                                        if hard != resource.RLIM_INFINITY else hard))
        except (ValueError, OSError):  # not allowed above the hard limit here
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class LimitReached(Exception):
    """This generator cannot simulate that many viewers (exit status :data:`LIMIT_STATUS`)."""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--port", type=int, default=80)
    parser.add_argument("--path", default="/video/hd/seg-{n}.m4s")
    parser.add_argument("--viewers", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--chunk-seconds", type=float, default=2.0)
    parser.add_argument("--segments", type=int, default=300)
    parser.add_argument("--window-seconds", type=float, default=16.0)
    parser.add_argument("--buffer-chunks", type=int, default=2)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--manifest", help="play byte ranges of one file: the path of a DASH "
                        "MPD (SegmentURL mediaRange) or an HLS playlist (EXT-X-BYTERANGE)")
    parser.add_argument("--representation", default="hd", help="the MPD's representation")
    args = parser.parse_args(argv)
    ranges = manifest_ranges(fetch_manifest(args.address, args.port, args.manifest),
                             args.manifest, args.representation) if args.manifest else None
    try:
        report = Simulation(args.address, args.port, args.path, args.viewers, args.seconds,
                            chunk_seconds=args.chunk_seconds, segments=args.segments,
                            window_seconds=args.window_seconds, buffer_chunks=args.buffer_chunks,
                            seed=args.seed, ranges=ranges).run()
    except LimitReached as exc:
        sys.stderr.write(f"generator limit: {exc}\n")
        sys.exit(LIMIT_STATUS)
    json.dump(report, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
