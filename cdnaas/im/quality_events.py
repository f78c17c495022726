"""``quality.below_target`` events: a region's estimated QoE fell below its target.

After a pass has estimated each region's MOS (:func:`cdnaas.im.reconcile.reconcile_once`,
the region points of :mod:`cdnaas.im.series`), a region whose estimate is below its
``min_mos`` target, where the previous pass saw it at or above (or saw none), is
reported to SO, which puts the event in the tenant's webhook outbox. One event per fall
below the target, not one per pass while it stays there. A failed report is logged and
never stops the pass.
"""
import logging

from cdnaas.common import errors
from cdnaas.common.timeutil import isoformat

LOG = logging.getLogger(__name__)

QUALITY_BELOW_TARGET = "quality.below_target"


def fallen(vcdn, history):
    """``[(region name, data)]`` of the vCDN's regions whose latest level (last of
    ``history[region]``, :class:`cdnaas.im.series.Level`) fell below their MOS target."""
    found = []
    for region in vcdn.regions:
        target = (region.quality or {}).get("min_mos")
        levels = history.get(region.name, [])
        if target is None or not levels or levels[-1].mos is None or levels[-1].mos >= target:
            continue
        before = levels[-2].mos if len(levels) > 1 else None
        if before is not None and before < target:
            continue  # it was below already: reported when it fell
        latest = levels[-1]
        found.append((region.name, {
            "region": region.name, "mos": round(latest.mos, 3), "target_mos": target,
            "previous_mos": None if before is None else round(before, 3),
            "viewers": latest.viewers, "vcpus": latest.vcpus, "at": isoformat(latest.at)}))
    return found


def report(so, seen):
    """Report every fall below target among ``seen`` (the pass's
    :class:`cdnaas.im.reconcile.Seen`, histories closed) to SO; return how many."""
    reported = 0
    for observed in seen:
        for region, data in fallen(observed.vcdn, observed.history):
            try:
                so.emit_event(QUALITY_BELOW_TARGET, observed.vcdn.id, data)
                reported += 1
            except errors.CdnaasError as exc:
                LOG.warning("quality event of %s/%s not recorded: %s", observed.vcdn.id,
                            region, exc)
    return reported
