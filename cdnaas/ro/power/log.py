"""Drivers that only record: ``noop`` (in memory, for tests and the simulated plant) and
``log`` (the default: records and logs each action for the operator's own power manager)."""
import logging
import threading

from cdnaas.ro.power.base import OFF, ON, UNKNOWN, HostPowerDriver, PowerResult

LOG = logging.getLogger(__name__)


class NoopPowerDriver(HostPowerDriver):
    """Records each action in :attr:`calls` (``(action, host, reason)``); switches nothing."""

    name = "noop"
    records_only = True

    def __init__(self):
        self.calls = []
        self._states = {}
        self._lock = threading.Lock()

    def _record(self, action, host, reason, state):
        with self._lock:
            self.calls.append((action, host, reason))
            self._states[host] = state
        return PowerResult(host=host, state=state, applied=False,
                           steps=[f"recorded: {host} may be switched {state} ({reason})"])

    def power_off(self, host, reason=""):
        return self._record("power_off", host, reason, OFF)

    def power_on(self, host, reason=""):
        return self._record("power_on", host, reason, ON)

    def state(self, host):
        with self._lock:
            return self._states.get(host, UNKNOWN)


class LogPowerDriver(NoopPowerDriver):
    """As ``noop``, and each action is logged (WARNING) for the operator."""

    name = "log"

    def _record(self, action, host, reason, state):
        LOG.warning("host power: %s %s (%s); no power backend configured, recorded only",
                    action, host, reason)
        return super()._record(action, host, reason, state)
