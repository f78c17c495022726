"""Starting, reloading and probing the VNF daemons (nginx, dnsmasq) in their namespaces.

A daemon is started from a thread that entered the VNF's namespace (no shell,
no ``nsenter``) and forks into the background; once it answers, its processes
join the VNF's CPU group (:func:`cdnaas.ro.vim.local.cgroups.adopt`).
"""
import http.client
import logging
import time

import dns.message
import dns.query
import dns.rdatatype

from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.local.system import run

LOG = logging.getLogger(__name__)


def start_daemon(namespace, command):
    """Start ``command``, a server that forks into the background, in ``namespace``.

    :raises VimError: with the server's own words when it refuses to start (nginx
        and dnsmasq check their configuration as they start and run nothing on one
        they reject).
    """
    run(command, namespace=namespace)


def nginx_command(prefix, conf, *extra):
    return ["nginx", "-p", f"{prefix}/", "-c", conf, *extra]


def reload_nginx(namespace, prefix, conf):
    """Graceful reload: old workers finish their connections, new ones use the new config."""
    run(nginx_command(prefix, conf, "-s", "reload"), namespace=namespace)


def pid_in(pid_file):
    """The process id a daemon wrote to ``pid_file``.

    :raises VimError: the file is missing or holds no process id.
    """
    try:
        return int(open(pid_file, encoding="ascii").read().split()[0])
    except (OSError, ValueError, IndexError) as exc:
        raise VimError(f"no process id in {pid_file}: {exc}") from exc


def _get(address, port, path, timeout):
    """``(status, body)`` of ``GET path`` at ``address:port``; raises OSError/HTTPException."""
    connection = http.client.HTTPConnection(address, port, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def answers_http(address, port=80, path="/nginx_status", timeout=0.5):
    """True when the server at ``address`` answers ``path`` with 200."""
    try:
        return _get(address, port, path, timeout)[0] == 200
    except (OSError, http.client.HTTPException):
        return False


def stub_status(address, port=80):
    """nginx ``stub_status`` figures (active connections, accepts, handled, requests...),
    or None when the server does not answer."""
    try:
        status, body = _get(address, port, "/nginx_status", 1)
    except (OSError, http.client.HTTPException):
        return None
    if status != 200:
        return None
    lines = body.decode("ascii", "replace").splitlines()
    accepts, handled, total = (int(x) for x in lines[2].split())
    reading, writing, waiting = (int(x) for x in lines[3].split()[1::2])
    return {"active": int(lines[0].split(":")[1]), "accepts": accepts, "handled": handled,
            "requests": total, "reading": reading, "writing": writing, "waiting": waiting}


def resolves(server, hostname, port=53, timeout=0.5):
    """Addresses ``server`` answers for ``hostname`` (A records), or [] when it does not answer."""
    query = dns.message.make_query(hostname, dns.rdatatype.A)
    try:
        answer = dns.query.udp(query, str(server), port=port, timeout=timeout)
    except (OSError, dns.exception.DNSException):
        return []
    return [item.address for rrset in answer.answer for item in rrset
            if rrset.rdtype == dns.rdatatype.A]


def wait_until(check, what, timeout=10.0):
    """Poll ``check()`` until true; raise :class:`VimError` naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while not check():
        if time.monotonic() > deadline:
            raise VimError(f"{what} did not come up within {timeout:.0f} s")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
