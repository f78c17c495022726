"""Viewers on kept-alive HTTP/1.1 connections, as players and browsers hold them: shared by
``benchmarks/key_rotation.py`` and the tests of reconfigurations under load
(``tests/system/test_lossless_changes.py``).

A request sent on a connection the server closed while it was idle (a reset or an end
before any byte of the response) is sent once more on a new connection, as RFC 9112
§9.3.1 lets a client do for an idempotent request and browsers do: counted as a
reconnect, not a loss. Anything else that is not an answer within the timeout is a loss,
named by what went wrong (the exception's name, or ``timeout``).
"""
import asyncio
import collections
import time

from cdnaas.ro.vim.local import netns

#: seconds a response may take before it counts as lost
TIMEOUT = 10.0


async def exchange(reader, writer, request):
    """Send ``request``; return the response's status (its body read and discarded)."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    fields = {k.strip().lower(): v.strip()
              for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    if "content-length" in fields:
        await reader.readexactly(int(fields["content-length"]))
    elif fields.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    if fields.get("connection", "").lower() == "close":
        writer.close()
    return status


class KeptAlive:
    """One viewer's connection to ``address``:``port``, opened when needed and kept."""

    def __init__(self, address, port=80, timeout=TIMEOUT):
        self.address, self.port, self.timeout = address, port, timeout
        self.reader = self.writer = None
        self.reconnects = 0

    async def ask(self, request):
        """The status of ``request`` (bytes), or what went wrong instead (see the module doc)."""
        while True:  # once more at most: after a close the connection is fresh
            fresh = self.writer is None or self.writer.is_closing()
            try:
                if fresh:
                    self.reader, self.writer = await asyncio.wait_for(
                        asyncio.open_connection(self.address, self.port), self.timeout)
                return await asyncio.wait_for(exchange(self.reader, self.writer, request),
                                              self.timeout)
            except (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError) as exc:
                self.close()
                if fresh or getattr(exc, "partial", b""):
                    return type(exc).__name__  # not an idle connection the server closed
                self.reconnects += 1
            except (asyncio.TimeoutError, OSError) as exc:
                self.close()
                return "timeout" if isinstance(exc, asyncio.TimeoutError) else type(exc).__name__

    def close(self):
        if self.writer is not None:
            self.writer.close()
        self.writer = None


class Load:
    """``viewers`` viewers in the client namespace ``namespace``, each on its own kept-alive
    connection to ``address`` asking ``Host: host`` for one of ``paths`` (in turn) every
    ``interval`` seconds, from a thread's event loop, until :meth:`stop` or ``seconds``.
    ``outcomes`` counts answers by status and losses by kind, ``losses`` lists each loss
    as ``(monotonic time it was sent, outcome, path)``; ``reconnects`` the requests sent
    again on a new connection."""

    def __init__(self, namespace, address, host, paths, viewers, interval, seconds):
        self.namespace, self.address, self.host, self.paths = namespace, address, host, paths
        self.viewers, self.interval = viewers, interval
        self.stop_at = time.monotonic() + seconds
        self.outcomes = collections.Counter()
        self.losses = []
        self.reconnects = 0

    def run(self):
        """Run the viewers until they stop (call from a thread of its own)."""
        with netns.entered(self.namespace):
            asyncio.run(self._all())

    def stop(self):
        self.stop_at = min(self.stop_at, time.monotonic())

    async def _all(self):
        await asyncio.gather(*[self._viewer(index) for index in range(self.viewers)])

    async def _viewer(self, index):
        connection = KeptAlive(self.address)
        started = time.monotonic() + self.interval * index / self.viewers
        number = 0
        while started + number * self.interval < self.stop_at:
            await asyncio.sleep(max(0.0, started + number * self.interval - time.monotonic()))
            path = self.paths[(index + number) % len(self.paths)]
            request = (f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n"
                       "User-Agent: cdnaas-keepalive-viewer\r\n\r\n").encode("ascii")
            sent = time.monotonic()
            outcome = await connection.ask(request)
            self.outcomes[outcome] += 1
            if outcome != 200:
                self.losses.append((sent, outcome, path))
            number += 1
        connection.close()
        self.reconnects += connection.reconnects

    @property
    def lost(self):
        return sum(count for outcome, count in self.outcomes.items() if outcome != 200)
