"""ACME HTTP-01 challenge answers (RFC 8555 8.3), as the caches serve them.

A key authorization is the challenge's token, a dot and the base64url SHA-256
thumbprint (RFC 7638) of the ACME account key: 43 characters, public, and the same
for every order of SO's account. So the caches of a vCDN whose certificate is managed
answer ``GET /.well-known/acme-challenge/<token>`` statelessly, from their config: the
token, a dot and the thumbprint recorded in the SIG (``service.acme_thumbprint``, set
by SO), for any base64url token, before their access control, on every driver
(``nginx-acme-challenge.conf.j2``). Nothing is pushed per order.

SO's order (:mod:`cdnaas.so.acme`) still shows RO the answers of its pending challenges
(``[{"token": ..., "key_authorization": ...}]``), and RO checks that the vCDN's caches
give exactly those (:func:`check_answered`) before SO tells the CA to validate. A token
is base64url (RFC 8555: at least 128 bits of entropy, so 22 characters or more).
Anything else is refused (400, naming the item) where RO takes it (:func:`parse`), and
a thumbprint where it is rendered (:func:`check_thumbprint`).
"""
import re

from cdnaas.common import errors

#: the path prefix the caches answer challenges under
PATH_PREFIX = "/.well-known/acme-challenge/"
#: where the SIG's ``service`` carries the thumbprint of SO's ACME account key
FIELD = "acme_thumbprint"
#: a token: base64url without padding
TOKEN = re.compile(r"[A-Za-z0-9_-]{22,128}")
#: the base64url SHA-256 thumbprint of an account key's JWK (RFC 7638), without padding
THUMBPRINT = re.compile(r"[A-Za-z0-9_-]{43}")
#: a key authorization: ``<token>.<thumbprint>``
KEY_AUTHORIZATION = re.compile(r"(?P<token>[A-Za-z0-9_-]{22,128})\.(?P<thumbprint>"
                               r"[A-Za-z0-9_-]{43})")
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


def check_thumbprint(value, field=FIELD) -> str:
    """``value`` if it is an account key's thumbprint: 43 base64url characters (what a
    cache renders into its config, inside a quoted nginx string).

    :raises BadRequest: naming ``field``, its value never quoted.
    """
    if not isinstance(value, str) or not THUMBPRINT.fullmatch(value):
        raise errors.BadRequest(f"{field} is not an ACME account key thumbprint: 43 base64url "
                                "characters (A-Z a-z 0-9 _ -)", field=field)
    return value


def thumbprint_of(service, field=f"service.{FIELD}"):
    """The thumbprint a SIG's ``service`` has its caches answer with (checked), or None:
    its certificate is not managed."""
    value = (service or {}).get(FIELD)
    return None if value is None else check_thumbprint(value, field)


def check_answered(service, answers, field="challenges"):
    """Check that the caches of a SIG with this ``service`` give exactly ``answers``
    (checked by :func:`parse`): every key authorization ends in the SIG's thumbprint.

    :raises Conflict: the SIG has no thumbprint (its caches answer no challenge), or its
        thumbprint is another account's (SO's ACME account key changed since the vCDN
        was deployed: an update of the vCDN renders the new one).
    """
    wanted = thumbprint_of(service)
    for index, answer in enumerate(parse(answers, field).values()):
        if wanted is None:
            raise errors.Conflict(f"the vCDN's caches answer no ACME challenge: its SIG has no "
                                  f"service.{FIELD} (its certificate is not managed)",
                                  field=field)
        if KEY_AUTHORIZATION.fullmatch(answer)["thumbprint"] != wanted:
            raise errors.Conflict(
                f"{field}[{index}].key_authorization is of another ACME account than the one "
                f"the vCDN's caches answer for (thumbprint {wanted}): SO's account key changed "
                "since the vCDN was deployed; an update of the vCDN renders the new one",
                field=f"{field}[{index}].key_authorization")
