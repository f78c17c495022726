"""What the zone publishers' contract test needs of each publisher (:class:`ZoneServer`)
and DNS questions asked straight at an authoritative server (dnspython)."""
import contextlib
import dataclasses
import os
from pathlib import Path

import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest

from cdnaas.cli.stack import start_zone_server
from cdnaas.common.ports import free_loopback_ports


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
