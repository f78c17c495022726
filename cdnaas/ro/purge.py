"""Invalidations and prefetches on a vCDN's caches, through their management listeners.

Every cache's management listener (``templates/nginx-management.conf.j2``, open to the
management side only) serves three things for this module (:mod:`cdnaas.ro.vnfconfig`):

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
- ``KEYS_LOG_PATH``: the cache's keys log, one JSON line ``{"u": decoded path, "a":
  raw query string}`` per answer fetched from the origin (``MISS`` or ``EXPIRED``).
  Every object enters a cache that way, so the log names every object it may hold. The
  module cannot purge by wildcard: a prefix is purged by listing the keys log's paths
  under it and purging each (re-encoded, with its query string as received: the
  rewrite then gives the logged ``$uri`` and ``$args`` back). The log is written
  unbuffered (one write per origin fetch, much cheaper than the fetch), so an object
  fetched just before the purge is listed; one whose fetch is still in flight when the
  log is read is logged after, and holds what the origin answered after the purge was
  asked. Lines of objects since purged or evicted only cost a 404 each.
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
import socket
import time
import urllib.parse

from cdnaas.ro import vnfconfig
from cdnaas.ro.vim.base import CACHES_STEP, CacheResult, VimError, no_progress, run_all

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
_CHUNK = 1 << 16
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


def exchange(address, port, targets, on_answer):
    """GET each of ``targets`` (request targets, bytes) from ``address:port``, pipelined
    :data:`BATCH` at a time per connection; ``on_answer(target, response)`` is called
    with each answer in order, its body still to read (what is left is drained).

    :raises VimError: the listener could not be reached or broke off.
    """
    where = f"{address}:{port}"
    for start in range(0, len(targets), BATCH):
        batch = targets[start:start + BATCH]
        try:
            with socket.create_connection((address, port), timeout=CONNECT_TIMEOUT) as sock, \
                    sock.makefile("rb") as reader:
                sock.settimeout(TIMEOUT)
                sock.sendall(b"".join(b"GET " + target + b" HTTP/1.1\r\nHost: cdnaas\r\n\r\n"
                                      for target in batch))
                for target in batch:
                    response = http.client.HTTPResponse(_Kept(reader), method="GET")
                    response.begin()
                    on_answer(target, response)
                    while response.read(_CHUNK):
                        pass
        except (OSError, http.client.HTTPException) as exc:
            raise VimError(f"the management listener {where} broke off: "
                           f"{type(exc).__name__}: {exc}") from exc


def logged_keys(address, port, prefixes) -> list[bytes]:
    """The purge targets of the objects under ``prefixes`` (decoded paths starting with
    one) the cache's keys log names, each once.

    :raises VimError: the log could not be read, or is larger than :data:`MAX_KEYS_LOG_BYTES`.
    """
    wanted = tuple(urllib.parse.unquote_to_bytes(p) for p in prefixes)
    connection = http.client.HTTPConnection(address, port, timeout=CONNECT_TIMEOUT)
    targets = {}
    try:
        connection.connect()
        connection.sock.settimeout(TIMEOUT)
        connection.request("GET", vnfconfig.KEYS_LOG_PATH)
        response = connection.getresponse()
        if response.status == 404:
            return []
        size = int(response.getheader("Content-Length") or 0)
        if response.status != 200 or size > MAX_KEYS_LOG_BYTES:
            raise VimError(f"the keys log of {address} answered HTTP {response.status} with "
                           f"{size} bytes (at most {MAX_KEYS_LOG_BYTES} are read)")
        for line in response:
            path, query = _key(line)
            if path is not None and path.startswith(wanted):
                target = _purge_target(path, query)
                if target is not None:
                    targets[target] = None
    except (OSError, http.client.HTTPException) as exc:
        raise VimError(f"cannot read the keys log of {address}: {exc}") from exc
    finally:
        connection.close()
    return list(targets)


def _key(line):
    """``(decoded path, raw query)`` bytes of a keys log line, ``(None, None)`` if torn."""
    try:
        entry = json.loads(line.decode("utf-8", "surrogateescape"))
        return (entry["u"].encode("utf-8", "surrogateescape"),
                entry["a"].encode("utf-8", "surrogateescape"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None, None


def _purge_target(path, query):
    """The purge request target for a logged key: the path percent-encoded (nginx decodes
    it back), the query string as received; None for a query no request line can carry."""
    if any(byte in _NOT_SENDABLE for byte in query):
        return None
    target = vnfconfig.PURGE_PATH.encode() + urllib.parse.quote_from_bytes(path, "/").encode()
    return target + b"?" + query if query else target


def invalidate(address, paths, prefixes, port=vnfconfig.MANAGEMENT_PORT):
    """Purge ``paths`` and every logged object under ``prefixes`` from the cache at
    ``address``; return ``(purge requests, objects removed)``.

    :raises VimError: the cache did not answer each purge with 200 or 404.
    """
    targets = {vnfconfig.PURGE_PATH.encode() + p.encode(): None for p in paths}
    if prefixes:
        targets.update(dict.fromkeys(logged_keys(address, port, prefixes)))
    statuses = []
    exchange(address, port, list(targets), lambda _t, answer: statuses.append(answer.status))
    refused = sorted({s for s in statuses if s not in (200, 404)})
    if refused:
        raise VimError(f"the cache at {address} answered purges with HTTP "
                       f"{', '.join(map(str, refused))}")
    return len(targets), statuses.count(200)


def prefetch(address, paths, port=vnfconfig.MANAGEMENT_PORT):
    """Fetch ``paths`` through the cache at ``address`` (each read whole); return
    ``(fetches, paths answered 2xx, "path: status" of the others)``.

    :raises VimError: the cache broke off, or answered 5xx (the origin failed).
    """
    answers = []
    exchange(address, port, [vnfconfig.PREFETCH_PATH.encode() + p.encode() for p in paths],
             lambda target, answer: answers.append((target, answer.status)))
    start = len(vnfconfig.PREFETCH_PATH)
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

    :param progress: a driver's Progress, told of :data:`CACHES_STEP` as caches end.
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
                   CACHES_STEP, progress)


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
