"""Host power drivers: switching the operator's hosts off and on (RO reaches infrastructure).

The Instance Manager decides which hosts may sleep (:mod:`cdnaas.im.hosts`); the
Resource Orchestrator carries the action out through the driver named by
``CDNAAS_POWER_DRIVER`` (entry points ``cdnaas.power_drivers``: ``log`` (the
default), ``noop``, ``openstack``, ``local``), refusing to switch off a host that
carries VNFs of any deployment (:mod:`cdnaas.ro.power.service`).
"""
from cdnaas.common import config, plugins

#: entry-point group of the host power drivers
GROUP = "cdnaas.power_drivers"


def load(name=None):
    """The :class:`~cdnaas.ro.power.base.HostPowerDriver` named ``name`` (default:
    ``CDNAAS_POWER_DRIVER``).

    :raises LookupError: no such driver is installed.
    """
    return plugins.load(GROUP, name or config.setting("CDNAAS_POWER_DRIVER"))
