"""Usage of each vCDN per region and minute: what its bills and traffic charts read.

Each reconcile pass, per ACTIVE vCDN:

- **Traffic.** RO reads the new records of every balancer's log since the vCDN's
  cursor (``GET /ro/v1/deployments/{id}/readings`` with the pass's other readings, then
  ``.../traffic`` while more are left), per region and minute; the pass
  adds them to the rows of those minutes and stores RO's next cursor **in the same
  transaction**, so a pass that fails or an IM that dies before committing leaves
  both as they were and the next pass reads the same records again: nothing is
  counted twice or lost (while the balancers keep them: a log and its previous
  generation). Traffic is read only while a vCDN is ACTIVE: requests of the last
  pass interval before it ends (``CDNAAS_IM_INTERVAL`` plus the log's 2 s buffer) are
  not counted.
- **Viewer-hours** integrate the region's concurrent viewers over time: its balancer's
  open connections, sampled each pass (the figure the IM scales on; a video viewer
  holds one connection for the whole session, while requests x request time would
  count only the milliseconds each chunk takes to send, not the seconds it plays).
- **vCPU-hours** integrate the vCPUs of every VNF of the region (caches, balancer,
  DNS: what the quote prices), **energy** their watts (:mod:`cdnaas.im.power`).

Each level holds from the previous pass to this one (the rows of the minutes in
between get their share). Rows are kept ``CDNAAS_IM_USAGE_DAYS`` (default 400), also
after the vCDN ends: the bill after the fact.
"""
import dataclasses
import datetime as dt
import logging
import math

from sqlalchemy import delete, select

from cdnaas.common import config, errors
from cdnaas.common.answers import Traffic
from cdnaas.common.timeutil import aware, isoformat, parse
from cdnaas.db import bulk
from cdnaas.im.models import Usage, UsageCursor

LOG = logging.getLogger(__name__)

#: traffic reads per vCDN and pass at most (each up to 4 MB per balancer); the rest waits
MAX_READS = 8
STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx")
#: the counters RO reports per minute as plain numbers (its status classes come apart)
TRAFFIC = ("requests", "bytes_out", "hits", "misses")
COUNTERS = (*TRAFFIC, *(f"status_{kind}" for kind in STATUS_CLASSES))
LEVELS = ("viewer_seconds", "vcpu_seconds", "energy_wh")
MINUTE = dt.timedelta(minutes=1)


def kept():
    """How long usage rows are kept (``CDNAAS_IM_USAGE_DAYS``)."""
    return dt.timedelta(days=config.setting("CDNAAS_IM_USAGE_DAYS"))


@dataclasses.dataclass(frozen=True)
class TrafficRead:
    """RO's traffic answer read with a vCDN's readings (``GET .../readings``) from
    ``cursor`` (the stored one); ``answer`` (:class:`~cdnaas.common.answers.Traffic`) is None
    when it could not be read (``error``)."""

    cursor: str | None
    answer: Traffic | None
    error: str | None = None


def cursors(session, vcdn_ids):
    """``{vcdn_id: cursor}`` of those of ``vcdn_ids`` that have one."""
    return dict(session.execute(select(UsageCursor.vcdn_id, UsageCursor.cursor)
                                .where(UsageCursor.vcdn_id.in_(vcdn_ids))).all())


def record_many(database, ro, seen, now):
    """Add one pass's usage of the vCDNs ``seen`` (reconcile ``Seen`` objects whose points
    are filled) at ``now``, in one transaction: each one's new traffic (``observed.traffic``,
    RO's first answer of this pass, then through ``ro`` while RO has more; all through
    ``ro`` without it), and its levels since its previous pass. A traffic read that fails
    is logged and retried next pass. (A vCDN is observed by one pass at a time: the cursor
    read first is still the stored one when the figures read from it are written.)"""
    unread = [o.vcdn.id for o in seen if o.traffic is None]
    stored = {}
    if unread:
        with database.sessions() as session:
            stored = cursors(session, unread)
    read = {}
    for observed in seen:
        vcdn_id = observed.vcdn.id
        first = observed.traffic or TrafficRead(stored.get(vcdn_id), None)
        read[vcdn_id] = (*_traffic(ro, vcdn_id, first), _levels(observed, now))
    with database.transaction() as session:
        _merge(session, {v: (added, levels) for v, (added, _p, _r, levels) in read.items()})
        _store_cursors(session, {v: position for v, (_a, position, read_any, _l)
                                 in read.items() if read_any}, now)


