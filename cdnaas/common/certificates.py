"""A tenant's TLS certificate and private key: checked, normalised and described.

:func:`check` takes the PEM texts a customer sends (``certificate.certificate``: the
server certificate then each issuer in order; ``certificate.private_key``: its key,
unencrypted) and returns a :class:`Bundle` of normalised PEM (the chain as parsed, the
key as PKCS#8) with its public :class:`Facts`, or refuses it with a 400 (not PEM, not
a certificate or key, encrypted, too large) or a 422 (well formed but unusable: the
key belongs to another certificate, the chain is out of order, it is expired or not
yet valid, a hostname is not covered, the key is weak or of a kind browsers do not
all take). Messages name the field and say what to send instead; they never quote
what was sent, so no key material reaches an answer or a log.

Hostname coverage follows RFC 6125: only the certificate's subjectAltName DNS names
count (not its subject CN), compared without case; a wildcard is a whole leftmost
label ``*`` matching exactly one label, and is honoured only over at least two labels
(``*.example.com``, never ``*.com``).
"""
import dataclasses
import datetime as dt
import re

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import AuthorityInformationAccessOID, ExtensionOID

from cdnaas.common import errors

CERTIFICATE_FIELD = "certificate.certificate"
KEY_FIELD = "certificate.private_key"
#: largest chain and key accepted (characters of PEM)
MAX_CHAIN_CHARS = 64 * 1024
MAX_KEY_CHARS = 16 * 1024
#: most certificates in a chain (the server's and its issuers)
MAX_CHAIN = 8
RSA_BITS = (2048, 8192)
EC_CURVES = {"secp256r1": "P-256", "secp384r1": "P-384"}
#: characters a PEM text may hold: printable ASCII and line breaks
_PEM_TEXT = re.compile(r"[\x20-\x7e\r\n\t]*")
_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]{1,40})-----(.*?)-----END \1-----", re.S)
_KEY_BLOCKS = ("PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY")
_WEAK_HASHES = (hashes.SHA1, hashes.MD5)
_SHOWN = 1024  # longest subject or issuer shown


@dataclasses.dataclass(frozen=True)
class Facts:
    """What may be shown of a certificate: never anything of its key.

    :param fingerprint_sha256: SHA-256 of the server certificate (DER), lowercase hex.
    :param names: its subjectAltName DNS names, lower-case, sorted.
    """

    fingerprint_sha256: str
    not_before: str
    not_after: str
    subject: str
    issuer: str
    names: list
    key_type: str

    def to_dict(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Bundle:
    """A checked certificate chain and its key, both normalised PEM."""

    certificate: str
    private_key: str
    facts: Facts

    def __repr__(self):  # never show the key, even in a traceback's locals
        return f"Bundle(fingerprint_sha256={self.facts.fingerprint_sha256!r})"


def check(certificate, private_key, hostnames, now) -> Bundle:
    """The bundle of ``certificate`` and ``private_key`` if it can serve every name of
    ``hostnames`` at ``now`` (an aware datetime).

    :raises BadRequest: a text is not what it should be (named field, no echo).
    :raises Unprocessable: the bundle is well formed but cannot serve (named field).
    """
    chain = _chain(certificate)
    key = _key(private_key)
    leaf = chain[0]
    _check_key_kind(key)
    public = _public(key.public_key())
    if _public(leaf.public_key()) != public:
        if any(_public(c.public_key()) == public for c in chain[1:]):
            raise errors.Unprocessable(
                f"{CERTIFICATE_FIELD} is out of order: the certificate of {KEY_FIELD} is not "
                "the first; put the server certificate first, then each issuer in order",
                field=CERTIFICATE_FIELD)
        raise errors.Unprocessable(
            f"{KEY_FIELD} is not the key of the server certificate (the first of "
            f"{CERTIFICATE_FIELD}); send the key the certificate was issued for",
            field=KEY_FIELD)
    _check_order(chain)
    _check_dates(chain, now)
    _check_leaf(chain)
    names = covered_names(leaf)
    for index, hostname in enumerate(hostnames):
        if not covers(names, hostname):
            raise errors.Unprocessable(
                f"{CERTIFICATE_FIELD} does not cover {hostname} (its names: "
                f"{', '.join(names) or 'none'}); get one whose subjectAltName lists it "
                "or a wildcard over it", field=CERTIFICATE_FIELD,
                details=[{"field": f"hostnames[{index}]",
                          "problem": f"not covered by {CERTIFICATE_FIELD}"}])
    return Bundle(
        certificate="".join(c.public_bytes(serialization.Encoding.PEM).decode("ascii")
                            for c in chain),
        private_key=key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()).decode("ascii"),
        facts=describe(leaf, key))


