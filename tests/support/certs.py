"""A throwaway certificate authority for the TLS tests, made with ``cryptography``.

Tests look for key material by :func:`key_marker`, a line of the key's base64 body:
unique to that key, so it is found in a file, log or answer only if the key is.
"""
import dataclasses
import datetime as dt

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import AuthorityInformationAccessOID, NameOID


def _name(common_name):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def pem_key(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode("ascii")


def pem_cert(cert):
    return cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


def key_marker(key_pem):
    """A line of the base64 body of ``key_pem``: found in a file or log only if the key is."""
    return key_pem.splitlines()[2]


@dataclasses.dataclass
class Issued:
    """A server certificate with its chain and key, as PEM."""

    cert: x509.Certificate
    chain_pem: str
    key_pem: str

    @property
    def fingerprint(self):
        return self.cert.fingerprint(hashes.SHA256()).hex()


class TestCA:
    """A root CA and an intermediate under it; :meth:`issue` makes server certificates."""

    __test__ = False  # not a test class

    def __init__(self, name="CDNaaS test root"):
        now = dt.datetime.now(dt.timezone.utc)
        self.root_key = ec.generate_private_key(ec.SECP256R1())
        self.root = self._sign(_name(name), self.root_key.public_key(), _name(name),
                               self.root_key, now, ca=True)
        self.inter_key = ec.generate_private_key(ec.SECP256R1())
        self.inter = self._sign(_name(f"{name} intermediate"), self.inter_key.public_key(),
                                _name(name), self.root_key, now, ca=True)

    @property
    def root_pem(self):
        return pem_cert(self.root)

    @staticmethod
    def _sign(subject, public_key, issuer, issuer_key, now, ca=False, names=(),
              not_before=None, not_after=None, ocsp_url=None):
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                   .public_key(public_key).serial_number(x509.random_serial_number())
                   .not_valid_before(not_before or now - dt.timedelta(hours=1))
                   .not_valid_after(not_after or now + dt.timedelta(days=30))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if names:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
        if ocsp_url:
            builder = builder.add_extension(x509.AuthorityInformationAccess([
                x509.AccessDescription(AuthorityInformationAccessOID.OCSP,
                                       x509.UniformResourceIdentifier(ocsp_url))]),
                critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    def issue(self, names, key=None, not_before=None, not_after=None, with_chain=True,
              ocsp_url=None):
        """A server certificate for ``names`` (SAN DNS names) signed by the intermediate
        (naming ``ocsp_url`` as its OCSP responder, if given)."""
        now = dt.datetime.now(dt.timezone.utc)
        key = key or ec.generate_private_key(ec.SECP256R1())
        cert = self._sign(_name(names[0] if names else "no-names"), key.public_key(),
                          self.inter.subject, self.inter_key, now, names=names,
                          not_before=not_before, not_after=not_after, ocsp_url=ocsp_url)
        chain = pem_cert(cert) + (pem_cert(self.inter) if with_chain else "")
        return Issued(cert=cert, chain_pem=chain, key_pem=pem_key(key))


def rsa_key(bits=2048):
    return rsa.generate_private_key(public_exponent=65537, key_size=bits)