def _traffic(ro, vcdn_id, first):
    """``(added, cursor, whether any was read)``: the vCDN's new traffic from ``first``."""
    position, answer = first.cursor, first.answer
    added, read_any = {}, False
    try:
        if first.error:  # RO could not read it with the readings: as a failed read
            raise errors.UpstreamError(first.error)
        for _read in range(MAX_READS):
            if answer is None:
                answer = ro.traffic(vcdn_id, position)
            read_any, position = True, answer.cursor
            for region in answer.regions:
                if region.lost:
                    LOG.warning("vCDN %s: records of balancer %s were rotated away before "
                                "they were read", vcdn_id, region.vnf)
                for minute in region.minutes:
                    _add(added, region.region, minute)
            if not answer.more:
                break
            answer = None
    except errors.CdnaasError as exc:
        LOG.warning("vCDN %s: traffic not read this pass: %s", vcdn_id, exc)
    return added, position, read_any


def _store_cursors(session, positions, now):
    """Store ``{vcdn_id: cursor}`` (one upsert)."""
    bulk.upsert(session, UsageCursor.__table__, [
        {"vcdn_id": v, "cursor": c, "updated_at": now} for v, c in positions.items()],
        ["vcdn_id"], lambda excluded: {"cursor": excluded.cursor,
                                       "updated_at": excluded.updated_at})


def purge(session, now):
    """Remove usage rows past :func:`kept`."""
    session.execute(delete(Usage).where(Usage.minute < now - kept()))


def _add(added, region, minute):
    """Sum RO's figures of one minute (:class:`~cdnaas.common.answers.TrafficMinute`) into
    ``added[(region, minute start)]``."""
    key = (region, _minute(minute.minute))
    row = added.setdefault(key, dict.fromkeys(COUNTERS, 0))
    for name in TRAFFIC:
        row[name] += getattr(minute, name)
    for kind in STATUS_CLASSES:
        row[f"status_{kind}"] += minute.status.get(kind, 0)


def _minute(text):
    return _minute_of(parse(text))


def _minute_of(moment):
    """The start of the minute of ``moment`` (UTC)."""
    return moment.astimezone(dt.timezone.utc).replace(second=0, microsecond=0)


def _levels(observed, now):
    """``{(region, minute start): {level: amount}}``: the vCDN's regions' levels at this
    pass held since its previous pass, shared out over the minutes in between."""
    before = observed.previous.get(("vcdn", ""))
    if before is None:
        return {}
    start = aware(before.at)
    if now <= start:
        return {}
    points = {p["key"]: p for p in observed.points if p["scope"] == "region"}
    shares = {}
    for region, point in points.items():
        vcpus = sum(r.vcpus for r in observed.readings if r.region == region)
        rates = {"viewer_seconds": point["viewers"] or 0.0, "vcpu_seconds": float(vcpus),
                 "energy_wh": (point["watts"] or 0.0) / 3600}
        for minute, seconds in split(start, now):
            row = shares.setdefault((region, minute), dict.fromkeys(LEVELS, 0.0))
            for name, rate in rates.items():
                row[name] += rate * seconds
    return shares


def split(start, end):
    """``[(minute start, seconds of [start, end) in it)]``, oldest first."""
    pieces, minute = [], start.replace(second=0, microsecond=0)
    while minute < end:
        following = minute + MINUTE
        pieces.append((minute, (min(end, following) - max(start, minute)).total_seconds()))
        minute = following
    return pieces


def _merge(session, found):
    """Add each vCDN's ``(added counters, levels)`` of ``found`` to its rows (created as
    needed): upserts adding the amounts in SQL."""
    rows = []
    for vcdn_id, (added, levels) in sorted(found.items()):
        for key in sorted(set(added) | set(levels)):
            rows.append({"vcdn_id": vcdn_id, "region": key[0], "minute": key[1],
                         **dict.fromkeys(COUNTERS, 0), **dict.fromkeys(LEVELS, 0.0),
                         **added.get(key, {}), **levels.get(key, {})})
    table = Usage.__table__
    bulk.upsert(session, table, rows, ["vcdn_id", "region", "minute"], lambda excluded: {
        name: table.c[name] + excluded[name] for name in COUNTERS + LEVELS})


# -- reading ------------------------------------------------------------------------------

