"""RO's side of a power action: refuse a host carrying VNFs, call the driver, translate errors."""
import logging

from cdnaas.common import errors
from cdnaas.ro.power import load
from cdnaas.ro.power.base import HostUnknown
from cdnaas.ro.vim.base import VimError

LOG = logging.getLogger(__name__)
ACTIONS = ("off", "on")


class HostPower:
    """Power actions through ``driver`` (default: ``CDNAAS_POWER_DRIVER``), checked against
    ``deployments`` (a :class:`~cdnaas.ro.service.DeploymentService`)."""

    def __init__(self, deployments, driver=None):
        self.deployments = deployments
        self.driver = driver or load()

    def carried(self, host):
        """``[(deployment id, VNF name)]`` recorded on ``host`` by deployments not DELETED
        (a busy one counts: its VNFs may be booting there)."""
        return [(d["id"], v["name"]) for d in self.deployments.list(live=True)
                for v in d["vnfs"] if v["host"] == host]

    def act(self, host, action, reason=""):
        """Switch ``host`` ``on`` or ``off``; return the answer of ``POST .../power``.

        :raises Conflict: ``off`` on a host carrying VNFs (409, naming them).
        :raises NotFound: the driver knows no such host (404).
        :raises UpstreamError: the infrastructure failed (502).
        """
        if action == "off":
            carried = self.carried(host)
            if carried:
                raise errors.Conflict(
                    f"host {host} carries {len(carried)} VNF(s) of deployments "
                    f"{', '.join(sorted({d for d, _v in carried}))}: it stays on",
                    field="host", details=[{"field": "host", "problem": f"{d}/{v} runs on it"}
                                           for d, v in carried[:20]])
        try:
            result = (self.driver.power_off if action == "off" else self.driver.power_on)(
                host, reason)
        except HostUnknown as exc:
            raise errors.NotFound(str(exc), field="host") from None
        except VimError as exc:
            raise errors.UpstreamError(f"power {action} of {host} failed: {exc}") from None
        LOG.info("host %s power %s (%s): %s", host, action, reason, "; ".join(result.steps))
        return {**result.to_dict(), "action": action, "driver": self.driver.name}
