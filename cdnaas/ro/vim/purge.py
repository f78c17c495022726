"""Invalidations and prefetches on a vCDN's caches, through their management listeners.

Every cache's management listener (``templates/nginx-management.conf.j2``, open to the
management side only) serves three things for this module (:mod:`cdnaas.vnf`):

- ``PURGE_PATH + path`` removes the object ``path`` names from the cache
  (ngx_cache_purge 2.3, Debian ``libnginx-mod-http-cache-purge``): the location
  rewrites itself to ``path`` and asks the module to purge the key the cache rules
  build from it (``cache_rules.key``: the decoded path and the query string, none of
  it or the listed arguments), the very expression the public listener stored the
  object under. So nothing here computes a key: whatever the rules, a purge of a
  request path removes what a fetch of that path would be served. 200: removed, 404:
  not cached (both success). The module removes the node from the keys zone, so the
  next fetch is a MISS even where ``open_file_cache`` still holds the deleted file open
  (tests/test_purge.py checks it).
- ``KEYS_LOG_PATH``: the cache's keys log, one JSON line ``{"u": decoded path, "a": raw
  query string}`` per answer fetched from the origin (``MISS`` or ``EXPIRED``), with,
  from a cache that slices, ``"s"`` its slice size and ``"c"`` the origin's
  ``Content-Range`` (the object's size, where a range request fetched a slice). Every
  object enters a cache that way, so the log names every object it may hold. The module
  cannot purge by wildcard: a prefix is purged by listing the keys log's paths under it
  and purging each (re-encoded, with its query string as received: the rewrite then
  gives the logged ``$uri`` and ``$args`` back). A cache that slices keeps what range
  requests fetched as slices of one key each and what other requests fetched whole under
  the object's unsliced key (:data:`~cdnaas.vnf.endpoints.SLICE_RANGE_VARIABLE`): a purge
  of the object is one purge of its unsliced key (no header) and one per slice of the
  largest size logged for its path, each naming its slice's range in
  :data:`~cdnaas.vnf.endpoints.PURGE_SLICE_HEADER` (an object logged without a size: its
  first slice; one never logged: its unsliced key alone). The log is written unbuffered
  (one write per origin fetch, much cheaper than the fetch), so an object fetched just
  before the purge is listed; one whose fetch is still in flight when the log is read is
  logged after, and holds what the origin answered after the purge was asked. Lines of
  objects since purged or evicted only cost a 404 each.
- ``PREFETCH_PATH + path`` fetches ``path`` through the cache's own public listener
  (its rules, its cache): the answer, read whole, means the cache holds it.

Requests to one cache are pipelined on kept-alive connections (:data:`BATCH` at a time),
caches are worked on in parallel (:func:`on_every_cache`), and a cache's result says
what it confirmed (:class:`~cdnaas.ro.vim.base.CacheResult`). Any driver whose RO
reaches its caches' management listeners (the local driver's bridges, an OpenStack
operator's management network) uses this module as it is.
"""
import http.client
import json
import logging
import math
import re
import socket
import time
import urllib.parse

from cdnaas.common import errors, slicing
from cdnaas.ro.vim import steps
from cdnaas.ro.vim.base import CacheResult, VimError, no_progress, run_all
from cdnaas.vnf.endpoints import (KEYS_LOG_PATH, MANAGEMENT_PORT, PREFETCH_PATH, PURGE_PATH,
                                  PURGE_SLICE_HEADER)

LOG = logging.getLogger(__name__)

#: requests sent on one connection before their answers are read (nginx answers
#: pipelined requests in order; it closes a connection after 1000 requests)
BATCH = 200
#: seconds one socket operation may take (an origin fetch of a prefetch included)
TIMEOUT = 30.0
#: seconds a cache has to accept a connection
CONNECT_TIMEOUT = 5.0
#: the largest keys log read for a prefix purge
MAX_KEYS_LOG_BYTES = 256 << 20
#: the most slices one object's purge names (a 64 GiB object of 512k slices)
MAX_SLICES = 1 << 17
_CHUNK = 1 << 16
_OBJECT_SIZE = re.compile(r"bytes (?:[0-9]+-[0-9]+|\*)/([0-9]{1,20})")
_NOT_SENDABLE = bytes(range(0x21)) + b"\x7f"


class _Kept:
    """A connection's reader lent to one response after another (its close keeps it open)."""

    def __init__(self, reader):
        self._reader = reader

    def makefile(self, _mode):
        return self

    def close(self):
        """Kept open: the next response is read from it."""

    def __getattr__(self, name):
        return getattr(self._reader, name)