def report(session, vcdn_id, since, until):
    """The vCDN's usage in the minutes that overlap ``[since, until)`` (``since`` counts from
    the start of its minute): ``{"regions": [figures of each region], "total": figures}``
    (see :func:`figures`)."""
    since = _minute_of(since)
    totals, regions = _empty(), {}
    for row in session.scalars(select(Usage).where(
            Usage.vcdn_id == vcdn_id, Usage.minute >= since, Usage.minute < until)):
        for sums in (totals, regions.setdefault(row.region, _empty())):
            for name in COUNTERS + LEVELS:
                sums[name] += getattr(row, name)
    return {"regions": [{"name": name, **figures(sums)} for name, sums in sorted(regions.items())],
            "total": figures(totals)}


def _empty():
    return {**dict.fromkeys(COUNTERS, 0), **dict.fromkeys(LEVELS, 0.0)}


def figures(sums):
    """What a usage report shows of summed rows: requests, bytes_out, gb (10^9 bytes),
    hits, misses, hit_ratio (hits over hits and misses; None without either), status
    classes, viewer_hours, vcpu_hours and kwh."""
    looked_up = sums["hits"] + sums["misses"]
    return {"requests": sums["requests"], "bytes_out": sums["bytes_out"],
            "gb": round(sums["bytes_out"] / 1e9, 9), "hits": sums["hits"],
            "misses": sums["misses"],
            "hit_ratio": round(sums["hits"] / looked_up, 6) if looked_up else None,
            "status": {kind: sums[f"status_{kind}"] for kind in STATUS_CLASSES},
            "viewer_hours": round(sums["viewer_seconds"] / 3600, 6),
            "vcpu_hours": round(sums["vcpu_seconds"] / 3600, 6),
            "kwh": round(sums["energy_wh"] / 1000, 6)}


#: points a traffic series holds at most
MAX_POINTS = 1440


def series_step(asked, since, until):
    """Seconds per point of a traffic series over ``[since, until)``: ``asked`` (a
    multiple of 60), or the least multiple of 60 that keeps the series within
    :data:`MAX_POINTS` points (and 720 by default).

    :raises BadRequest: (field ``step``) not a multiple of 60, or too many points.
    """
    seconds = (until - since).total_seconds()
    if asked is None:
        return max(60, math.ceil(seconds / 720 / 60) * 60)
    if asked < 60 or asked % 60:
        raise errors.BadRequest(f"step {asked} is not a multiple of 60 seconds (the usage "
                                "rows are per minute)", field="step")
    if seconds / asked > MAX_POINTS:
        raise errors.BadRequest(f"step {asked} makes {math.ceil(seconds / asked)} points; at "
                                f"most {MAX_POINTS}: ask for a step of at least "
                                f"{math.ceil(seconds / MAX_POINTS / 60) * 60} s or a shorter "
                                "window", field="step")
    return asked


def series(session, vcdn_id, since, until, step):
    """Per region, a point per ``step`` seconds (a multiple of 60) from the start of
    ``since``'s minute to ``until``: ``{"at", "requests_per_second", "bytes_per_second", "hit_ratio"}`` (steps
    without rows: zeros, hit ratio None)."""
    since = _minute_of(since)
    count = math.ceil((until - since).total_seconds() / step)
    buckets = {}
    for row in session.scalars(select(Usage).where(
            Usage.vcdn_id == vcdn_id, Usage.minute >= since, Usage.minute < until)):
        index = int((aware(row.minute) - since).total_seconds() // step)
        if index < count:
            sums = buckets.setdefault(row.region, {}).setdefault(index, [0, 0, 0, 0])
            for position, name in enumerate(TRAFFIC):
                sums[position] += getattr(row, name)
    return [{"region": region, "points": [_point(since, step, index, by_index.get(index))
                                          for index in range(count)]}
            for region, by_index in sorted(buckets.items())]


def _point(since, step, index, sums):
    requests, sent, hits, misses = sums or (0, 0, 0, 0)
    return {"at": isoformat(since + dt.timedelta(seconds=index * step)),
            "requests_per_second": round(requests / step, 6),
            "bytes_per_second": round(sent / step, 6),
            "hit_ratio": round(hits / (hits + misses), 6) if hits + misses else None}


def read_at(session, vcdn_id):
    """When the vCDN's traffic was last read (ISO 8601; None: never)."""
    row = session.get(UsageCursor, vcdn_id)
    return None if row is None else isoformat(aware(row.updated_at))

