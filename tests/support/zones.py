"""What the zone publishers' contract test needs of each publisher (:class:`ZoneServer`),
DNS questions asked straight at an authoritative server (dnspython), and what the
entry-point tests share: a region's client with its recursive resolver, a resolving loop,
and the checks that a name answered throughout a change and kept its names."""
import contextlib
import dataclasses
import ipaddress
import os
import threading
import time
from pathlib import Path

import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import dns.tsig
import dns.tsigkeyring
import dns.update
import pytest

from cdnaas.cli.stack import start_zone_server
from cdnaas.common.ports import free_loopback_ports
from cdnaas.ro.vim.local import clients, network
from cdnaas.ro.zones import knot


@dataclasses.dataclass
class ZoneServer:
    """A publisher ready to be tested, and where its zone is served.

    :param publisher: the :class:`~cdnaas.ro.zones.base.ZonePublisher` under test, its
        settings (zone, TTL, its own) in force for the test.
    :param address: ``(ip, port)`` of an authoritative server of the operator's zone, or
        None when nothing is served (``noop``).
    :param settle: seconds a change may take to be served there (a Designate pool
        pushes changes to its backend after the API answered; the local server: 0).
    """

    publisher: object
    address: tuple | None
    settle: float = 0.0


def referral(address, name, timeout=1.0):
    """What the authoritative server at ``address`` answers for ``name`` NS, as
    ``(rcode text, {ns name: sorted addresses})``: the NS set of a delegation (from the
    authority section of a referral, or the answer) with each name's glue (A and AAAA of
    the additional section); names absolute without the trailing dot.

    :raises dns.exception.Timeout: no answer within ``timeout``.
    """
    query = dns.message.make_query(name, dns.rdatatype.NS)
    query.flags &= ~dns.flags.RD
    answer = dns.query.udp(query, address[0], port=address[1], timeout=timeout)
    servers = {}
    for rrset in answer.answer + answer.authority:
        if rrset.rdtype == dns.rdatatype.NS:
            servers.update({r.target.to_text(omit_final_dot=True).lower(): [] for r in rrset})
    for rrset in answer.additional:
        owner = rrset.name.to_text(omit_final_dot=True).lower()
        if owner in servers and rrset.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
            servers[owner] += [r.address for r in rrset]
    return dns.rcode.to_text(answer.rcode()), {n: sorted(a) for n, a in servers.items()}


def expected(delegation):
    """:func:`referral`'s view of a published :class:`Delegation`."""
    return {glue.name: sorted(glue.addresses) for glue in delegation.glue}


@contextlib.contextmanager
def local_zone_server(state_dir, zone="cdn.example.net"):
    """The operator zone's local server (knotd) as a stack starts it, for ``zone`` in
    ``state_dir`` on a free port, with this process's settings pointing at it (until
    it stops); yields the port."""
    port = free_loopback_ports(1)[0]
    with pytest.MonkeyPatch.context() as patch:
        for name, value in (("CDNAAS_STATE_DIR", str(state_dir)), ("CDNAAS_DNS_DOMAIN", zone),
                            ("CDNAAS_LOCAL_ZONE_PORT", str(port)),
                            ("CDNAAS_ZONE_PUBLISHER", "local")):
            patch.setenv(name, value)
        process = start_zone_server(dict(os.environ), Path(state_dir) / "zone.log")
        try:
            yield port
        finally:
            process.terminate()
            process.wait(10)


#: a recursive resolver that asks again on every query (nothing cached past its TTL of
#: 0), so that each answer goes through the operator's zone and a DNS VNF
UNBOUND_CONF = """server:
    interface: {address}@53
    access-control: 0.0.0.0/0 allow
    do-ip6: no
    do-daemonize: yes
    username: ""
    chroot: ""
    directory: "{folder}"
    pidfile: "{folder}/unbound.pid"
    logfile: "{folder}/unbound.log"
    verbosity: 1
    num-threads: 1
    module-config: "iterator"
    qname-minimisation: no
    cache-max-ttl: 0
    cache-max-negative-ttl: 0
    infra-host-ttl: 1
stub-zone:
    name: "{zone}"
    stub-addr: {server}@{port}
"""


