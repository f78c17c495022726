"""Keystone in front of the customer API (``CDNAAS_AUTH_STRATEGY=keystone``).

keystonemiddleware's ``auth_token`` validates the request's Keystone token (a password's, a
system-scoped one or an application credential's: all are tokens to it) with the service
user of the ``clouds.yaml`` entry ``CDNAAS_KEYSTONE_CLOUD`` names, and sets the headers
:func:`caller` reads: the project (the tenant is its id), the user, the roles and the
system scope. Routes anyone may call (:func:`cdnaas.api.auth.is_public`) pass without a
token, as Octavia's ``SkippingAuthProtocol`` lets its version document through.
"""
from werkzeug.exceptions import HTTPException

from cdnaas.api import auth
from cdnaas.common import errors, settings

#: the service type this API's application credentials' access rules name
SERVICE_TYPE = "cdn"


def install(app):
    """Put ``auth_token`` in front of the Flask ``app`` (its ``wsgi_app``).

    :raises cdnaas.common.errors.CdnaasError: (500) ``CDNAAS_KEYSTONE_CLOUD`` is unset.
    """
    from keystonemiddleware import auth_token  # pylint: disable=import-outside-toplevel
    from oslo_config import cfg  # pylint: disable=import-outside-toplevel

    class PublicRoutesAuthProtocol(auth_token.AuthProtocol):
        """``auth_token`` that lets the public routes through and reads the CLI's and the
        portal's ``Authorization: Bearer <token>`` as ``X-Auth-Token``."""

        def process_request(self, request):
            try:
                endpoint, _args = app.url_map.bind("").match(request.path, request.method)
            except HTTPException:  # no such route (or a redirect): a token is asked
                endpoint = None
            if auth.is_public(endpoint):
                return None
            scheme, _, token = request.headers.get("Authorization", "").partition(" ")
            if "X-Auth-Token" not in request.headers and scheme.lower() == "bearer":
                request.headers["X-Auth-Token"] = token.strip()
            return super().process_request(request)

    options = cfg.ConfigOpts()
    options([], project="cdnaas", default_config_files=[], default_config_dirs=[])
    app.wsgi_app = PublicRoutesAuthProtocol(app.wsgi_app, {
        "oslo_config_config": options, **middleware_options()})


def middleware_options():
    """``auth_token``'s options: the service user's credentials, Keystone's URL and the
    region, from the ``clouds.yaml`` entry ``CDNAAS_KEYSTONE_CLOUD``."""
    from openstack import config as os_config  # pylint: disable=import-outside-toplevel

    name = settings.get("CDNAAS_KEYSTONE_CLOUD")
    if not name:
        raise errors.CdnaasError("CDNAAS_AUTH_STRATEGY=keystone needs CDNAAS_KEYSTONE_CLOUD: "
                                 "the clouds.yaml entry of the service user that validates "
                                 "tokens")
    cloud = os_config.OpenStackConfig().get_one(name)
    credentials = {k: v for k, v in cloud.config["auth"].items() if v is not None}
    return {**credentials, "auth_type": cloud.config.get("auth_type") or "password",
            "www_authenticate_uri": credentials["auth_url"],
            "region_name": cloud.get_region_name("identity"),
            "interface": cloud.get_interface("identity") or "public",
            "service_type": SERVICE_TYPE, "service_token_roles_required": True,
            "delay_auth_decision": False}


def caller(request):
    """The :class:`~cdnaas.api.auth.Caller` of a request ``auth_token`` has confirmed.

    The system scope is read from the validated token itself: ``auth_token`` writes one
    ``OpenStack-System-Scope`` header for the user's and a service token's scope alike.
    A project-scoped token with the admin role in the operator's own project
    (``CDNAAS_KEYSTONE_OPERATOR_PROJECT``) counts as system-scoped.

    :raises Unauthorized: the request carries no confirmed identity.
    """
    token = request.environ.get("keystone.token_auth")
    if request.headers.get("X-Identity-Status") != "Confirmed" or token is None \
            or not token.has_user_token:
        raise errors.Unauthorized("send a Keystone token: 'X-Auth-Token: <token>'")
    roles = frozenset(r.strip().lower() for r in request.headers.get("X-Roles", "").split(",")
                      if r.strip())
    project = request.headers.get("X-Project-Id") or ""
    operator_project = settings.get("CDNAAS_KEYSTONE_OPERATOR_PROJECT")
    system = token.user.system_scoped or bool(
        project and project == operator_project and "admin" in roles)
    return auth.Caller(tenant=project, roles=roles, user=request.headers.get("X-User-Id"),
                       system=system)
