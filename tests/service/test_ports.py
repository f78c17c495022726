"""Free ports for stacks and config checks come from below the ephemeral range, where no
outgoing connection can take them between the pick and the bind.

Its tests that start no process are in tests/unit/test_ports_units.py (the unit tier)."""
import socket

import pytest

from cdnaas.common import ports


def test_ports_are_distinct_free_and_below_the_ephemeral_range():
    low, _high = ports.ephemeral_range()
    picked = ports.free_loopback_ports(40)
    assert len(set(picked)) == 40
    assert all(ports.LOWEST <= port < low for port in picked)
    servers = [socket.create_server(("127.0.0.1", port)) for port in picked]  # all bindable
    for server in servers:
        server.close()


def test_a_held_port_is_never_picked(monkeypatch):
    held = socket.create_server(("127.0.0.1", 0))
    try:
        port = held.getsockname()[1]
        # the held port drawn first: it is passed over for the next
        monkeypatch.setattr(ports.random, "sample",
                            lambda pool, k: [port] + [p for p in pool if p != port])
        assert ports.free_loopback_ports(1) != [port]
        monkeypatch.setattr(ports.random, "sample", lambda pool, k: [port])
        with pytest.raises(OSError, match="found 0 free ports of 127.0.0.1, not 1"):
            ports.free_loopback_ports(1)
    finally:
        held.close()
