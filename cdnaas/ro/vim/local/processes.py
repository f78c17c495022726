"""Starting, reloading and probing the VNF daemons (nginx, dnsmasq) in their namespaces.

A daemon is started by a shell that first joins the VNF's CPU group, so the
daemon and every worker it forks stay inside the vCPUs the SIG gave it.
"""
import logging
import time

import dns.message
import dns.query
import dns.rdatatype
import requests

from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.local.system import in_namespace, run

LOG = logging.getLogger(__name__)

_JOIN_AND_EXEC = 'echo $$ > "$1" && shift && exec "$@"'


def start_daemon(namespace, cgroup_procs, command):
    """Start ``command`` (a self-daemonising server) in ``namespace`` inside a CPU group."""
    run(["sh", "-c", _JOIN_AND_EXEC, "sh", cgroup_procs, *in_namespace(namespace, command)])


def boot_nginx(namespace, cgroup_procs, ip_script, prefix, conf):
    """One process chain inside ``namespace``: join the CPU group, configure the
    links (``ip -batch ip_script``), then start nginx, which checks the config as it
    starts (binding the VNF's addresses, which exist only there) and runs nothing on
    a config it rejects. No separate ``nginx -t``: it parsed every config twice and
    was a third of a cache's start-up CPU.

    :raises VimError: with the tools' own words when a step fails.
    """
    script = 'echo $$ > "$1" && ip -batch "$2" && exec nginx -p "$3" -c "$4"'
    run(in_namespace(namespace, ["sh", "-c", script, "sh", cgroup_procs, ip_script,
                                 f"{prefix}/", conf]))


def nginx_command(prefix, conf, *extra):
    return ["nginx", "-p", f"{prefix}/", "-c", conf, *extra]


def reload_nginx(namespace, prefix, conf):
    """Graceful reload: old workers finish their connections, new ones use the new config."""
    run(in_namespace(namespace, nginx_command(prefix, conf, "-s", "reload")))


def _http():
    session = requests.Session()
    session.trust_env = False  # never through a proxy: these addresses live on this machine
    return session


def answers_http(address, port=80, path="/nginx_status", timeout=0.5):
    """True when the server at ``address`` answers ``path`` with 200."""
    try:
        return _http().get(f"http://{address}:{port}{path}", timeout=timeout).status_code == 200
    except requests.RequestException:
        return False


def stub_status(address, port=80):
    """nginx ``stub_status`` figures (active connections, accepts, handled, requests...),
    or None when the server does not answer."""
    try:
        text = _http().get(f"http://{address}:{port}/nginx_status", timeout=1).text
    except requests.RequestException:
        return None
    lines = text.splitlines()
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
