"""``openstack``: a host is a Nova compute host, and where Ironic manages it, a bare-metal node.

- **off**: the host's ``nova-compute`` service is disabled with the reason
  (``conn.compute.disable_service(service, disabled_reason=...)``), so Nova's
  scheduler places nothing more on it; then, where the cloud has a bare-metal
  service and a node of the host's name, the node is powered off
  (``conn.baremetal.set_node_power_state(node, "power off")``).
- **on**: the reverse order: the node is powered on first (waiting up to
  ``CDNAAS_POWER_TIMEOUT`` for it), then the service is enabled
  (``conn.compute.enable_service``).
- **state**: the node's ``power_state`` where there is one, otherwise the service's
  status (``disabled`` reads ``off``).

Disabling compute services is an admin call: ``CDNAAS_POWER_OS_CLOUD`` names the
``clouds.yaml`` entry it uses (default: the VIM driver's cloud). openstacksdk
objects never leave this module.
"""
import logging

from cdnaas.common import config
from cdnaas.ro.power.base import OFF, ON, UNKNOWN, HostPowerDriver, HostUnknown, PowerFailed, \
    PowerResult
from cdnaas.ro.vim.openstack import cloud as clouds

LOG = logging.getLogger(__name__)
#: Nova keeps at most this many characters of a disabled reason
REASON_CHARS = 255


class OpenStackPowerDriver(HostPowerDriver):
    """Nova compute services and Ironic nodes of one cloud (see the module docstring)."""

    name = "openstack"

    def __init__(self, conn=None):
        """:param conn: an openstacksdk connection (tests); by default one to
        ``CDNAAS_POWER_OS_CLOUD``, made on first use."""
        self._conn = conn

    @property
    def conn(self):
        if self._conn is None:
            import openstack
            name = config.setting("CDNAAS_POWER_OS_CLOUD") or clouds.cloud_name()
            try:
                self._conn = openstack.connect(cloud=name,
                                               connect_retries=clouds.CONNECT_RETRIES)
            except Exception as exc:
                raise _failed(exc, f"cannot reach cloud {name}") from exc
        return self._conn

    def power_off(self, host, reason=""):
        service, node = self._find(host)
        steps = []
        try:
            if service is not None and service.status != "disabled":
                self.conn.compute.disable_service(
                    service, disabled_reason=(reason or "cdnaas: powered down")[:REASON_CHARS])
                steps.append(f"nova-compute of {host} disabled")
            if node is not None:
                self.conn.baremetal.set_node_power_state(node, "power off")
                steps.append(f"bare-metal node {node.id} powered off")
        except Exception as exc:
            raise _failed(exc, f"switching {host} off") from exc
        return PowerResult(host=host, state=OFF, applied=True,
                           steps=steps or [f"{host} was already off"])

    def power_on(self, host, reason=""):
        service, node = self._find(host)
        steps = []
        try:
            if node is not None:
                self.conn.baremetal.set_node_power_state(
                    node, "power on", wait=True, timeout=config.setting("CDNAAS_POWER_TIMEOUT"))
                steps.append(f"bare-metal node {node.id} powered on")
            if service is not None and service.status == "disabled":
                self.conn.compute.enable_service(service)
                steps.append(f"nova-compute of {host} enabled")
        except Exception as exc:
            raise _failed(exc, f"switching {host} on") from exc
        return PowerResult(host=host, state=ON, applied=True,
                           steps=steps or [f"{host} was already on"])

    def state(self, host):
        service, node = self._find(host)
        if node is not None:
            return {"power on": ON, "power off": OFF}.get(node.power_state, UNKNOWN)
        return OFF if service.status == "disabled" else ON

    def _find(self, host):
        """``(nova-compute service or None, Ironic node or None)`` of ``host``.

        :raises HostUnknown: neither exists.
        """
        try:
            services = list(self.conn.compute.services(binary="nova-compute", host=host))
            node = None
            if self.conn.has_service("baremetal"):
                node = clouds.found(self.conn.baremetal.find_node, host)
        except Exception as exc:
            raise _failed(exc, f"looking up host {host}") from exc
        service = next((s for s in services if s.host == host), None)
        if service is None and node is None:
            raise HostUnknown(f"the cloud has no nova-compute service nor bare-metal node "
                              f"named {host}")
        return service, node


def _failed(exc, doing):
    return PowerFailed(str(clouds.translate_error(exc, doing)))
