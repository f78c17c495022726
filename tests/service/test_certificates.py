"""cdnaas.common.certificates: what a tenant's certificate and key must be (unit tier).

Its tests that start no process are in tests/unit/test_certificates_units.py (the unit
tier)."""
import datetime as dt
import subprocess

from cryptography import x509

from cdnaas.common import certificates
from tests.unit.test_certificates_units import NAMES, ca, refused  # noqa: F401 (a fixture)


def openssl_self_signed(folder, names):
    """A certificate and key as ``openssl req -x509`` makes them (CA:TRUE by default)."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", folder / "key.pem",
                    "-out", folder / "cert.pem", "-days", "2", "-subj", f"/CN={names[0]}",
                    "-addext", "subjectAltName=" + ",".join(f"DNS:{n}" for n in names)],
                   check=True, capture_output=True)
    return (folder / "cert.pem").read_text(), (folder / "key.pem").read_text()


def test_a_self_signed_certificate_from_openssl_req_is_taken(tmp_path):
    cert_pem, key_pem = openssl_self_signed(tmp_path, NAMES)
    constraints = x509.load_pem_x509_certificate(cert_pem.encode()).extensions \
        .get_extension_for_class(x509.BasicConstraints).value
    assert constraints.ca  # what openssl makes, the case this test is about
    bundle = certificates.check(cert_pem, key_pem, NAMES, dt.datetime.now(dt.timezone.utc))
    assert bundle.facts.names == sorted(NAMES) and bundle.facts.issuer == bundle.facts.subject
    # still refused: names it does not cover, or sent with anything after it
    assert "does not cover other.example.com" in refused(
        cert_pem, key_pem, names=["other.example.com"], status=422).message
    error = refused(cert_pem + cert_pem, key_pem, status=422, field="certificate.certificate")
    assert "starts with a CA certificate" in error.message


def test_sha1_and_nameless_certificates_are_refused(ca, tmp_path):
    # cryptography no longer signs with SHA-1; openssl still does
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", tmp_path / "key.pem",
                    "-out", tmp_path / "cert.pem", "-sha1", "-days", "2", "-subj",
                    "/CN=cdn.example.com", "-addext", "subjectAltName=DNS:cdn.example.com",
                    "-addext", "basicConstraints=critical,CA:FALSE"],
                   check=True, capture_output=True)
    error = refused((tmp_path / "cert.pem").read_text(), (tmp_path / "key.pem").read_text(),
                    names=["cdn.example.com"], status=422)
    assert "sha1" in error.message
    nameless = ca.issue([])
    assert "subjectAltName" in refused(nameless.chain_pem, nameless.key_pem, names=[],
                                       status=422).message
