"""A vCDN's customer hostnames and HTTPS certificate, as SO accepts and records them.

A create or PATCH body may carry ``hostnames`` (the customer's own names, CNAMEs of
the vCDN's hostname: at most :data:`MAX_HOSTNAMES`, strict DNS names, no wildcard, none
in the operator's domain, none twice, none another live vCDN serves) and
``certificate`` (``{certificate, private_key}`` PEM: it must cover every hostname, or
the vCDN's own hostname when there are none; PATCH ``null`` ends HTTPS). SO checks the
certificate (:mod:`cdnaas.common.certificates`), has RO keep it (:class:`Stored`) and
records only RO's reference and the public facts (fingerprint, dates, subject, issuer,
names), in ``Instance.service["tls"]`` and the SIG's ``service.tls`` alike (so a rolled
back change restores them from the previous SIG). The previous reference is deleted
once no SIG uses it (:func:`release`).

``certificate: {"managed": true}`` asks for a managed certificate instead: SO orders it
for the hostnames from the operator's ACME CA once the vCDN is ACTIVE and renews it
(:mod:`cdnaas.so.acme`); ``managed_certificate`` is recorded in ``service`` (and the SIG,
with the ACME account's thumbprint its caches answer challenges with) and the issued
certificate is then recorded as an uploaded one. The view tells how many days a
certificate has left and warns (``expiry_state: expiring``) from the first
``certificate.expiring`` reminder on (:func:`warning_days`).
"""
import contextlib
import logging

from sqlalchemy import select

from cdnaas.common import certificates, challenges, config, errors
from cdnaas.delivery import https
from cdnaas.common.clients import RoClient
from cdnaas.common.validation import HOSTNAME, MAX_HOSTNAME
from cdnaas.so import acme_account, hostname_checks
from cdnaas.so.models import Instance

LOG = logging.getLogger(__name__)

MAX_HOSTNAMES = 16
#: what a vCDN's view shows of it
VIEW_TLS_KEYS = ("fingerprint_sha256", "not_before", "not_after", "subject", "issuer", "names",
                 "key_type")


def hostnames_of(service):
    """The customer hostnames recorded in an instance's ``service``."""
    return list((service or {}).get("hostnames", []))


def tls_of(service):
    """The certificate facts (with ``certificate_ref``) recorded in ``service``, or None."""
    return (service or {}).get("tls")


def managed_of(service):
    """Whether SO manages the certificate of an instance's ``service`` (ACME)."""
    return bool((service or {}).get("managed_certificate"))


def sig_tls(sig):
    """The ``service.tls`` of a SIG's JSON form (None: none, or no SIG)."""
    return ((sig or {}).get("service") or {}).get("tls")


def view(service, now):
    """What a vCDN's view shows at ``now``: ``{"hostnames": [...], "managed_certificate":
    bool, "tls": {hostnames, fingerprint_sha256, not_after, subject, issuer, ...,
    days_left, expiry_state} or None}``; never a key."""
    tls = tls_of(service)
    hostnames = hostnames_of(service)
    return {"hostnames": hostnames, "managed_certificate": managed_of(service),
            "tls": None if tls is None else {
                "hostnames": hostnames, **{k: tls.get(k) for k in VIEW_TLS_KEYS},
                **certificates.expiry(tls["not_after"], now, warning_days())}}


def warning_days():
    """Days before its end from which a certificate shows the expiry state ``expiring``:
    the first ``certificate.expiring`` reminder's (the largest of
    ``CDNAAS_CERT_EXPIRY_DAYS``, :mod:`cdnaas.so.reminders`)."""
    return max(float(days) for days in config.setting("CDNAAS_CERT_EXPIRY_DAYS"))


def sig_service(service):
    """The SIG's ``service`` for an instance's ``service``: its entries that are set, with
    only the customer hostnames that are active (:func:`cdnaas.so.hostname_checks.active`)
    and, where the certificate is managed, the thumbprint of SO's ACME account key its
    caches answer challenges with (:func:`cdnaas.so.acme_account.thumbprint`).

    :raises CdnaasError: SO's ACME account file cannot be read (500, the operator's).
    """
    out = {k: v for k, v in (service or {}).items() if v and k != hostname_checks.VERIFIED}
    out.pop("hostnames", None)
    if managed_of(service):
        try:
            out[challenges.FIELD] = acme_account.thumbprint()
        except acme_account.AccountUnreadable as exc:
            raise errors.CdnaasError(f"SO's ACME account cannot be read: {exc}") from None
    served = hostname_checks.active(service)
    return {**out, "hostnames": served} if served else out


