"""Local tokens an API process validated moments ago, so that a client's next requests
do not read its token again (a database round trip per request).

A validation is kept ``CDNAAS_TOKEN_CACHE_SECONDS`` (default 2 s; 0: none kept). What
that means for revocation: the API process that revokes a token (or deletes its user)
forgets every validation it kept, so it refuses the token at once; another API replica
(or a token deleted in the database by other means) may still accept it for up to that
many seconds. A token's expiry is checked at every request, kept or not, and an unknown
token is never kept.
"""
import hashlib
import time

from cdnaas.api import tokens


class ValidatedTokens:
    """Validations of local tokens, each kept ``seconds``, at most ``size`` of them."""

    def __init__(self, seconds, size=4096):
        self.seconds = seconds
        self.size = size
        self.kept = {}  # SHA-256 of the secret -> (monotonic time kept until, Validated)

    def caller(self, secret, validate):
        """The :class:`~cdnaas.api.auth.Caller` of ``secret``: from a validation kept,
        or from ``validate(secret)`` (a :class:`~cdnaas.api.tokens.Validated`), kept.

        :raises Unauthorized: as ``validate``, or the token has expired.
        """
        key = hashlib.sha256(secret.encode()).digest()
        now = time.monotonic()
        found = self.kept.get(key)
        if found is None or found[0] <= now:
            found = (now + self.seconds, validate(secret))
            if self.seconds > 0:
                self._keep(key, found, now)
        return tokens.unexpired(found[1])

    def forget(self):
        """Forget every validation (a token was revoked or a user deleted here)."""
        self.kept.clear()

    def _keep(self, key, found, now):
        if len(self.kept) >= self.size:  # drop the stale ones; all if none is
            for old, (until, _validated) in list(self.kept.items()):
                if until <= now:
                    self.kept.pop(old, None)
            if len(self.kept) >= self.size:
                self.kept.clear()
        self.kept[key] = found