def parse(certificate, private_key) -> Bundle:
    """A bundle stored before (normalised by :func:`check`) read back: its form and key
    match are checked again, not its dates or names.

    :raises BadRequest, Unprocessable: as :func:`check`.
    """
    chain, key = _chain(certificate), _key(private_key)
    if _public(chain[0].public_key()) != _public(key.public_key()):
        raise errors.Unprocessable(f"{KEY_FIELD} is not the key of the server certificate",
                                   field=KEY_FIELD)
    return Bundle(certificate=certificate, private_key=private_key,
                  facts=describe(chain[0], key))


def describe(leaf, key) -> Facts:
    """The public :class:`Facts` of the server certificate ``leaf`` and its ``key``."""
    return Facts(fingerprint_sha256=leaf.fingerprint(hashes.SHA256()).hex(),
                 not_before=_iso(leaf.not_valid_before_utc),
                 not_after=_iso(leaf.not_valid_after_utc),
                 subject=_shown(leaf.subject.rfc4514_string()),
                 issuer=_shown(leaf.issuer.rfc4514_string()),
                 names=covered_names(leaf), key_type=_key_type(key))


def expiry(not_after, now, warning_days) -> dict:
    """How near a certificate valid until ``not_after`` (ISO 8601, as :class:`Facts` says
    it) is to its end at ``now`` (aware): ``{"days_left": whole days left (0 on its last
    day, negative once expired), "expiry_state": "ok" | "expiring" (fewer than
    ``warning_days`` days left) | "expired"}``."""
    left = dt.datetime.fromisoformat(not_after.replace("Z", "+00:00")) - now
    state = "expired" if left.total_seconds() <= 0 else \
        "expiring" if left < dt.timedelta(days=warning_days) else "ok"
    return {"days_left": left.days, "expiry_state": state}


def lifetime_point(facts, fraction) -> dt.datetime:
    """The moment ``fraction`` (0 to 1) of the validity of the certificate described by
    ``facts`` (a :class:`Facts` dict: ``not_before``, ``not_after``) has passed."""
    start, end = (dt.datetime.fromisoformat(facts[k].replace("Z", "+00:00"))
                  for k in ("not_before", "not_after"))
    return start + (end - start) * min(max(fraction, 0.0), 1.0)


def covered_names(leaf) -> list:
    """The subjectAltName DNS names of ``leaf``, lower-case and sorted (no SAN: none)."""
    try:
        san = leaf.extensions.get_extension_for_oid(ExtensionOID.SUBJECT_ALTERNATIVE_NAME)
    except x509.ExtensionNotFound:
        return []
    return sorted({name.lower() for name in san.value.get_values_for_type(x509.DNSName)})


def ocsp_responders(certificate) -> list:
    """The OCSP responder URLs (authorityInfoAccess) of the server certificate, the first
    of the PEM chain ``certificate`` (a :class:`Bundle`'s): empty when it names none.

    :raises ValueError: ``certificate`` holds no certificate.
    """
    leaf = x509.load_pem_x509_certificates(certificate.encode("ascii"))[0]
    try:
        access = leaf.extensions.get_extension_for_oid(
            ExtensionOID.AUTHORITY_INFORMATION_ACCESS).value
    except x509.ExtensionNotFound:
        return []
    return [d.access_location.value for d in access
            if d.access_method == AuthorityInformationAccessOID.OCSP
            and isinstance(d.access_location, x509.UniformResourceIdentifier)]


