"""What the Instance Manager hands a flavor's policy hook, and what the hook hands back.

Every reconcile pass builds one :class:`Observation` per ACTIVE vCDN and calls
``FlavorPlugin.policy(observation)``, which returns a list of
:class:`ScaleDecision`. The IM carries each out through the Service
Orchestrator and records it, with the ``inputs`` the policy gives, as a
decision. Policies keep no state of their own: counters are counted again
each pass from ``history``, which starts after the region's last capacity
change (so a change resets them, as PowerSave's do).
"""
import dataclasses
import datetime as dt

#: decision kinds a policy may return
SCALE_KINDS = ("scale_out", "scale_in", "consolidate")


@dataclasses.dataclass(frozen=True)
class RegionSample:
    """One past pass over a region: its viewers, its smoothed MOS estimate, its cache vCPUs."""

    at: dt.datetime
    viewers: float
    mos: float | None
    vcpus: int


@dataclasses.dataclass(frozen=True)
class VnfState:
    """A VNF of the region as the last pass saw it."""

    name: str
    role: str
    host: str | None
    vcpus: int
    healthy: bool


@dataclasses.dataclass(frozen=True)
class RegionState:
    """A region of the vCDN: its target, its VNFs and its samples since its last change.

    :param quality: the customer's target (``{"min_mos": 4.0}`` or ``{"response_time": ...}``).
    :param history: samples oldest first, the current pass last; at most
        :data:`cdnaas.im.policy_hook.HISTORY_SAMPLES`.
    :param changed_at: when the IM last changed the region's capacity (None: never).
    """

    name: str
    quality: dict
    vnfs: list[VnfState]
    history: list[RegionSample]
    changed_at: dt.datetime | None = None

    @property
    def caches(self):
        return [v for v in self.vnfs if v.role == "cache"]


@dataclasses.dataclass(frozen=True)
class HostState:
    """A host of one of the vCDN's regions, with everything reserved on it by anyone."""

    name: str
    region: str
    vcpus: int
    reserved_vcpus: int
    enabled: bool
    idle_watts: float
    peak_watts: float
    utilisation: float | None = None

    @property
    def free_vcpus(self):
        return self.vcpus - self.reserved_vcpus


@dataclasses.dataclass(frozen=True)
class Observation:
    """One ACTIVE vCDN at one pass.

    :param template: the flavor's service template (bounds, technology).
    :param model: the template's performance model
        (:class:`cdnaas.planning.models.Model`), None when it names none.
    :param hosts: host name -> :class:`HostState`, for every host of the vCDN's regions.
    """

    vcdn_id: str
    now: dt.datetime
    template: dict
    model: object
    regions: list[RegionState]
    hosts: dict


@dataclasses.dataclass(frozen=True)
class ScaleDecision:
    """Bring ``region`` to ``caches`` caches; ``inputs`` are the figures that led there.

    :param kind: one of :data:`SCALE_KINDS` (``consolidate``: one cache more, placed
        on a fuller host, so that the next scale in empties a lightly used one).
    """

    kind: str
    region: str
    caches: int
    reason: str
    inputs: dict
