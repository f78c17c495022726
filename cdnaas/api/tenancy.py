"""Tenants, their named users and the users' tokens, as operators (and tenants, for
their own users and tokens) manage them."""
from sqlalchemy import select

from cdnaas.api import tokens
from cdnaas.api.models import DEFAULT_USER, TENANT, Tenant, Token, User
from cdnaas.common import clock, errors
from cdnaas.common.timeutil import aware, isoformat


def tenant_view(tenant):
    return {"name": tenant.name, "role": tenant.role, "created_at": isoformat(tenant.created_at)}


def user_view(user):
    return {"name": user.name, "tenant": user.tenant_name, "tokens": len(user.tokens),
            "created_at": isoformat(user.created_at)}


def token_view(token, now, secret=None):
    """A token as listed (``expired``: at ``now``); ``secret`` only in the answer that issues it."""
    expires_at = aware(token.expires_at)
    view = {"id": token.id, "tenant": token.tenant_name, "user": token.user_name,
            "scope": token.scope, "description": token.description,
            "created_at": isoformat(token.created_at), "expires_at": isoformat(expires_at),
            "expired": expires_at is not None and expires_at <= now}
    if secret:
        view["token"] = secret
    return view


def create_tenant(session, body):
    """A new tenant with its user ``default``."""
    if session.get(Tenant, body["name"]) is not None:
        raise errors.Conflict(f"tenant {body['name']} exists; pick another name", field="name")
    tenant = Tenant(name=body["name"], role=body.get("role", TENANT), users=[User(name=DEFAULT_USER)])
    session.add(tenant)
    session.flush()
    return tenant_view(tenant)


def list_tenants(session):
    return [tenant_view(t) for t in session.scalars(select(Tenant).order_by(Tenant.name))]


def visible_tenant(session, caller, name):
    """The tenant ``name`` if ``caller`` may manage its users and tokens (itself, or an
    operator)."""
    tenant = session.get(Tenant, name)
    if tenant is None or not caller.sees(name):
        raise errors.NotFound(f"no tenant {name}", field="tenant")
    return tenant


def create_user(session, caller, tenant_name, body):
    tenant = visible_tenant(session, caller, tenant_name)
    if session.get(User, (tenant.name, body["name"])) is not None:
        raise errors.Conflict(f"tenant {tenant.name} has a user {body['name']}; pick another "
                              "name", field="name")
    user = User(tenant_name=tenant.name, name=body["name"])
    session.add(user)
    session.flush()
    return user_view(user)


def list_users(session, caller, tenant_name):
    tenant = visible_tenant(session, caller, tenant_name)
    return [user_view(u) for u in sorted(tenant.users, key=lambda u: u.name)]


def delete_user(session, caller, tenant_name, user_name):
    """Delete a user and so revoke every token it holds."""
    visible_tenant(session, caller, tenant_name)
    user = session.get(User, (tenant_name, user_name))
    if user is None:
        raise errors.NotFound(f"no user {user_name} in tenant {tenant_name}", field="user")
    session.delete(user)


def create_token(session, caller, tenant_name, body):
    """Issue a token to the user ``body["user"]`` (default ``default``) with the scope and
    expiry ``body`` asks for (checked by :func:`cdnaas.api.tokens.expiry`)."""
    tenant = visible_tenant(session, caller, tenant_name)
    user_name = body.get("user", DEFAULT_USER)
    user = session.get(User, (tenant.name, user_name))
    if user is None:
        raise errors.Unprocessable(f"tenant {tenant.name} has no user {user_name}; GET "
                                   f"/api/v1/tenants/{tenant.name}/users lists them", field="user")
    now = clock.now()
    token, secret = tokens.issue(session, user, scope=body.get("scope", tokens.FULL),
                                 expires_at=tokens.expiry(body, now),
                                 description=body.get("description", ""))
    return token_view(token, now, secret)


def list_tokens(session, caller, tenant_name, user_name=None):
    """The tenant's tokens (of ``user_name`` only, if given), oldest first."""
    tenant = visible_tenant(session, caller, tenant_name)
    now = clock.now()
    return [token_view(t, now) for t in sorted(tenant.tokens, key=lambda t: t.created_at)
            if user_name in (None, t.user_name)]


def revoke_token(session, caller, tenant_name, token_id):
    visible_tenant(session, caller, tenant_name)
    token = session.get(Token, token_id)
    if token is None or token.tenant_name != tenant_name:
        raise errors.NotFound(f"no token {token_id} for tenant {tenant_name}", field="token_id")
    session.delete(token)