def exchange(address, port, targets, on_answer, headers=None):
    """GET each of ``targets`` (request targets, bytes) from ``address:port``, pipelined
    :data:`BATCH` at a time per connection; ``on_answer(target, response)`` is called
    with each answer in order, its body still to read (what is left is drained).

    :param headers: per target, more header lines to send (bytes, each ending in CRLF);
        None: none.
    :raises VimError: the listener could not be reached or broke off.
    """
    where = f"{address}:{port}"
    headers = headers or [b""] * len(targets)
    for start in range(0, len(targets), BATCH):
        batch = targets[start:start + BATCH]
        try:
            with socket.create_connection((address, port), timeout=CONNECT_TIMEOUT) as sock, \
                    sock.makefile("rb") as reader:
                sock.settimeout(TIMEOUT)
                sock.sendall(b"".join(b"GET " + target + b" HTTP/1.1\r\nHost: cdnaas\r\n" + more
                                      + b"\r\n"
                                      for target, more in zip(batch, headers[start:])))
                for target in batch:
                    response = http.client.HTTPResponse(_Kept(reader), method="GET")
                    response.begin()
                    on_answer(target, response)
                    while response.read(_CHUNK):
                        pass
        except (OSError, http.client.HTTPException) as exc:
            raise VimError(f"the management listener {where} broke off: "
                           f"{type(exc).__name__}: {exc}") from exc


def logged_objects(address, port, prefixes) -> tuple[dict, dict]:
    """What the cache's keys log names: ``({purge target: decoded path}`` of the objects
    under ``prefixes``, each once, ``{decoded path: (slice bytes, largest size or None)}``
    of every path logged by a cache that slices``)``.

    :raises VimError: the log could not be read, or is larger than :data:`MAX_KEYS_LOG_BYTES`.
    """
    wanted = tuple(urllib.parse.unquote_to_bytes(p) for p in prefixes)
    connection = http.client.HTTPConnection(address, port, timeout=CONNECT_TIMEOUT)
    targets, sliced = {}, {}
    try:
        connection.connect()
        connection.sock.settimeout(TIMEOUT)
        connection.request("GET", KEYS_LOG_PATH)
        response = connection.getresponse()
        if response.status == 404:
            return {}, {}
        size = int(response.getheader("Content-Length") or 0)
        if response.status != 200 or size > MAX_KEYS_LOG_BYTES:
            raise VimError(f"the keys log of {address} answered HTTP {response.status} with "
                           f"{size} bytes (at most {MAX_KEYS_LOG_BYTES} are read)")
        for line in response:
            path, query, slices = _key(line)
            if path is None:
                continue
            if slices is not None:
                known = sliced.get(path, (0, None))[1]
                sliced[path] = slices[0], max(known or 0, slices[1] or 0) or None
            if path.startswith(wanted):
                target = _purge_target(path, query)
                if target is not None:
                    targets[target] = path
    except (OSError, http.client.HTTPException) as exc:
        raise VimError(f"cannot read the keys log of {address}: {exc}") from exc
    finally:
        connection.close()
    return targets, sliced


def _key(line):
    """``(decoded path, raw query, (slice bytes, object size or None) or None)`` of a keys
    log line (the last None where the cache does not slice), ``(None, None, None)`` if
    torn."""
    try:
        entry = json.loads(line.decode("utf-8", "surrogateescape"))
        path, query = (entry["u"].encode("utf-8", "surrogateescape"),
                       entry["a"].encode("utf-8", "surrogateescape"))
        if not entry.get("s"):
            return path, query, None
        size = _OBJECT_SIZE.fullmatch(entry.get("c") or "")
        return path, query, (slicing.slice_bytes(entry["s"]), int(size[1]) if size else None)
    except (ValueError, KeyError, TypeError, AttributeError, errors.BadRequest):
        return None, None, None


def _purge_target(path, query):
    """The purge request target for a logged key: the path percent-encoded (nginx decodes
    it back), the query string as received; None for a query no request line can carry."""
    if any(byte in _NOT_SENDABLE for byte in query):
        return None
    target = PURGE_PATH.encode() + urllib.parse.quote_from_bytes(path, "/").encode()
    return target + b"?" + query if query else target


