"""Local API tokens: issued to a tenant's named user, with a scope and an expiry, and
resolved into the :class:`~cdnaas.api.auth.Caller` a request runs as.

A token is a random secret shown once; only its SHA-256 is stored. It looks like
``cdn_<id>_<secret>`` so a leaked one is easy to recognise and revoke.

Scopes and the roles they give (the roles oslo.policy checks)::

    read-only   reader                   reads
    purge-only  cdn_purger               purges a vCDN (and reads that vCDN and the operation)
    full        reader, member           everything a tenant may do
                (+ admin for an operator tenant's token)

Every token of an operator tenant runs with ``system=True`` (system scope); only its
``full`` tokens carry ``admin``. A token's lifetime is at most ``CDNAAS_TOKEN_MAX_DAYS``
(0: no maximum), which is also the lifetime of a token asked for without one.
"""
import dataclasses
import datetime as dt
import hashlib
import hmac
import secrets

from flask import current_app
from sqlalchemy import bindparam, select

from cdnaas.api import auth
from cdnaas.api.models import DEFAULT_USER, OPERATOR, Tenant, Token, User
from cdnaas.common import clock, errors, settings
from cdnaas.common.timeutil import LATEST, aware, isoformat, parse

READ_ONLY, PURGE_ONLY, FULL = "read-only", "purge-only", "full"
SCOPES = (READ_ONLY, PURGE_ONLY, FULL)
#: the roles each scope gives a tenant's token (an operator's full token adds "admin")
SCOPE_ROLES = {READ_ONLY: frozenset({"reader"}), PURGE_ONLY: frozenset({"cdn_purger"}),
               FULL: frozenset({"reader", "member"})}



def _hash(secret):
    return hashlib.sha256(secret.encode()).hexdigest()


def max_lifetime():
    """The longest lifetime a token may have (``CDNAAS_TOKEN_MAX_DAYS``), None: no limit."""
    days = settings.get("CDNAAS_TOKEN_MAX_DAYS")
    return dt.timedelta(days=days) if days > 0 else None


def expiry(body, now):
    """When a token asked for with ``body`` (``expires_in`` seconds or ``expires_at``, or
    neither) expires, seen at ``now``: None for never (only without a maximum lifetime).

    :raises BadRequest: naming ``expires_in`` or ``expires_at``: both given, an expiry not
        in the future, or a lifetime above the maximum.
    """
    longest = max_lifetime()
    if "expires_in" in body and "expires_at" in body:
        raise errors.BadRequest("give expires_in (seconds) or expires_at (a time), not both",
                                field="expires_at")
    if "expires_in" in body:
        field, seconds = "expires_in", body["expires_in"]
        if not isinstance(seconds, int) or seconds < 1 \
                or seconds >= (LATEST - now).total_seconds():
            raise errors.BadRequest(f"expires_in must be a number of seconds from 1 on, not "
                                    f"{seconds!r}", field=field)
        expires = now + dt.timedelta(seconds=seconds)
    elif "expires_at" in body:
        field = "expires_at"
        try:
            expires = parse(body["expires_at"])
        except (TypeError, ValueError):
            raise errors.BadRequest(f"expires_at must be an ISO 8601 time such as "
                                    f"2030-01-31T18:00:00Z, not {body['expires_at']!r}",
                                    field=field) from None
        if expires <= now:
            raise errors.BadRequest(f"expires_at {isoformat(expires)} is not in the future "
                                    f"(now is {isoformat(now)})", field=field)
    else:
        return now + longest if longest else None
    if longest and expires - now > longest:
        raise errors.BadRequest(
            f"{field}: a token lives at most {longest / dt.timedelta(days=1):g} days "
            f"(CDNAAS_TOKEN_MAX_DAYS), so it must expire by {isoformat(now + longest)}", field=field)
    return expires


def issue(session, user, scope=FULL, expires_at=None, description=""):
    """Store a new token of ``user`` (a :class:`User`); return ``(Token, secret)``; the
    secret is not kept."""
    token_id = secrets.token_hex(8)
    secret = f"cdn_{token_id}_{secrets.token_urlsafe(32)}"
    token = Token(id=token_id, tenant_name=user.tenant_name, user_name=user.name, scope=scope,
                  secret_hash=_hash(secret), description=description, expires_at=expires_at)
    session.add(token)
    session.flush()
    return token, secret


