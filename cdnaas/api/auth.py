"""Who a request comes from: the bearer token resolved into a :class:`Caller`.

Local tokens (issued, scoped and expired by :mod:`cdnaas.api.tokens`) are the embedded
default's identity.
"""
import dataclasses

from flask import current_app, g, request

from cdnaas.api import tokens
from cdnaas.common import errors


@dataclasses.dataclass(frozen=True)
class Caller:
    """The authenticated caller behind a request.

    :param tenant: local tenant name, or Keystone project id.
    :param roles: the roles oslo.policy will check (``reader``, ``member``, ``admin``,
        ``cdn_purger``).
    :param user: the tenant's named user, where known.
    :param system: system scope: an operator.
    """

    tenant: str
    roles: frozenset
    user: str | None = None
    system: bool = False

    @property
    def is_operator(self):
        return self.system and "admin" in self.roles


def authenticate():
    """``before_request`` hook: resolve the bearer token into ``g.caller``.

    :raises Unauthorized: no token, or one that is unknown, revoked or expired.
    """
    if request.url_rule is None or request.endpoint in ("healthz", "metrics") \
            or request.blueprint == "portal":  # the page is public; its API calls are not
        return
    header = request.headers.get("Authorization", "")
    scheme, _, secret = header.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise errors.Unauthorized("send 'Authorization: Bearer <token>'; "
                                  "an operator issues tokens (cdnaas admin create-token)")
    with current_app.extensions["db"].sessions() as session:
        g.caller = tokens.caller_for_secret(session, secret.strip())


def require_operator():
    """Raise 403 unless the caller is an operator."""
    if not g.caller.is_operator:
        raise errors.Forbidden("this endpoint is for operators; ask your operator")
