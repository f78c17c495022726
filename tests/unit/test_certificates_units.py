"""cdnaas.common.certificates: the tests that start no process (the unit tier); the others, and
what the module covers, are in tests/service/test_certificates.py."""
import datetime as dt
import json

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from cdnaas.common import certificates, errors
from tests.support.certs import TestCA, key_marker, pem_cert, pem_key, rsa_key

NOW = dt.datetime.now(dt.timezone.utc)
NAMES = ["cdn.example.com", "img.example.com"]


@pytest.fixture(scope="module")
def ca():
    return TestCA()


@pytest.fixture(scope="module")
def good(ca):
    return ca.issue(NAMES + ["*.static.example.com"])


def refused(issued_chain, key, names=NAMES, status=None, field=None):
    with pytest.raises(errors.CdnaasError) as caught:
        certificates.check(issued_chain, key, names, dt.datetime.now(dt.timezone.utc))
    if status:
        assert caught.value.status == status, caught.value.message
    if field:
        assert caught.value.field == field, caught.value.message
    return caught.value


def test_a_good_bundle_is_normalised_and_described(good):
    bundle = certificates.check(good.chain_pem, good.key_pem, NAMES + ["a.static.example.com"],
                                NOW)
    facts = bundle.facts
    assert facts.fingerprint_sha256 == good.fingerprint
    assert facts.names == sorted(NAMES + ["*.static.example.com"])
    assert facts.key_type == "EC P-256"
    assert facts.subject == "CN=cdn.example.com"
    assert "intermediate" in facts.issuer
    assert bundle.certificate.count("BEGIN CERTIFICATE") == 2
    assert "BEGIN PRIVATE KEY" in bundle.private_key
    assert key_marker(good.key_pem) not in repr(bundle)
    assert key_marker(good.key_pem) not in json.dumps(facts.to_dict())


def test_an_rsa_key_in_its_traditional_form_is_taken(ca):
    key = rsa_key(2048)
    issued = ca.issue(NAMES, key=key)
    traditional = key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.TraditionalOpenSSL,
                                    serialization.NoEncryption()).decode()
    bundle = certificates.check(issued.chain_pem, traditional, NAMES, NOW)
    assert bundle.facts.key_type == "RSA 2048"
    assert bundle.private_key.startswith("-----BEGIN PRIVATE KEY-----")


@pytest.mark.parametrize("names, hostname, expected", [
    (["cdn.example.com"], "CDN.example.com", True),
    (["*.example.com"], "cdn.example.com", True),
    (["*.example.com"], "a.b.example.com", False),   # one label only
    (["*.example.com"], "example.com", False),
    (["*.com"], "example.com", False),                # never over a single label
    (["c*.example.com"], "cdn.example.com", False),   # no partial-label wildcards
    (["example.com"], "cdn.example.com", False),
])
def test_coverage_follows_rfc_6125(names, hostname, expected):
    assert certificates.covers(names, hostname) is expected


def test_a_name_not_covered_is_named(good):
    error = refused(good.chain_pem, good.key_pem, names=["cdn.example.com", "shop.example.org"],
                    status=422, field="certificate.certificate")
    assert "shop.example.org" in error.message
    assert error.details[0]["field"] == "hostnames[1]"


def test_the_key_of_another_certificate_is_refused(ca, good):
    other = ca.issue(NAMES)
    refused(good.chain_pem, other.key_pem, status=422, field="certificate.private_key")


def test_a_chain_out_of_order_is_refused(ca, good):
    leaf, inter = good.chain_pem.split("-----END CERTIFICATE-----\n")[:2]
    reversed_chain = inter + "-----END CERTIFICATE-----\n" + leaf + "-----END CERTIFICATE-----\n"
    refused(reversed_chain, good.key_pem, status=422, field="certificate.certificate")
    stranger = TestCA("another root")
    foreign = good.chain_pem.split("-----END CERTIFICATE-----\n")[0] + \
        "-----END CERTIFICATE-----\n" + stranger.root_pem
    error = refused(foreign, good.key_pem, status=422)
    assert "did not issue" in error.message


def test_a_ca_certificate_first_is_refused(ca):
    chain = ca.root_pem
    key = pem_key(ca.root_key)
    refused(chain, key, status=422, field="certificate.certificate")
    # an intermediate first (with its key), alone or followed by the root: a CA in front
    intermediate = pem_cert(ca.inter)
    for sent in (intermediate, intermediate + ca.root_pem):
        error = refused(sent, pem_key(ca.inter_key), status=422, field="certificate.certificate")
        assert "starts with a CA certificate" in error.message


