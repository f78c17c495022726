"""A deployment's entry point in the operator's zone: what RO publishes once a deploy or
an update brought its DNS VNFs up, and withdraws when it goes.

The delegated name is the vCDN's hostname (``<vcdn>.<tenant>.<zone>``); each DNS VNF
is one name server, named after the VNF (stable through region changes), with every
address it has as glue. A hostname outside the operator's zone (the zone setting
changed since the vCDN was created) is not published, and said so in the log.
"""
import dataclasses
import logging

from cdnaas.ro import zones
from cdnaas.ro.zones.base import NameServer, operator_zone

LOG = logging.getLogger(__name__)


def label_of(hostname, zone=None):
    """``hostname`` relative to the operator's ``zone`` (default: the setting's), or None
    when it is not below it."""
    zone = zone or operator_zone()
    name = hostname.lower().removesuffix(".")
    return name[:-len(zone) - 1] if name.endswith(f".{zone}") else None


def name_servers(deployment):
    """:class:`NameServer` of each DNS VNF of ``deployment`` (a
    :class:`~cdnaas.ro.vim.base.Deployment`), with all its addresses."""
    return [NameServer(v.name, tuple(v.addresses or [v.address]))
            for v in deployment.vnfs if v.role == "dns"]


def publish(deployment, publisher=None):
    """Delegate ``deployment``'s hostname to its DNS VNFs; return the deployment with
    its entry point's ``name_servers`` as published (unchanged when its hostname is
    outside the zone).

    :raises ZoneError: the publisher failed (see
        :meth:`~cdnaas.ro.zones.base.ZonePublisher.publish`).
    """
    label = label_of(deployment.entry_point.hostname)
    if label is None:
        LOG.warning("%s is outside the operator's zone %s: not published",
                    deployment.entry_point.hostname, operator_zone())
        return deployment
    publisher = publisher or zones.load()
    publisher.ensure_zone()
    delegation = publisher.publish(label, name_servers(deployment))
    LOG.info("published %s: %s", delegation.name, ", ".join(
        f"{g.name} {' '.join(g.addresses)}" for g in delegation.glue))
    entry = dataclasses.replace(deployment.entry_point,
                                name_servers=delegation.to_dict()["name_servers"])
    return dataclasses.replace(deployment, entry_point=entry)


def withdraw(hostname, publisher=None):
    """Remove the delegation of ``hostname`` (nothing when it is outside the zone or
    not published).

    :raises ZoneError: the publisher failed.
    """
    label = label_of(hostname)
    if label is not None:
        (publisher or zones.load()).withdraw(label)
        LOG.info("withdrew %s", hostname)