def covers(names, hostname) -> bool:
    """Whether one of ``names`` (a certificate's SAN DNS names) covers ``hostname``:
    equal without case, or a wildcard ``*.<rest>`` over one label, ``rest`` of at least
    two labels (RFC 6125 6.4.3, no partial-label wildcards)."""
    hostname = hostname.lower()
    label, _, rest = hostname.partition(".")
    for name in names:
        if name == hostname:
            return True
        if name.startswith("*.") and label and name[2:] == rest and rest.count(".") >= 1:
            return True
    return False


# -- the texts ------------------------------------------------------------------------

def _blocks(text, field, limit, what):
    """The PEM blocks ``(type, body)`` of ``text``, which must hold nothing else."""
    if not isinstance(text, str):
        raise errors.BadRequest(f"{field} must be a string of PEM text ({what})", field=field)
    if len(text) > limit:
        raise errors.BadRequest(f"{field} is longer than {limit} characters; send only "
                                f"{what}", field=field)
    if not _PEM_TEXT.fullmatch(text):
        raise errors.BadRequest(f"{field} holds bytes PEM never has (control characters, NUL "
                                f"or non-ASCII; DER must be converted to PEM first: openssl "
                                f"x509 -inform der); send {what}", field=field)
    blocks = _BLOCK.findall(text)
    if not blocks or _BLOCK.sub("", text).strip():
        raise errors.BadRequest(f"{field} is not PEM: send {what} and nothing else "
                                "(no 'subject=' or other text lines around the blocks)",
                                field=field)
    return blocks


def _chain(text):
    what = "the server certificate then each issuer, as -----BEGIN CERTIFICATE----- blocks"
    blocks = _blocks(text, CERTIFICATE_FIELD, MAX_CHAIN_CHARS, what)
    kinds = {kind for kind, _body in blocks}
    if kinds & {*_KEY_BLOCKS, "ENCRYPTED PRIVATE KEY"}:
        raise errors.BadRequest(f"{CERTIFICATE_FIELD} holds a private key; send the key in "
                                f"{KEY_FIELD} and only certificates here",
                                field=CERTIFICATE_FIELD)
    if kinds != {"CERTIFICATE"}:
        raise errors.BadRequest(f"{CERTIFICATE_FIELD} holds blocks other than CERTIFICATE "
                                f"({', '.join(sorted(kinds - {'CERTIFICATE'}))}); send {what}",
                                field=CERTIFICATE_FIELD)
    if len(blocks) > MAX_CHAIN:
        raise errors.BadRequest(f"{CERTIFICATE_FIELD} holds {len(blocks)} certificates; send at "
                                f"most {MAX_CHAIN} (the server's and its issuers, not the root)",
                                field=CERTIFICATE_FIELD)
    try:
        return x509.load_pem_x509_certificates(text.encode("ascii"))
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise errors.BadRequest(f"{CERTIFICATE_FIELD} holds a CERTIFICATE block that is not "
                                f"an X.509 certificate; send {what}",
                                field=CERTIFICATE_FIELD) from None


