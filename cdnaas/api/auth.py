"""Tenants, API tokens and who a request comes from.

Who a request comes from is a :class:`Caller`, resolved by the API's authentication
strategy (``CDNAAS_AUTH_STRATEGY``, read when the API starts): ``local`` tokens of this
installation (the embedded default), or ``keystone``, where keystonemiddleware's
``auth_token`` has validated a Keystone token (:mod:`cdnaas.api.keystone`). What the
caller may do is :mod:`cdnaas.api.policy`'s to say.

Local tokens are random secrets shown once; only their SHA-256 is stored. A token
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
#: roles of a local token, by its tenant's role
LOCAL_ROLES = {TENANT: frozenset({"reader", "member"}),
               OPERATOR: frozenset({"reader", "member", "admin"})}
#: endpoints anyone may call (the portal's page is public; its API calls are not)
PUBLIC_ENDPOINTS = ("healthz", "metrics")
PUBLIC_BLUEPRINTS = ("portal",)


@dataclasses.dataclass(frozen=True)
class Caller:
    """Who a request comes from, as the policy rules see it."""

    tenant: str            # local tenant name, or Keystone project id
    roles: frozenset       # e.g. {"reader"}, {"cdn_purger"}, {"reader","member"}, {"reader","member","admin"}
    user: str | None = None
    system: bool = False   # system scope: an operator

    @property
    def is_operator(self):
        """Whether the caller sees every tenant's records (system scope)."""
        return self.system


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


def is_public(endpoint):
    """Whether the Flask ``endpoint`` answers without authentication."""
    return endpoint in PUBLIC_ENDPOINTS or (endpoint or "").partition(".")[0] in PUBLIC_BLUEPRINTS


def authenticate():
    """``before_request`` hook: resolve who the request comes from into ``g.caller``, with
    the strategy the API started with (``app.extensions["caller_of"]``: :func:`local_caller`
    or :func:`cdnaas.api.keystone.caller`).

    :raises Unauthorized: no credentials, or ones that are unknown, revoked or invalid.
    """
    if request.url_rule is None or is_public(request.endpoint):
        return
    g.caller = current_app.extensions["caller_of"](request)


def local_caller(request):
    """The :class:`Caller` of a request with a local token (the ``local`` strategy)."""
    return _local_caller(_presented_token(request))


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


def _local_caller(secret):
    """The :class:`Caller` of the local token ``secret``: a tenant's token has the roles
    reader and member in its tenant; an operator tenant's also admin, with system scope.

    :raises Unauthorized: the token matches no stored hash.
    """
    digest = _hash(secret)
    with current_app.extensions["db"].sessions() as session:
        token = session.scalar(select(Token).where(Token.secret_hash == digest))
        if token is None or not hmac.compare_digest(token.secret_hash, digest):
            raise errors.Unauthorized("the token is unknown or revoked")
        role = token.tenant.role
        return Caller(tenant=token.tenant_name, roles=LOCAL_ROLES[role],
                      system=role == OPERATOR)
