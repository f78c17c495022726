"""Who a request comes from: its credentials resolved into a :class:`Caller`.

The API's authentication strategy (``CDNAAS_AUTH_STRATEGY``, read when the API starts)
says how: ``local`` tokens of this installation (the embedded default; issued, scoped and
expired by :mod:`cdnaas.api.tokens`), or ``keystone``, where keystonemiddleware's
``auth_token`` has validated a Keystone token (:mod:`cdnaas.api.keystone`). What the
caller may do is :mod:`cdnaas.api.policy`'s to say.
"""
import dataclasses

from flask import current_app, g, request


#: endpoints anyone may call (the portal's page is public; its API calls are not)
PUBLIC_ENDPOINTS = ("healthz", "metrics")
PUBLIC_BLUEPRINTS = ("portal",)


@dataclasses.dataclass(frozen=True)
class Caller:
    """Who a request comes from, as the policy rules see it.

    :param tenant: local tenant name, or Keystone project id.
    :param roles: the roles oslo.policy checks (``reader``, ``member``, ``cdn_purger``,
        ``admin``).
    :param user: the user the credential belongs to, where known.
    :param system: system scope: an operator.
    """

    tenant: str
    roles: frozenset
    user: str | None = None
    system: bool = False

    @property
    def is_operator(self):
        """Whether the caller sees every tenant's records (system scope)."""
        return self.system

    # the tenant rule, the one place it is written (the operator-only rules are the
    # routes' policy rules, :class:`cdnaas.api.policy.Routes`)
    def sees(self, tenant):
        """Whether the caller may see the records of ``tenant`` (its own; an operator's:
        every tenant's). Routes answer 404 for records it may not see."""
        return self.is_operator or self.tenant == tenant

    @property
    def tenant_filter(self):
        """The tenant whose records a list shows the caller: its own (None for an operator:
        every tenant's)."""
        return None if self.is_operator else self.tenant


def is_public(endpoint):
    """Whether the Flask ``endpoint`` answers without authentication."""
    return endpoint in PUBLIC_ENDPOINTS or (endpoint or "").partition(".")[0] in PUBLIC_BLUEPRINTS


def authenticate():
    """``before_request`` hook: resolve who the request comes from into ``g.caller``, with
    the strategy the API started with (``app.extensions["caller_of"]``:
    :func:`cdnaas.api.tokens.local_caller` or :func:`cdnaas.api.keystone.caller`).

    :raises Unauthorized: no credentials, or ones that are unknown, revoked, expired or invalid.
    """
    if request.url_rule is None or is_public(request.endpoint):
        return
    g.caller = current_app.extensions["caller_of"](request)