@contextlib.contextmanager
def recursive_resolver(viewer, folder, zone, subnet, port):
    """Debian's ``unbound`` in ``viewer``'s namespace (a region's client), listening on
    the client's address, with a stub zone sending ``zone`` to the local zone server at
    port ``port`` of the gateway of the region's ``subnet``; stopped after.

    The client's own address is in a client prefix (geo-DNS steers by it), which the
    root namespace has no route to: the client is given a second address in the region's
    subnet, used only towards the gateway, so that the zone server's answers come back.
    """
    subnet = ipaddress.ip_network(subnet)
    gateway = subnet.network_address + 1
    for command in (["ip", "addr", "add", f"{subnet.broadcast_address - 2}/32", "dev", "eth0"],
                    ["ip", "route", "replace", str(subnet), "dev", "eth0", "src", viewer.address],
                    ["ip", "route", "replace", f"{gateway}/32", "dev", "eth0", "src",
                     str(subnet.broadcast_address - 2)]):
        viewer.run(command)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    conf = folder / "unbound.conf"
    conf.write_text(UNBOUND_CONF.format(address=viewer.address, folder=folder, zone=zone,
                                        server=gateway, port=port))
    viewer.run(["unbound", "-c", str(conf)])
    try:
        yield viewer
    finally:
        pid = int((folder / "unbound.pid").read_text())
        os.kill(pid, 15)


def add_record(state_dir, port, zone, name, kind, value, ttl=1):
    """Add ``name`` ``kind`` ``value`` to ``zone`` on a local zone server started from
    ``state_dir`` (:func:`local_zone_server`), with its update key (RFC 2136)."""
    key_name, secret = knot.update_key(knot.server_files(state_dir))
    update = dns.update.UpdateMessage(f"{zone}.", keyring=dns.tsigkeyring.from_text(
        {key_name: secret}), keyname=key_name, keyalgorithm=dns.tsig.HMAC_SHA256)
    update.add(f"{name}.", ttl, kind, value)
    answer = dns.query.tcp(update, "127.0.0.1", port=port, timeout=3)
    assert answer.rcode() == dns.rcode.NOERROR, answer


#: the region clients of the entry-point tests
CLIENT = {"eu-west": "10.1.0.31", "us-east": "10.2.0.31"}
#: how long, and how many queries, a resolving loop may take during region changes
LOOP_SECONDS, LOOP_QUERIES = 600, 3000


def region_resolver(vcdn_id, region, folder, zone, port):
    """``(viewer, start)``: a client of ``region`` (:data:`CLIENT`) and a function that
    starts its recursive resolver, sending names below ``zone`` to the authoritative
    server on ``port`` at the region bridge's gateway."""
    subnet = ipaddress.ip_network(network.find_bridge(vcdn_id, region)[1], strict=False)
    viewer = clients.client(vcdn_id, region, CLIENT[region])
    return viewer, lambda client: recursive_resolver(client, folder / region, zone, subnet, port)


def completed(stack, accepted):
    """The vCDN once the operation ``accepted`` started has COMPLETED (asserted)."""
    operation = stack.acme.wait(accepted["operation"]["id"], 300)
    assert operation["state"] == "COMPLETED", operation
    return stack.acme.ok("GET", f"/vcdns/{operation['vcdn_id']}")


def balancers(vcdn):
    """Each region's balancer address of ``vcdn``."""
    return {r["name"]: r["load_balancer"] for r in vcdn["regions"]}


class Resolving:
    """A client asking its recursive resolver for ``name`` back to back (each ``dig``
    waits 1 s and tries twice), at most :data:`LOOP_QUERIES` times or :data:`LOOP_SECONDS`."""

    def __init__(self, viewer, name):
        self.viewer, self.name = viewer, name
        self.answers = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        deadline = time.monotonic() + LOOP_SECONDS
        while not self.stop.is_set() and time.monotonic() < deadline \
                and len(self.answers) < LOOP_QUERIES:
            self.answers.append(self.viewer.resolve(self.viewer.address, self.name))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        time.sleep(1.0)
        self.stop.set()
        self.thread.join(30)


def assert_answered_throughout(answers, balancer):
    """Every one of ``answers`` (more than 20) is ``balancer``: no gap during the change."""
    assert len(answers) > 20
    failed = [(i, a) for i, a in enumerate(answers) if a != [balancer]]
    assert failed == [], f"{len(failed)} of {len(answers)} answers failed: {failed[:5]}"


def assert_names_kept(changed, name):
    """Each vCDN of ``changed`` still has entry point ``name`` and its one NS name."""
    for vcdn in changed:
        assert vcdn["entry_point"]["hostname"] == name
        assert [ns["name"] for ns in vcdn["entry_point"]["name_servers"]] == [f"dns-0.{name}"]
