"""Asking a DNS VNF for the vCDN's name, as a client would, or for a TXT record (one UDP
query each)."""
import dns.exception
import dns.message
import dns.query
import dns.rdatatype


def resolves(server, hostname, port=53, timeout=0.5):
    """Addresses ``server`` answers for ``hostname`` (A records), or [] when it does not answer."""
    query = dns.message.make_query(hostname, dns.rdatatype.A)
    try:
        answer = dns.query.udp(query, str(server), port=port, timeout=timeout)
    except (OSError, dns.exception.DNSException):
        return []
    return [item.address for rrset in answer.answer for item in rrset
            if rrset.rdtype == dns.rdatatype.A]


def texts(server, name, port=53, timeout=0.5):
    """The TXT strings ``server`` answers for ``name``, or None when it does not answer."""
    query = dns.message.make_query(name, dns.rdatatype.TXT)
    try:
        answer = dns.query.udp(query, str(server), port=port, timeout=timeout)
    except (OSError, dns.exception.DNSException):
        return None
    return [b"".join(item.strings).decode("ascii", "replace") for rrset in answer.answer
            for item in rrset if rrset.rdtype == dns.rdatatype.TXT]
