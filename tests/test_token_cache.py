"""The API's short-lived cache of validated local tokens (:mod:`cdnaas.api.token_cache`):
what it keeps, for how long, and that expiry and revocation here still hold."""
import datetime as dt
import time

import pytest

from cdnaas.api.auth import Caller
from cdnaas.api.token_cache import ValidatedTokens
from cdnaas.api.tokens import Validated
from cdnaas.common import clock, errors

ACME = Caller(tenant="acme", roles=frozenset({"reader"}))


class Reads:
    """A token store read through ``validate``, counting its reads."""

    def __init__(self, expires_at=None):
        self.count = 0
        self.expires_at = expires_at

    def validate(self, secret):
        self.count += 1
        if secret != "good":
            raise errors.Unauthorized("the token is unknown or revoked")
        return Validated(ACME, "t1", self.expires_at)


def test_a_validation_is_kept_its_seconds_then_read_again():
    reads, kept = Reads(), ValidatedTokens(0.2)
    assert kept.caller("good", reads.validate) == ACME
    assert kept.caller("good", reads.validate) == ACME
    assert reads.count == 1
    time.sleep(0.25)
    assert kept.caller("good", reads.validate) == ACME
    assert reads.count == 2


def test_zero_seconds_keeps_nothing():
    reads, kept = Reads(), ValidatedTokens(0)
    kept.caller("good", reads.validate)
    kept.caller("good", reads.validate)
    assert reads.count == 2


def test_an_unknown_token_is_never_kept():
    reads, kept = Reads(), ValidatedTokens(60)
    for _ in range(2):
        with pytest.raises(errors.Unauthorized, match="unknown or revoked"):
            kept.caller("bad", reads.validate)
    assert reads.count == 2


def test_a_kept_token_that_expires_is_refused_saying_when():
    reads = Reads(expires_at=clock.now() + dt.timedelta(seconds=0.2))
    kept = ValidatedTokens(60)
    assert kept.caller("good", reads.validate) == ACME
    time.sleep(0.25)
    with pytest.raises(errors.Unauthorized, match="the token t1 expired at"):
        kept.caller("good", reads.validate)
    assert reads.count == 1


def test_forgetting_reads_every_token_again():
    reads, kept = Reads(), ValidatedTokens(60)
    kept.caller("good", reads.validate)
    kept.forget()
    kept.caller("good", reads.validate)
    assert reads.count == 2


def test_it_holds_at_most_its_size():
    kept = ValidatedTokens(60, size=3)

    def validate(secret):
        return Validated(ACME, secret, None)
    for number in range(10):
        kept.caller(f"secret-{number}", validate)
        assert len(kept.kept) <= 3