def invalidate(address, paths, prefixes, port=MANAGEMENT_PORT):
    """Purge ``paths`` and every logged object under ``prefixes`` from the cache at
    ``address``, each object whole and slice by slice where the cache slices; return
    ``(objects purged, objects removed)`` (removed: it was cached whole or at least one
    of its slices was).

    :raises VimError: the cache did not answer each purge with 200 or 404, or an object
        has more than :data:`MAX_SLICES` slices.
    """
    objects, sliced = logged_objects(address, port, prefixes)
    for path in paths:
        decoded = urllib.parse.unquote_to_bytes(path.split("?", 1)[0])
        objects.setdefault(PURGE_PATH.encode() + path.encode(), decoded)
    targets, headers = [], []
    for target, path in objects.items():
        for first, last in _slices(*sliced.get(path, (None, None))):
            targets.append(target)
            headers.append(b"" if first is None else
                           f"{PURGE_SLICE_HEADER}: bytes={first}-{last}\r\n".encode())
    statuses, removed = [], set()

    def answered(target, answer):
        statuses.append(answer.status)
        if answer.status == 200:
            removed.add(target)
    exchange(address, port, targets, answered, headers)
    refused = sorted({s for s in statuses if s not in (200, 404)})
    if refused:
        raise VimError(f"the cache at {address} answered purges with HTTP "
                       f"{', '.join(map(str, refused))}")
    return len(objects), len(removed)


def _slices(slice_bytes, size):
    """What to purge of an object of ``size`` bytes: ``(None, None)``, its unsliced key,
    then where the cache slices (``slice_bytes`` not None) ``(first, last)`` byte of each
    of its slices of ``slice_bytes`` (no size: its first slice).

    :raises VimError: more than :data:`MAX_SLICES` slices.
    """
    if slice_bytes is None:
        return [(None, None)]
    count = max(1, math.ceil((size or 0) / slice_bytes))
    if count > MAX_SLICES:
        raise VimError(f"an object of {size} bytes has {count} slices of {slice_bytes} "
                       f"bytes, more than the {MAX_SLICES} one purge names")
    return [(None, None)] + [(k * slice_bytes, (k + 1) * slice_bytes - 1)
                             for k in range(count)]


def prefetch(address, paths, port=MANAGEMENT_PORT):
    """Fetch ``paths`` through the cache at ``address`` (each read whole); return
    ``(fetches, paths answered 2xx, "path: status" of the others)``.

    :raises VimError: the cache broke off, or answered 5xx (the origin failed).
    """
    answers = []
    exchange(address, port, [PREFETCH_PATH.encode() + p.encode() for p in paths],
             lambda target, answer: answers.append((target, answer.status)))
    start = len(PREFETCH_PATH)
    others = [(t[start:].decode(), s) for t, s in answers if not 200 <= s < 300]
    failed = [f"{path}: {status}" for path, status in others if status >= 500]
    if failed:
        raise VimError(f"the cache at {address} could not fetch {len(failed)} path(s): "
                       f"{', '.join(failed[:5])}")
    return len(answers), len(answers) - len(others), [f"{p}: {s}" for p, s in others]


def on_every_cache(pool, deployment, action, progress=no_progress, role="cache") -> list:
    """``action(vnf) -> (requests, done, detail)`` on every cache of ``deployment`` (or
    every VNF of ``role``) at once in ``pool``; one :class:`CacheResult` per cache, in the
    deployment's order. A cache whose action raised :class:`VimError` is not ok, with
    the error as its detail.

    :param progress: a driver's Progress, told of :data:`cdnaas.ro.vim.steps.CACHES` as
        caches end.
    """
    def run(vnf):
        started = time.monotonic()
        try:
            requests, done, detail = action(vnf)
            ok = True
        except VimError as exc:
            LOG.warning("cache %s: %s", vnf.name, exc)
            requests, done, detail, ok = 0, 0, str(exc), False
        return CacheResult(name=vnf.name, region=vnf.region, ok=ok, requests=requests,
                           done=done, detail=detail,
                           seconds=round(time.monotonic() - started, 3))
    return run_all(pool, run, [v for v in deployment.vnfs if v.role == role],
                   steps.CACHES, progress)


def invalidate_caches(pool, deployment, paths, prefixes, progress=no_progress) -> list:
    """:meth:`VimDriver.invalidate` for a driver whose RO reaches its caches' management
    listeners: :func:`invalidate` on the origin shield, if any, then on every cache
    (:func:`on_every_cache`): a cache emptied first could fetch the old object again
    from a shield that still has it."""
    def purge_one(vnf):
        requests, removed = invalidate(vnf.address, paths, prefixes)
        return requests, removed, f"{requests - removed} not cached"
    return (on_every_cache(pool, deployment, purge_one, progress, role="shield")
            + on_every_cache(pool, deployment, purge_one, progress))


def prefetch_caches(pool, deployment, paths, progress=no_progress) -> list:
    """:meth:`VimDriver.prefetch` for such a driver: :func:`prefetch` on every cache."""
    def fetch_one(vnf):
        fetches, cached, others = prefetch(vnf.address, paths)
        return fetches, cached, ", ".join(others[:5])
    return on_every_cache(pool, deployment, fetch_one, progress)
