"""Custom hostnames activated only once their owner's DNS points them at the vCDN.

A customer's hostname (``hostnames`` of a create or PATCH) is recorded at once but
served (in the SIG: balancers, geo-DNS, managed certificates) only after SO has seen,
through a resolver (``CDNAAS_HOSTNAME_RESOLVER``, else this machine's), either a CNAME
of it to the vCDN's entry point (its hostname in the operator's zone) or a TXT record
``_cdnaas.<hostname>`` holding the vCDN's token for it. Until then the vCDN's view
shows it ``pending`` with the records to create. :class:`.hostname_verifier.Verifier`
looks every ``CDNAAS_HOSTNAME_CHECK_INTERVAL`` seconds and activates what it sees with an
UPDATE operation. ``CDNAAS_HOSTNAME_CHECK=0`` activates names as they are accepted.

The verified names are recorded in the instance's ``service["verified_hostnames"]``
(never in the SIG, whose ``hostnames`` are the active ones: :func:`active`).
"""
import hashlib
import logging

import dns.exception
import dns.resolver

from cdnaas.common import config, errors

LOG = logging.getLogger(__name__)

VERIFIED = "verified_hostnames"
#: the label below a customer's hostname holding its TXT token
TXT_LABEL = "_cdnaas"
TXT_PREFIX = "cdnaas-verification="
REASON = "custom hostname verified"
#: seconds one lookup may take
LOOKUP_SECONDS = 3.0


def checking():
    """Whether custom hostnames wait for their DNS (``CDNAAS_HOSTNAME_CHECK``)."""
    return config.setting("CDNAAS_HOSTNAME_CHECK")


def active(service):
    """The customer hostnames of an instance's ``service`` that are served: all when
    nothing is checked, else those verified, in the customer's order."""
    hostnames = list((service or {}).get("hostnames", []))
    if not checking():
        return hostnames
    verified = set((service or {}).get(VERIFIED, []))
    return [h for h in hostnames if h in verified]


def kept_verified(service, hostnames):
    """``service``'s verified names still among ``hostnames`` (a name removed and listed
    again is checked again)."""
    return [h for h in (service or {}).get(VERIFIED, []) if h in hostnames]


def token(vcdn_id, hostname):
    """The TXT token proving ``hostname`` is meant for vCDN ``vcdn_id``."""
    return hashlib.sha256(f"cdnaas/{vcdn_id}/{hostname}".encode()).hexdigest()[:32]


def records(vcdn_id, hostname, entry_hostname):
    """Either record activates ``hostname``: its CNAME to the entry point, or the TXT."""
    return [{"type": "CNAME", "name": hostname, "value": entry_hostname},
            {"type": "TXT", "name": f"{TXT_LABEL}.{hostname}",
             "value": f"{TXT_PREFIX}{token(vcdn_id, hostname)}"}]


def view(vcdn_id, service, entry_hostname):
    """``[{hostname, status, records}]`` of the vCDN's customer hostnames: ``active``
    (served), or ``pending`` with ``records`` saying what to create (either one)."""
    served = set(active(service))
    return [{"hostname": h, "status": "active" if h in served else "pending",
             "records": [] if h in served else records(vcdn_id, h, entry_hostname)}
            for h in (service or {}).get("hostnames", [])]


def resolver():
    """A :class:`dns.resolver.Resolver` asking ``CDNAAS_HOSTNAME_RESOLVER`` (``ip`` or
    ``ip:port``), else this machine's resolvers.

    :raises CdnaasError: (500) the setting is not an address.
    """
    where = config.setting("CDNAAS_HOSTNAME_RESOLVER")
    if not where:
        made = dns.resolver.Resolver()
    else:
        made = dns.resolver.Resolver(configure=False)
        host, _, port = where.rpartition(":") if where.count(":") == 1 else (where, "", "")
        try:
            made.nameservers = [host]
            made.port = int(port or 53)
        except ValueError:
            raise errors.CdnaasError(f"setting CDNAAS_HOSTNAME_RESOLVER={where!r} is not an "
                                     "address (ip or ip:port)") from None
    made.lifetime = made.timeout = LOOKUP_SECONDS
    made.cache = None
    return made


def seen(vcdn_id, hostname, entry_hostname, ask=None):
    """Whether ``hostname`` is a CNAME of ``entry_hostname``, or ``_cdnaas.<hostname>``
    holds the vCDN's token, as the resolver answers now (no answer: not seen)."""
    ask = ask or resolver()
    try:
        cname = ask.resolve(hostname, "CNAME", raise_on_no_answer=False).rrset
        if cname is not None and any(r.target.to_text(omit_final_dot=True).lower()
                                     == entry_hostname.lower() for r in cname):
            return True
        txt = ask.resolve(f"{TXT_LABEL}.{hostname}", "TXT", raise_on_no_answer=False).rrset
    except (dns.exception.DNSException, OSError) as exc:
        LOG.debug("%s not verified yet: %s", hostname, exc)
        return False
    wanted = f"{TXT_PREFIX}{token(vcdn_id, hostname)}".encode()
    return txt is not None and any(b"".join(r.strings) == wanted for r in txt)
