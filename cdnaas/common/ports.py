"""Free loopback ports for servers started a moment later (stacks, config checks).

A port picked by binding port 0 comes from the kernel's ephemeral range
(``net.ipv4.ip_local_port_range``), which is also where every outgoing connection
draws its source port: in the seconds before a service binds a port picked that way,
any ``connect()`` on the machine may take it. Ports are therefore drawn at random
below that range (and above the well-known services and the test cloud's fixed
ports), each checked free by binding it, all held until every one is picked.
"""
import random
import socket

#: the lowest port drawn: above the ports fixed services listen on here
LOWEST = 20000
RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


def ephemeral_range():
    """``(low, high)`` of the kernel's ephemeral ports (Linux's default if unreadable)."""
    try:
        with open(RANGE_FILE, encoding="ascii") as handle:
            low, high = (int(part) for part in handle.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_loopback_ports(count, host="127.0.0.1"):
    """``count`` distinct ports of ``host`` that no socket holds now, outside the
    ephemeral range (from it only if the range leaves nothing below it).

    :raises OSError: not enough free ports were found.
    """
    low, _high = ephemeral_range()
    pool = range(LOWEST, low) if low - LOWEST >= 1000 else range(1024, 65536)
    sockets = []
    try:
        for port in random.sample(pool, len(pool)):
            if len(sockets) == count:
                break
            try:
                sockets.append(socket.create_server((host, port)))
            except OSError:
                continue
        if len(sockets) < count:
            raise OSError(f"found {len(sockets)} free ports of {host}, not {count}")
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