def _key(text):
    what = "one unencrypted -----BEGIN PRIVATE KEY----- block (PKCS#8, or RSA/EC)"
    blocks = _blocks(text, KEY_FIELD, MAX_KEY_CHARS, what)
    kinds = [kind for kind, _body in blocks]
    if "ENCRYPTED PRIVATE KEY" in kinds or any("Proc-Type:" in body for _kind, body in blocks):
        raise errors.BadRequest(f"{KEY_FIELD} is encrypted; send it without a passphrase "
                                "(openssl pkey -in key.pem -out plain.pem)", field=KEY_FIELD)
    if len(blocks) != 1 or kinds[0] not in _KEY_BLOCKS:
        raise errors.BadRequest(f"{KEY_FIELD} must hold exactly {what}", field=KEY_FIELD)
    try:
        return serialization.load_pem_private_key(text.encode("ascii"), password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise errors.BadRequest(f"{KEY_FIELD} does not parse as a private key; send {what}",
                                field=KEY_FIELD) from None


# -- what is acceptable -----------------------------------------------------------------

def _check_key_kind(key):
    if isinstance(key, rsa.RSAPrivateKey):
        if not RSA_BITS[0] <= key.key_size <= RSA_BITS[1]:
            raise errors.Unprocessable(f"{KEY_FIELD} is an RSA key of {key.key_size} bits; "
                                       f"use {RSA_BITS[0]} to {RSA_BITS[1]} bits", field=KEY_FIELD)
        return
    if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name in EC_CURVES:
        return
    raise errors.Unprocessable(f"{KEY_FIELD} is a {_key_type(key)} key; use RSA "
                               f"({RSA_BITS[0]} bits or more) or EC "
                               f"{' or '.join(EC_CURVES.values())}", field=KEY_FIELD)


def _check_order(chain):
    for index, (child, parent) in enumerate(zip(chain, chain[1:]), start=1):
        if not _issued_by(child, parent):
            raise errors.Unprocessable(
                f"{CERTIFICATE_FIELD}: certificate {index + 1} did not issue certificate "
                f"{index}; put the server certificate first, then each issuer in order",
                field=CERTIFICATE_FIELD)


def _check_dates(chain, now):
    for index, cert in enumerate(chain, start=1):
        which = "the server certificate" if index == 1 else f"certificate {index} (an issuer)"
        if cert.not_valid_after_utc <= now:
            raise errors.Unprocessable(f"{CERTIFICATE_FIELD}: {which} expired on "
                                       f"{_iso(cert.not_valid_after_utc)}; renew it",
                                       field=CERTIFICATE_FIELD)
        if cert.not_valid_before_utc > now:
            raise errors.Unprocessable(f"{CERTIFICATE_FIELD}: {which} is valid only from "
                                       f"{_iso(cert.not_valid_before_utc)}; send it then",
                                       field=CERTIFICATE_FIELD)


def _check_leaf(chain):
    """The first certificate of ``chain`` can be a server's: not a CA, unless it is a
    self-signed certificate sent alone (``openssl req -x509`` marks its certificates
    CA:TRUE); its names are checked afterwards as any server certificate's."""
    leaf = chain[0]
    if _is_ca(leaf) and not (len(chain) == 1 and _issued_by(leaf, leaf)):
        raise errors.Unprocessable(f"{CERTIFICATE_FIELD} starts with a CA certificate; put the "
                                   "server certificate first (a CA certificate is taken "
                                   "first only when it is self-signed and sent alone)",
                                   field=CERTIFICATE_FIELD)
    try:
        signed_with = leaf.signature_hash_algorithm
    except UnsupportedAlgorithm:
        signed_with = hashes.MD5()  # an algorithm too odd to name: as unusable as MD5
    if isinstance(signed_with, _WEAK_HASHES):
        raise errors.Unprocessable(f"{CERTIFICATE_FIELD} is signed with {signed_with.name} "
                                   "or worse, which browsers refuse; get one signed with "
                                   "SHA-256 or better", field=CERTIFICATE_FIELD)
    if not covered_names(leaf):
        raise errors.Unprocessable(f"{CERTIFICATE_FIELD} has no subjectAltName DNS names "
                                   "(browsers ignore the subject CN); get one that lists "
                                   "the hostnames", field=CERTIFICATE_FIELD)


# -- helpers ------------------------------------------------------------------------------

def _is_ca(cert):
    try:
        return cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False


def _issued_by(child, parent):
    """Whether ``parent`` signed ``child`` (names and signature)."""
    try:
        child.verify_directly_issued_by(parent)
    except (ValueError, TypeError, InvalidSignature, UnsupportedAlgorithm):
        return False
    return True

def _public(key):
    return key.public_bytes(serialization.Encoding.DER,
                            serialization.PublicFormat.SubjectPublicKeyInfo)


def _key_type(key):
    if isinstance(key, rsa.RSAPrivateKey):
        return f"RSA {key.key_size}"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return f"EC {EC_CURVES.get(key.curve.name, key.curve.name)}"
    return type(key).__name__.lstrip("_").replace("PrivateKey", "") or "unknown"


def _iso(moment):
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _shown(text):
    """A subject or issuer as shown: printable, at most :data:`_SHOWN` characters."""
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= _SHOWN else text[:_SHOWN - 3] + "..."
