"""ACME HTTP-01 challenge answers (RFC 8555 8.3), as the balancers serve them.

SO's ACME order (:mod:`cdnaas.so.acme`) hands RO the answers of its pending challenges:
``[{"token": ..., "key_authorization": ...}]``. The balancers of the vCDN then answer
``GET /.well-known/acme-challenge/<token>`` on HTTP with the key authorization, read from
a file named by the token that the driver writes (never rendered into a config). A token
is base64url (RFC 8555: at least 128 bits of entropy, so 22 characters or more); a key
authorization is the token, a dot and the base64url SHA-256 thumbprint of the account
key (43 characters). Anything else is refused (400, naming the item) here, where RO
takes it, and again where the driver writes it (:func:`parse`, twice).
"""
import re

from cdnaas.common import errors

#: the path prefix the balancers answer challenges under
PATH_PREFIX = "/.well-known/acme-challenge/"
#: a token: base64url without padding
TOKEN = re.compile(r"[A-Za-z0-9_-]{22,128}")
#: a key authorization: ``<token>.<base64url SHA-256 of the account key's JWK>``
KEY_AUTHORIZATION = re.compile(r"(?P<token>[A-Za-z0-9_-]{22,128})\.[A-Za-z0-9_-]{43}")
#: most challenges answered at once (one per name of an order: a vCDN has 16 at most)
MAX_CHALLENGES = 32


def parse(values, field="challenges") -> dict:
    """``{token: key authorization}`` of ``values`` (a list of ``{token,
    key_authorization}``); an empty list answers nothing.

    :raises BadRequest: not such a list, more than :data:`MAX_CHALLENGES`, a token that
        is not base64url, a key authorization that is not of that token, or a token twice
        (the item named, its value never quoted).
    """
    if not isinstance(values, list) or len(values) > MAX_CHALLENGES:
        raise errors.BadRequest(f"{field} must be a list of at most {MAX_CHALLENGES} "
                                "{token, key_authorization}", field=field)
    answers = {}
    for index, value in enumerate(values):
        item = f"{field}[{index}]"
        if not isinstance(value, dict) or set(value) != {"token", "key_authorization"}:
            raise errors.BadRequest(f"{item} must be {{token, key_authorization}}", field=item)
        token, answer = value["token"], value["key_authorization"]
        if not isinstance(token, str) or not TOKEN.fullmatch(token):
            raise errors.BadRequest(f"{item}.token is not an ACME token: 22 to 128 base64url "
                                    "characters (A-Z a-z 0-9 _ -)", field=f"{item}.token")
        matched = KEY_AUTHORIZATION.fullmatch(answer) if isinstance(answer, str) else None
        if matched is None or matched["token"] != token:
            raise errors.BadRequest(f"{item}.key_authorization is not <token>.<base64url "
                                    "SHA-256 thumbprint> of this token",
                                    field=f"{item}.key_authorization")
        if token in answers:
            raise errors.BadRequest(f"{item}.token is listed twice; list it once",
                                    field=f"{item}.token")
        answers[token] = answer
    return answers
