"""Zone publishers: a vCDN's entry point in the operator's DNS zone (RO reaches DNS).

The operator's zone (``CDNAAS_DNS_DOMAIN``) delegates each vCDN's name to its DNS
VNFs through the publisher named by ``CDNAAS_ZONE_PUBLISHER`` (entry points
``cdnaas.zone_publishers``: ``local`` (the default: an authoritative server the stack
starts), ``designate``, ``noop``); see :mod:`cdnaas.ro.zones.base` for the contract.
"""
from cdnaas.common import config, plugins

#: entry-point group of the zone publishers
GROUP = "cdnaas.zone_publishers"


def load(name=None):
    """The :class:`~cdnaas.ro.zones.base.ZonePublisher` named ``name`` (default:
    ``CDNAAS_ZONE_PUBLISHER``).

    :raises LookupError: no such publisher is installed.
    """
    return plugins.load(GROUP, name or config.setting("CDNAAS_ZONE_PUBLISHER"))
