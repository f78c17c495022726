"""Tenants and their tokens, as operators (and tenants, for their own tokens) manage them."""
from sqlalchemy import select

from cdnaas.api import auth
from cdnaas.api.models import Tenant, Token
from cdnaas.common import errors
from cdnaas.common.timeutil import isoformat


def tenant_view(tenant):
    return {"name": tenant.name, "role": tenant.role, "created_at": isoformat(tenant.created_at)}


def token_view(token, secret=None):
    view = {"id": token.id, "tenant": token.tenant_name, "description": token.description,
            "created_at": isoformat(token.created_at)}
    if secret:
        view["token"] = secret
    return view


def create_tenant(session, body):
    if session.get(Tenant, body["name"]) is not None:
        raise errors.Conflict(f"tenant {body['name']} exists; pick another name", field="name")
    tenant = Tenant(name=body["name"], role=body.get("role", auth.TENANT))
    session.add(tenant)
    session.flush()
    return tenant_view(tenant)


def list_tenants(session):
    return [tenant_view(t) for t in session.scalars(select(Tenant).order_by(Tenant.name))]


def visible_tenant(session, caller, name):
    """The tenant ``name`` if ``caller`` may manage its tokens (itself, or an operator)."""
    tenant = session.get(Tenant, name)
    if tenant is None or not (caller.is_operator or caller.tenant == name):
        raise errors.NotFound(f"no tenant {name}", field="tenant")
    return tenant


def create_token(session, caller, tenant_name, body):
    tenant = visible_tenant(session, caller, tenant_name)
    token, secret = auth.issue_token(session, tenant.name, (body or {}).get("description", ""))
    return token_view(token, secret)


def list_tokens(session, caller, tenant_name):
    tenant = visible_tenant(session, caller, tenant_name)
    return [token_view(t) for t in sorted(tenant.tokens, key=lambda t: t.created_at)]


def revoke_token(session, caller, tenant_name, token_id):
    visible_tenant(session, caller, tenant_name)
    token = session.get(Token, token_id)
    if token is None or token.tenant_name != tenant_name:
        raise errors.NotFound(f"no token {token_id} for tenant {tenant_name}", field="token_id")
    session.delete(token)
