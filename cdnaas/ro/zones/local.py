"""The ``local`` zone publisher: RFC 2136 updates to the Knot DNS server the stack runs
(:mod:`cdnaas.ro.zones.knot`), signed with the key in its files (TSIG, HMAC-SHA256).

Each publish or withdraw is one UPDATE message, which the server applies as one
transaction (one new serial): a resolver sees the old delegation or the new one,
never a zone between them. What is published is read back from the server (a
referral: the NS set and its glue), never remembered here.
"""
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import dns.tsig
import dns.tsigkeyring
import dns.update

from cdnaas.ro.zones import knot
from cdnaas.ro.zones.base import (Delegation, Glue, ZonePublisher, ZoneUnavailable,
                                  check_label)

#: seconds one exchange with the server may take
TIMEOUT = 3.0


class LocalZonePublisher(ZonePublisher):
    """Delegations in the local Knot DNS server's copy of the operator's zone."""

    name = "local"

    def ensure_zone(self):
        if not knot.answers(zone=self.zone):
            raise ZoneUnavailable(f"the operator's zone {self.zone} is not served at "
                                  f"127.0.0.1:{knot.port()} (the stack starts its server "
                                  "when CDNAAS_ZONE_PUBLISHER is local: cdnaas up)")

    def publish(self, label, servers):
        delegation = self.delegation_of(label, servers)
        before = self.published(label)
        update = self._update()
        # glue first, then the NS set, then the glue of NS names dropped: one transaction
        for glue in delegation.glue:
            for kind, values in (("A", glue.ipv4), ("AAAA", glue.ipv6)):
                if values:
                    update.replace(_absolute(glue.name), delegation.ttl, kind, *values)
                else:
                    update.delete(_absolute(glue.name), kind)
        update.replace(_absolute(delegation.name), delegation.ttl, "NS",
                       *[f"{n}." for n in delegation.name_servers])
        for name in set(before.name_servers if before else ()) - set(delegation.name_servers):
            update.delete(_absolute(name))
        self._send(update, f"publish {delegation.name}")
        return delegation

    def withdraw(self, label):
        before = self.published(label)
        if before is None:
            return
        update = self._update()
        update.delete(_absolute(before.name), "NS")
        for name in before.name_servers:
            update.delete(_absolute(name))
        self._send(update, f"withdraw {before.name}")

    def published(self, label):
        zone = self.zone
        name = f"{check_label(label, zone)}.{zone}"
        query = dns.message.make_query(_absolute(name), dns.rdatatype.NS)
        query.flags &= ~dns.flags.RD
        answer = self._exchange(query, f"read {name}")
        ns = next((r for r in answer.answer + answer.authority
                   if r.rdtype == dns.rdatatype.NS and r.name == _absolute(name)), None)
        if ns is None:
            return None
        targets = sorted(r.target.to_text(omit_final_dot=True).lower() for r in ns)
        addresses = {target: [] for target in targets}
        for rrset in answer.additional:
            owner = rrset.name.to_text(omit_final_dot=True).lower()
            if owner in addresses and rrset.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
                addresses[owner] += [r.address for r in rrset]
        return Delegation(name=name, name_servers=tuple(targets), ttl=ns.ttl, glue=tuple(
            Glue(target, tuple(sorted(addresses[target]))) for target in targets))

    # -- the server ---------------------------------------------------------------

    def _update(self):
        try:
            key_name, secret = knot.update_key()
        except OSError as exc:
            raise ZoneUnavailable(f"no key to update the local zone server ({exc}): the "
                                  "stack writes it as it starts the server") from None
        return dns.update.UpdateMessage(
            _absolute(self.zone), keyring=dns.tsigkeyring.from_text({key_name: secret}),
            keyname=key_name, keyalgorithm=dns.tsig.HMAC_SHA256)

    def _send(self, update, what):
        answer = self._exchange(update, what)
        if answer.rcode() != dns.rcode.NOERROR:
            raise ZoneUnavailable(f"the local zone server refused to {what}: "
                                  f"{dns.rcode.to_text(answer.rcode())}")

    def _exchange(self, message, what):
        try:
            return dns.query.tcp(message, "127.0.0.1", port=knot.port(), timeout=TIMEOUT)
        except (OSError, dns.exception.DNSException) as exc:
            raise ZoneUnavailable(f"could not {what} at the local zone server "
                                  f"127.0.0.1:{knot.port()}: {exc or type(exc).__name__}") \
                from None


def _absolute(name):
    return dns.name.from_text(f"{name}.")
