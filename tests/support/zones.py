"""What the zone publishers' contract test needs of each publisher (:class:`ZoneServer`)
and DNS questions asked straight at an authoritative server (dnspython)."""
import dataclasses

import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype


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