def restored(service, previous_sig):
    """An instance's ``service`` with the hostnames and certificate of ``previous_sig``
    (a :class:`ServiceInstanceGraph`), after a change of them was rolled back."""
    return record(service, previous_sig.service.get("hostnames", []),
                  previous_sig.service.get("tls"), managed_of(previous_sig.service))


def superseded_ref(old_sig, new_sig):
    """The certificate reference ``old_sig`` serves and ``new_sig`` no longer does, or None."""
    old = (old_sig.service.get("tls") or {}).get("certificate_ref")
    return old if old and old != (new_sig.service.get("tls") or {}).get("certificate_ref") \
        else None


def parse_hostnames(values, own_hostname, field="hostnames"):
    """The customer hostnames of a request, lower-cased.

    :raises BadRequest: not a list of at most 16 DNS names, a wildcard, a name twice,
        or a name in the operator's domain (``CDNAAS_DNS_DOMAIN``), all named.
    """
    if not isinstance(values, list) or len(values) > MAX_HOSTNAMES:
        raise errors.BadRequest(f"{field} must be a list of at most {MAX_HOSTNAMES} DNS names",
                                field=field)
    domain = config.dns_domain().lower()
    seen = []
    for index, value in enumerate(values):
        item = f"{field}[{index}]"
        name = value.lower() if isinstance(value, str) and value.isascii() else None
        if name is not None and name.startswith("*."):
            raise errors.BadRequest(f"{item} is a wildcard; list each name the vCDN serves "
                                    "(a wildcard certificate may cover them)", field=item)
        if name is None or len(name) > MAX_HOSTNAME or "." not in name \
                or not HOSTNAME.fullmatch(name) or len(name.rsplit(".", 1)[1]) < 2:
            raise errors.BadRequest(f"{item} is not a DNS name: send labels of a-z, 0-9 and - "
                                    "joined by dots, like cdn.example.com (an IDN in its xn-- "
                                    "form)", field=item)
        if name == domain or name.endswith(f".{domain}"):
            raise errors.BadRequest(f"{item} {name} is in the operator's domain {domain}; the "
                                    f"vCDN already answers {own_hostname}: list names of your "
                                    "own domains, CNAMEs of it", field=item)
        if name in seen:
            raise errors.BadRequest(f"{item} {name} is listed twice; list it once", field=item)
        seen.append(name)
    return seen


def check_unclaimed(session, hostnames, instance_id, live_states):
    """Refuse names another vCDN in ``live_states`` serves (call it in the transaction
    that records them).

    :raises Conflict: naming the first such name (not the vCDN, which may be another
        tenant's).
    """
    if not hostnames:
        return
    wanted = set(hostnames)
    for (service,) in session.execute(select(Instance.service).where(
            Instance.state.in_(live_states), Instance.id != instance_id)):
        taken = wanted & set(hostnames_of(service))
        if taken:
            name = sorted(taken)[0]
            raise errors.Conflict(f"{name} is served by another vCDN; a name is served by one "
                                  "vCDN at a time: remove it there first",
                                  field=f"hostnames[{hostnames.index(name)}]")


def check_certificate(body, hostnames, own_hostname, now):
    """The checked :class:`~cdnaas.common.certificates.Bundle` of ``body["certificate"]``
    for ``hostnames`` (or ``own_hostname`` when none).

    :raises BadRequest, Unprocessable: naming ``certificate.*`` (never quoting it).
    """
    sent = body["certificate"]
    if not isinstance(sent, dict):
        raise errors.BadRequest("certificate must be an object {certificate: PEM chain, "
                                "private_key: PEM} or {managed: true}", field="certificate")
    if set(sent) - {"certificate", "private_key"}:
        raise errors.BadRequest("certificate has fields other than certificate and private_key;"
                                " send only those two", field="certificate")
    for name in ("certificate", "private_key"):
        if name not in sent:
            raise errors.BadRequest(f"certificate.{name} is required; add it",
                                    field=f"certificate.{name}")
    return certificates.check(sent["certificate"], sent["private_key"],
                              hostnames or [own_hostname], now)


