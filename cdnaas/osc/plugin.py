"""OpenStackClient plugin of CDNaaS (service type ``cdn``): how ``openstack`` makes its client.

OSC reads ``API_NAME``, ``API_VERSION_OPTION``, ``API_VERSIONS`` and calls
:func:`build_option_parser` once, then :func:`make_client` the first time a command uses
``self.app.client_manager.cdn``.
"""
import logging

from osc_lib import utils

from cdnaas.osc.client import SERVICE_TYPE, cdn_client

LOG = logging.getLogger(__name__)

API_NAME = "cdn"
DEFAULT_API_VERSION = "1"
API_VERSION_OPTION = "os_cdn_api_version"
API_VERSIONS = {"1": "cdnaas.common.clients.CustomerApi"}


def make_client(instance):
    """The customer API's client for OSC's ``ClientManager`` ``instance``: its endpoint
    from the Keystone catalog (service type ``cdn``, the region and interface chosen), or
    the ``--os-endpoint`` of ``admin_token`` auth, or a ``cdn_endpoint_override``; its
    requests sent through the manager's keystoneauth session (``X-Auth-Token``)."""
    endpoint = instance.get_endpoint_for_service_type(
        SERVICE_TYPE, region_name=instance.region_name, interface=instance.interface)
    LOG.debug("CDNaaS endpoint: %s", endpoint)
    return cdn_client(instance.session, endpoint)


def build_option_parser(parser):
    """Add ``--os-cdn-api-version`` to OSC's global options."""
    parser.add_argument(
        "--os-cdn-api-version", metavar="<cdn-api-version>",
        default=utils.env("OS_CDN_API_VERSION", default=DEFAULT_API_VERSION),
        help=f"CDNaaS API version, default={DEFAULT_API_VERSION} (Env: OS_CDN_API_VERSION)")
    return parser
