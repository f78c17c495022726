"""The no-op zone publisher: keeps delegations in memory (per process) and touches no
DNS server. For the noop VIM driver's stacks and the contract test; nothing resolves."""
import threading

from cdnaas.ro.zones.base import ZonePublisher, check_label


class NoopZonePublisher(ZonePublisher):
    """Delegations in a dict shared by every instance of the process."""

    name = "noop"
    _published = {}  # delegated name -> Delegation
    _lock = threading.Lock()

    def ensure_zone(self):
        """Nothing to make: the zone is this process's memory."""

    def publish(self, label, servers):
        delegation = self.delegation_of(label, servers)
        with self._lock:
            self._published[delegation.name] = delegation
        return delegation

    def withdraw(self, label):
        with self._lock:
            self._published.pop(self._name(label), None)

    def published(self, label):
        with self._lock:
            return self._published.get(self._name(label))

    def _name(self, label):
        zone = self.zone
        return f"{check_label(label, zone)}.{zone}"