def wants_managed(sent):
    """Whether a body's ``certificate`` asks for a managed certificate (``{"managed": ...}``)."""
    return isinstance(sent, dict) and "managed" in sent


def check_managed(sent, hostnames):
    """A body's ``certificate: {"managed": true}`` for ``hostnames``.

    :raises BadRequest: other fields beside ``managed``, or it is not true.
    :raises Unprocessable: no hostnames (a managed certificate covers the customer's
        names), or the operator has no ACME CA (``CDNAAS_ACME_DIRECTORY``).
    """
    if set(sent) != {"managed"} or sent["managed"] is not True:
        raise errors.BadRequest("certificate.managed must be true and alone: send "
                                '{"managed": true} for a certificate SO obtains and renews, '
                                "or {certificate, private_key} to upload your own",
                                field="certificate.managed")
    if not hostnames:
        raise errors.Unprocessable("a managed certificate covers the vCDN's hostnames, and it "
                                   "has none: list your names in hostnames (CNAMEs of the "
                                   "vCDN's hostname)", field="hostnames")
    if not config.setting("CDNAAS_ACME_DIRECTORY"):
        raise errors.Unprocessable("this operator offers no managed certificates (no ACME "
                                   "CA is set up); upload a certificate instead",
                                   field="certificate.managed")


def check_still_covered(tls, hostnames, own_hostname):
    """The recorded certificate ``tls`` (facts) must cover changed ``hostnames``.

    :raises Unprocessable: naming the first name it does not cover.
    """
    for index, name in enumerate(hostnames or [own_hostname]):
        if not certificates.covers(tls.get("names", []), name):
            raise errors.Unprocessable(
                f"the vCDN's certificate does not cover {name} (its names: "
                f"{', '.join(tls.get('names', []))}); send a certificate that covers every "
                "hostname in the same PATCH", field=f"hostnames[{index}]" if hostnames
                else "hostnames")


class Stored(contextlib.AbstractContextManager):
    """Secrets stored in RO for one request: deleted again if the request fails.

    ``with Stored(owner) as stored: ...; ref = stored.keep(bundle)``: leaving the block
    by an exception deletes what :meth:`keep` stored (the request wrote nothing that
    refers to it).
    """

    def __init__(self, owner):
        self.owner = owner
        self.refs = []

    def keep(self, bundle):
        """Store ``bundle`` in RO; return the facts to record, with ``certificate_ref``.

        :raises CdnaasError: RO refused (4xx) or could not be reached (502).
        """
        kept = RoClient().store_secret(self.owner, bundle.certificate, bundle.private_key)
        self.refs.append(kept.ref)
        return {"certificate_ref": kept.ref, **bundle.facts.to_dict()}

    def __exit__(self, exc_type, exc, traceback):
        if exc_type is not None:
            for ref in self.refs:
                release(ref, why="its request was refused")
        return False


class Once:
    """A plain RO client called once per call: :func:`release` and :func:`release_all`'s
    default, where SO's runner gives its patient one (``cdnaas.so.operations.PatientRo``,
    retried while RO is away): both have ``client`` and ``call(method, *args)``, which
    calls ``method``, a method of ``client``."""

    def __init__(self):
        self.client = RoClient()

    @staticmethod
    def call(method, *args):
        return method(*args)


def release(ref, why, ro=None):
    """Delete secret ``ref`` in RO (logged, never raised: a vCDN's end deletes every
    secret of it again, :func:`release_all`); ``ro`` as for :func:`release_all`."""
    ro = ro or Once()
    try:
        ro.call(ro.client.delete_secret, ref)
        LOG.info("deleted secret %s: %s", ref, why)
    except errors.CdnaasError as exc:
        LOG.warning("secret %s (%s) could not be deleted now: %s", ref, why, exc)


