"""Tenants, API tokens and who a request comes from.

Tokens are random secrets shown once; only their SHA-256 is stored. A token
looks like ``cdn_<id>_<secret>`` so a leaked one is easy to recognise and revoke.
"""
import dataclasses
import hashlib
import hmac
import secrets

from flask import current_app, g, request
from sqlalchemy import select

from cdnaas.api.models import Tenant, Token
from cdnaas.common import errors

OPERATOR = "operator"
TENANT = "tenant"


@dataclasses.dataclass(frozen=True)
class Caller:
    """The authenticated tenant behind a request."""

    tenant: str
    role: str

    @property
    def is_operator(self):
        return self.role == OPERATOR


def _hash(secret):
    return hashlib.sha256(secret.encode()).hexdigest()


def issue_token(session, tenant_name, description=""):
    """Store a new token for ``tenant_name``; return ``(Token, secret)``; the secret is not kept."""
    token_id = secrets.token_hex(8)
    secret = f"cdn_{token_id}_{secrets.token_urlsafe(32)}"
    token = Token(id=token_id, tenant_name=tenant_name, secret_hash=_hash(secret),
                  description=description)
    session.add(token)
    session.flush()
    return token, secret


def bootstrap_token(database, tenant_name, role=OPERATOR, description="bootstrap"):
    """Create ``tenant_name`` with ``role`` if missing and return a new token's secret.

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
        _token, secret = issue_token(session, tenant_name, description)
    return secret


def authenticate():
    """``before_request`` hook: resolve the bearer token into ``g.caller``.

    :raises Unauthorized: no token, or one that matches no stored hash.
    """
    if request.url_rule is None or request.endpoint in ("healthz", "metrics") \
            or request.blueprint == "portal":  # the page is public; its API calls are not
        return
    header = request.headers.get("Authorization", "")
    scheme, _, secret = header.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise errors.Unauthorized("send 'Authorization: Bearer <token>'; "
                                  "an operator issues tokens (cdnaas admin create-token)")
    digest = _hash(secret.strip())
    with current_app.extensions["db"].sessions() as session:
        token = session.scalar(select(Token).where(Token.secret_hash == digest))
        if token is None or not hmac.compare_digest(token.secret_hash, digest):
            raise errors.Unauthorized("the token is unknown or revoked")
        g.caller = Caller(tenant=token.tenant_name, role=token.tenant.role)


def require_operator():
    """Raise 403 unless the caller is an operator."""
    if not g.caller.is_operator:
        raise errors.Forbidden("this endpoint is for operators; ask your operator")