def bootstrap_token(database, tenant_name, role=OPERATOR, description="bootstrap"):
    """Create ``tenant_name`` with ``role`` (and its default user) if missing and return
    the secret of a new full token of its default user, with the maximum lifetime.

    Used by ``cdnaas admin create-token`` to make the first operator token,
    before any token exists to call the API with.
    """
    with database.transaction() as session:
        tenant = session.get(Tenant, tenant_name)
        if tenant is None:
            session.add(Tenant(name=tenant_name, role=role))
            session.flush()
        elif tenant.role != role:
            raise errors.Conflict(f"tenant {tenant_name} exists with role {tenant.role}, not {role}",
                                  field="role")
        user = session.get(User, (tenant_name, DEFAULT_USER))
        if user is None:
            user = User(tenant_name=tenant_name, name=DEFAULT_USER)
            session.add(user)
            session.flush()
        _token, secret = issue(session, user, expires_at=expiry({}, clock.now()),
                               description=description)
    return secret


#: a token by the hash of its secret, with its tenant's role (built once: SQLAlchemy then
#: also keeps its cache key, and reuses its compiled form)
_BY_HASH = (select(Token.id, Token.secret_hash, Token.expires_at, Token.scope, Token.tenant_name,
                   Token.user_name, Tenant.role).join(Tenant, Tenant.name == Token.tenant_name)
            .where(Token.secret_hash == bindparam("digest")))


@dataclasses.dataclass(frozen=True)
class Validated:
    """A token found valid: who it makes the caller, and until when (None: never)."""

    caller: "auth.Caller"
    token_id: str
    expires_at: dt.datetime | None


def caller_for_secret(session, secret):
    """The :class:`~cdnaas.api.auth.Caller` a request bearing ``secret`` runs as, read in
    one query through ``session`` (an ORM session or a Core connection).

    :raises Unauthorized: as :func:`validate` and :func:`unexpired`.
    """
    return unexpired(validate(session, secret))


def validate(session, secret):
    """The :class:`Validated` token ``secret``, read in one query through ``session``,
    whether it expired or not (:func:`unexpired` says).

    :raises Unauthorized: no such token (unknown, revoked, or its user deleted).
    """
    digest = _hash(secret)
    token = session.execute(_BY_HASH, {"digest": digest}).first()
    if token is None or not hmac.compare_digest(token.secret_hash, digest):
        raise errors.Unauthorized("the token is unknown or revoked")
    system = token.role == OPERATOR
    roles = SCOPE_ROLES[token.scope] | ({"admin"} if system and token.scope == FULL else set())
    return Validated(auth.Caller(tenant=token.tenant_name, roles=frozenset(roles),
                                 user=token.user_name, system=system),
                     token.id, aware(token.expires_at))


def unexpired(validated):
    """The caller of the :class:`Validated` token unless it has expired by the clock's now.

    :raises Unauthorized: expired (saying when).
    """
    if validated.expires_at is not None and validated.expires_at <= clock.now():
        raise errors.Unauthorized(f"the token {validated.token_id} expired at "
                                  f"{isoformat(validated.expires_at)}; ask for a new one")
    return validated.caller


def local_caller(request):
    """The :class:`~cdnaas.api.auth.Caller` of a request with a local token (the ``local``
    strategy), validated moments ago or read now (``app.extensions["validated_tokens"]``:
    :class:`cdnaas.api.token_cache.ValidatedTokens`)."""
    return current_app.extensions["validated_tokens"].caller(_presented_token(request),
                                                             _read_token)


def _read_token(secret):
    with current_app.extensions["db"].engine.connect() as connection:  # no ORM: one row read
        return validate(connection, secret)


def forget_validated_tokens():
    """Forget the local tokens this process validated (one was revoked here)."""
    current_app.extensions["validated_tokens"].forget()


def _presented_token(request):
    """The local token of the request: ``Authorization: Bearer <t>`` or ``X-Auth-Token: <t>``
    (what the ``openstack`` CLI sends with ``--os-auth-type admin_token``).

    :raises Unauthorized: neither header holds a token.
    """
    scheme, _, secret = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and secret.strip():
        return secret.strip()
    if request.headers.get("X-Auth-Token", "").strip():
        return request.headers["X-Auth-Token"].strip()
    raise errors.Unauthorized("send 'Authorization: Bearer <token>' (or 'X-Auth-Token: "
                              "<token>'); an operator issues tokens (cdnaas admin create-token)")