def release_all(owner, ro=None):
    """Delete every secret RO keeps for vCDN ``owner``; return how many.

    :param ro: how to call RO (:class:`Once` by default).
    :raises CdnaasError: RO refused or could not be reached (the vCDN's end is retried).
    """
    ro = ro or Once()
    refs = [s.ref for s in ro.call(ro.client.secrets, owner)]
    for ref in refs:
        ro.call(ro.client.delete_secret, ref)
    return len(refs)


def accept(body, own_hostname, now):
    """``(hostnames, bundle or None, managed)`` of a create body, checked (nothing stored
    yet).

    :raises BadRequest, Unprocessable: as :func:`parse_hostnames`, :func:`check_certificate`,
        :func:`check_managed`.
    """
    hostnames = parse_hostnames(body.get("hostnames", []), own_hostname)
    sent = body.get("certificate")
    if wants_managed(sent):
        check_managed(sent, hostnames)
        return hostnames, None, True
    bundle = check_certificate(body, hostnames, own_hostname, now) if sent is not None else None
    return hostnames, bundle, False


def check_policy_served(service, serves_https, body):
    """Refuse an instance's ``service`` (after ``body``, a create or PATCH) whose HTTPS
    policy needs HTTPS where it would serve none (``serves_https`` false): named
    ``https_policy.http`` where ``body`` sets the policy, else ``certificate``.

    :raises Unprocessable: as :func:`cdnaas.delivery.https.check_served`.
    """
    https.check_served(service.get(https.FIELD), serves_https,
                       field=https.FIELD if https.FIELD in body else "certificate")


def record(service, hostnames, tls, managed=False):
    """``service`` (an instance's) with ``hostnames``, the certificate facts ``tls``
    (None: HTTP only) and whether SO ``managed`` the certificate in place of its own;
    empty entries left out."""
    out = {k: v for k, v in (service or {}).items()
           if k not in ("hostnames", "tls", "managed_certificate", hostname_checks.VERIFIED)}
    if hostnames:
        out["hostnames"] = hostnames
    verified = hostname_checks.kept_verified(service, hostnames or [])
    if verified:
        out[hostname_checks.VERIFIED] = verified
    if tls:
        out["tls"] = tls
    if managed:
        out["managed_certificate"] = True
    return out


def record_verified(service, verified):
    """``service`` with the customer hostnames ``verified`` (among its own) recorded as
    seen pointing at the vCDN."""
    hostnames = hostnames_of(service)
    seen = set(hostname_checks.kept_verified(service, hostnames)) | set(verified)
    return {**service, hostname_checks.VERIFIED: [h for h in hostnames if h in seen]}


def change(service, body, own_hostname, now, stored, issued=False):
    """An instance's ``service`` after a PATCH ``body``: ``(new service, superseded ref or
    None)``. A new certificate is checked and kept through ``stored``; ``"certificate":
    null`` ends HTTPS; ``{"managed": true}`` has SO obtain one (the one kept serves until
    then); changed hostnames alone must be covered by the certificate kept, unless it is
    managed (SO orders one for them).

    :param issued: ``body["certificate"]`` is the certificate SO's ACME order obtained
        (:mod:`cdnaas.so.acme`): the vCDN's certificate stays managed.
    :raises BadRequest, Unprocessable, CdnaasError: as :func:`accept`, :meth:`Stored.keep`.
    """
    hostnames = parse_hostnames(body["hostnames"], own_hostname) if "hostnames" in body \
        else hostnames_of(service)
    current, managed = tls_of(service), managed_of(service)
    tls = current
    sent = body.get("certificate")
    if "certificate" in body and sent is None:
        tls, managed = None, False
    elif not issued and wants_managed(sent):
        check_managed(sent, hostnames)
        managed = True
    elif "certificate" in body:  # SO's own order covers the names served (not those pending)
        covered = hostname_checks.active(record(service, hostnames, None)) if issued \
            else hostnames
        tls = stored.keep(check_certificate(body, covered, own_hostname, now))
        managed = managed and issued
    elif managed and "hostnames" in body:
        check_managed({"managed": True}, hostnames)
    elif current and "hostnames" in body:
        check_still_covered(current, hostnames, own_hostname)
    old_ref = (current or {}).get("certificate_ref")
    superseded = old_ref if old_ref and old_ref != (tls or {}).get("certificate_ref") else None
    return record(service, hostnames, tls, managed), superseded