def test_dates_are_checked(ca):
    expired = ca.issue(NAMES, not_before=NOW - dt.timedelta(days=60),
                       not_after=NOW - dt.timedelta(days=1))
    assert "expired" in refused(expired.chain_pem, expired.key_pem, status=422).message
    future = ca.issue(NAMES, not_before=NOW + dt.timedelta(days=1))
    assert "valid only from" in refused(future.chain_pem, future.key_pem, status=422).message


def test_weak_and_unusual_keys_are_refused(ca):
    small = ca.issue(NAMES, key=rsa_key(1024))
    assert "1024 bits" in refused(small.chain_pem, small.key_pem, status=422,
                                  field="certificate.private_key").message
    p521 = ca.issue(NAMES, key=ec.generate_private_key(ec.SECP521R1()))
    assert "P-256" in refused(p521.chain_pem, p521.key_pem, status=422).message
    edwards = ca.issue(NAMES, key=ed25519.Ed25519PrivateKey.generate())
    refused(edwards.chain_pem, edwards.key_pem, status=422, field="certificate.private_key")


def test_an_encrypted_key_is_refused_without_echo(good):
    key = serialization.load_pem_private_key(good.key_pem.encode(), None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"secret")).decode()
    error = refused(good.chain_pem, encrypted, status=400, field="certificate.private_key")
    assert "encrypted" in error.message and encrypted.splitlines()[1] not in error.message
    legacy = key.private_bytes(serialization.Encoding.PEM,
                               serialization.PrivateFormat.TraditionalOpenSSL,
                               serialization.BestAvailableEncryption(b"secret")).decode()
    if "Proc-Type" in legacy:  # cryptography writes the legacy form for EC keys
        refused(good.chain_pem, legacy, status=400, field="certificate.private_key")


def _hostile(good):
    key_body = good.key_pem.splitlines()
    der = serialization.load_pem_private_key(good.key_pem.encode(), None).private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())
    return {
        "garbage": "hello; { $x } 'quotes'\n",
        "empty": "",
        "nul": good.key_pem.replace("\n", "\x00", 1),
        "der as text": der.decode("latin-1"),
        "der base64 without armour": "\n".join(key_body[1:-2]),
        "huge": good.key_pem + ("A" * 70000),
        "unicode": good.key_pem.replace("A", "\u0410", 1),
        "two keys": good.key_pem + good.key_pem,
        "a certificate": good.chain_pem,
        "text around": "subject=CN=x\n" + good.key_pem,
        "corrupt body": good.key_pem.replace(key_body[1], key_body[1][::-1]),
        "a list": key_body,
        "a number": 42,
    }


@pytest.mark.parametrize("case", sorted(_hostile(TestCA().issue(NAMES))))
def test_hostile_keys_are_refused_naming_the_field_without_echo(good, case):
    value = _hostile(good)[case]
    error = refused(good.chain_pem, value, field="certificate.private_key")
    assert error.status in (400, 422)
    said = json.dumps(error.to_dict())
    for line in good.key_pem.splitlines()[1:-1]:
        assert line not in said


def _hostile_certificates(good):
    """The certificate's counterparts of :func:`_hostile`'s keys: each damages the chain."""
    chain = good.chain_pem
    leaf = x509.load_pem_x509_certificate(chain.encode())
    return {
        "garbage": _hostile(good)["garbage"],
        "empty": "",
        "nul": chain.replace("\n", "\x00", 1),
        "der as text": leaf.public_bytes(serialization.Encoding.DER).decode("latin-1"),
        "huge": chain + ("A" * 70000),
        "unicode": chain.replace("A", "\u0410", 1),
        "a list": chain.splitlines(),
        "a number": 42,
    }


@pytest.mark.parametrize("case", sorted(_hostile_certificates(TestCA().issue(NAMES))))
def test_hostile_certificates_are_refused_naming_the_field(good, case):
    value = _hostile_certificates(good)[case]
    if isinstance(value, str) and case not in ("garbage", "empty"):
        assert value != good.chain_pem and good.key_pem not in value  # the chain, damaged
    error = refused(value, good.key_pem, field="certificate.certificate")
    assert error.status in (400, 422)


def test_a_key_sent_as_the_certificate_is_refused_without_echo(good):
    error = refused(good.key_pem, good.key_pem, status=400, field="certificate.certificate")
    assert "private key" in error.message
    assert key_marker(good.key_pem) not in json.dumps(error.to_dict())


def test_a_stored_bundle_parses_again(good):
    bundle = certificates.check(good.chain_pem, good.key_pem, NAMES, NOW)
    again = certificates.parse(bundle.certificate, bundle.private_key)
    assert again.facts == bundle.facts
