"""The host power driver interface, as Octavia's provider drivers: one ABC, drivers by
entry-point name (``cdnaas.power_drivers``), our own dataclasses at the boundary.

A driver switches one *host* (the name the operator registered in SO) off and on.
Every action is reversible (:meth:`power_on` undoes :meth:`power_off`) and
idempotent (switching off a host already off is success). Drivers never decide:
RO calls them only for a host that carries no VNF of any deployment, and the
Instance Manager only for a host with no reservation (it records each call as a
decision with its inputs).
"""
import abc
import dataclasses

from cdnaas.ro.vim.base import VimError

ON, OFF, UNKNOWN = "on", "off", "unknown"


@dataclasses.dataclass(frozen=True)
class PowerResult:
    """What a power action did.

    :param host: the host acted on.
    :param state: ``on``, ``off`` or ``unknown`` after the action.
    :param applied: True when the infrastructure was changed (or already was in that
        state); False when the driver could only record the wish (``log``, ``noop``,
        a kernel that refuses CPU hotplug...).
    :param steps: what was done, in order, in words (``nova-compute of eu-1 disabled``).
    """

    host: str
    state: str
    applied: bool
    steps: list = dataclasses.field(default_factory=list)

    def to_dict(self):
        return dataclasses.asdict(self)


class HostUnknown(VimError):
    """The driver knows no host of that name (RO answers 404)."""


class PowerFailed(VimError):
    """The infrastructure refused or failed the action (RO answers 502; retry later)."""


class HostPowerDriver(abc.ABC):
    """Switches hosts off and on. Subclasses set :attr:`name` (their entry-point name)."""

    name = "abstract"
    #: True for a driver that only records actions and never switches a host: the IM then
    #: leaves SO's placement alone (a host it "switches off" still takes VNFs)
    records_only = False

    @abc.abstractmethod
    def power_off(self, host: str, reason: str = "") -> PowerResult:
        """Take ``host`` out of service and switch it off (or record that it may be).

        :param host: the registered host name.
        :param reason: why, in words (kept where the infrastructure keeps one, e.g.
            Nova's ``disabled_reason``, at most 255 characters).
        :returns: a :class:`PowerResult` (``state`` ``off`` when applied).
        :raises HostUnknown: the driver knows no such host.
        :raises PowerFailed: the infrastructure failed; nothing is half-done that a
            :meth:`power_on` would not undo.
        """

    @abc.abstractmethod
    def power_on(self, host: str, reason: str = "") -> PowerResult:
        """Switch ``host`` on and put it back in service; undoes :meth:`power_off`.

        :returns: a :class:`PowerResult` (``state`` ``on`` when applied).
        :raises HostUnknown: the driver knows no such host.
        :raises PowerFailed: the infrastructure failed.
        """

    @abc.abstractmethod
    def state(self, host: str) -> str:
        """``on``, ``off`` or ``unknown`` (the driver cannot tell) for ``host``.

        :raises HostUnknown: the driver knows no such host.
        :raises PowerFailed: the infrastructure could not be read.
        """
