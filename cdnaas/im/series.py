"""Time series of the Instance Manager: points per cache, region, vCDN and host.

One pass writes all its points with the same ``at`` (the pass's clock), so
"the previous pass" of a vCDN is its points at their latest ``at``. Points
older than ``CDNAAS_IM_RETENTION_HOURS`` (default 24) move to the history, whole
steps of :data:`HISTORY_STEP` seconds at a time: one point per series and step,
kept ``CDNAAS_IM_HISTORY_DAYS`` (default 30).

A window (history, then points) can be read point by point or in steps of
``step`` seconds, each step one point: the mean of its passes' levels (viewers,
requests/s, MOS, CPU, watts) and the most vCPUs and cumulative energy among them.
"""
import dataclasses
import datetime as dt
import itertools
import math

from sqlalchemy import DateTime, and_, delete, func, insert, literal, select

from cdnaas.common import config
from cdnaas.common.timeutil import aware, isoformat
from cdnaas.db import bulk
from cdnaas.im.models import History, Sample

SCOPES = ("cache", "vnf", "region", "vcdn", "host")
#: figures a point carries in the API, in order
FIGURES = ("viewers", "requests_per_second", "mos", "cpu", "vcpus", "watts", "energy_wh")
#: figures a step averages over its passes; the others (vCPUs, cumulative energy) are
#: the most among them
AVERAGED = ("viewers", "requests_per_second", "mos", "cpu", "watts")
#: most points per series in a window read without a step
MAX_POINTS = 720
#: seconds per point of the history (steps aligned on the epoch)
HISTORY_STEP = 600


def retention():
    """How long points are kept (``CDNAAS_IM_RETENTION_HOURS``)."""
    return dt.timedelta(hours=config.setting("CDNAAS_IM_RETENTION_HOURS"))


def history_kept():
    """How long the history is kept (``CDNAAS_IM_HISTORY_DAYS``)."""
    return dt.timedelta(days=config.setting("CDNAAS_IM_HISTORY_DAYS"))


def write(session, at, points):
    """Store ``points`` (dicts of :class:`Sample` columns but ``at``) as taken ``at``, in
    bulk (:func:`cdnaas.db.bulk.insert`: a pass writes a dozen points per vCDN; as ORM
    objects, those of 300 vCDNs took a second to flush)."""
    bulk.insert(session, Sample.__table__, ("at", *_WRITTEN),
                [(at, *[point.get(name) for name in _WRITTEN]) for point in points])


#: the columns a point sets (all but its id and ``at``)
_WRITTEN = tuple(c.name for c in Sample.__table__.columns if c.name not in ("id", "at"))


def previous(session, vcdn_ids):
    """``{vcdn_id: {(scope, key): Sample}}`` of the latest pass of each of ``vcdn_ids``
    that had one (one query: its passes are those of its ``vcdn`` points)."""
    latest = (select(Sample.vcdn_id, func.max(Sample.at).label("at"))
              .where(Sample.vcdn_id.in_(vcdn_ids), Sample.scope == "vcdn")
              .group_by(Sample.vcdn_id).subquery())
    found = {}
    for row in session.scalars(select(Sample).join(
            latest, and_(Sample.vcdn_id == latest.c.vcdn_id, Sample.at == latest.c.at))):
        found.setdefault(row.vcdn_id, {})[(row.scope, row.key)] = row
    return found


def previous_hosts(session):
    """``{host: Sample}`` of the latest pass that saw hosts."""
    latest = select(func.max(Sample.at)).where(Sample.scope == "host").scalar_subquery()
    rows = session.scalars(select(Sample).where(Sample.scope == "host", Sample.at == latest))
    return {row.key: row for row in rows}


def latest_passes(session):
    """``{vcdn_id: {(scope, key): Sample}}``: the vCDN and region points of every vCDN's
    latest pass."""
    latest = (select(Sample.vcdn_id, func.max(Sample.at).label("at"))
              .where(Sample.scope == "vcdn").group_by(Sample.vcdn_id).subquery())
    rows = session.scalars(select(Sample).join(latest, and_(Sample.vcdn_id == latest.c.vcdn_id,
                                                            Sample.at == latest.c.at))
                           .where(Sample.scope.in_(("vcdn", "region"))))
    found = {}
    for row in rows:
        found.setdefault(row.vcdn_id, {})[(row.scope, row.key)] = row
    return found


@dataclasses.dataclass(frozen=True)
class Level:
    """A region's levels at one pass, as its policy and the host plan read them."""

    at: dt.datetime
    viewers: float | None
    mos: float | None
    vcpus: int | None


def region_history(session, vcdn_ids, passes):
    """``{vcdn_id: {region: [Level, ...]}}`` of the latest ``passes`` passes of each of
    ``vcdn_ids``, oldest first: one query for them all (each vCDN's passes ranked by its
    ``vcdn`` points; the index on the series bounds it to those passes)."""
    ranked = (select(Sample.vcdn_id, Sample.at, func.row_number().over(
        partition_by=Sample.vcdn_id, order_by=Sample.at.desc()).label("rank"))
        .where(Sample.vcdn_id.in_(vcdn_ids), Sample.scope == "vcdn").subquery())
    since = (select(ranked.c.vcdn_id, func.min(ranked.c.at).label("at"))
             .where(ranked.c.rank <= passes).group_by(ranked.c.vcdn_id).subquery())
    rows = session.execute(
        select(Sample.vcdn_id, Sample.key, Sample.at, Sample.viewers, Sample.mos, Sample.vcpus)
        .join(since, Sample.vcdn_id == since.c.vcdn_id)
        .where(Sample.scope == "region", Sample.at >= since.c.at).order_by(Sample.at))
    found = {}
    for vcdn_id, key, at, viewers, mos, vcpus in rows:
        found.setdefault(vcdn_id, {}).setdefault(key, []).append(
            Level(aware(at), viewers, mos, vcpus))
    return found


def purge(session, now):
    """Move the points older than the retention period into the history, a whole
    history step at a time, and remove history older than :func:`history_kept`."""
    cutoff = _step_start(now - retention())
    while (oldest := session.scalar(select(func.min(Sample.at)).where(Sample.at < cutoff))):
        start = _step_start(oldest)
        end = start + dt.timedelta(seconds=HISTORY_STEP)
        in_step = and_(Sample.at >= start, Sample.at < end)
        session.execute(insert(History).from_select(
            ["at", "scope", "vcdn_id", "key", "passes", *FIGURES],
            select(literal(start, DateTime(timezone=True)), Sample.scope, Sample.vcdn_id,
                   Sample.key, func.count(),
                   *[(func.avg if name in AVERAGED else func.max)(getattr(Sample, name))
                     for name in FIGURES])
            .where(in_step).group_by(Sample.vcdn_id, Sample.scope, Sample.key)))
        session.execute(delete(Sample).where(Sample.at < end))
    session.execute(delete(History).where(History.at < now - history_kept()))


def _step_start(at):
    """Start of the history step that holds ``at``."""
    seconds = aware(at).timestamp()
    return dt.datetime.fromtimestamp(seconds - seconds % HISTORY_STEP, dt.timezone.utc)


def default_step(session, vcdn_id, since, until):
    """Seconds per point that keep the vCDN's series within ``[since, until]`` at
    :data:`MAX_POINTS` points; None when its points there fit."""
    points = sum(session.scalar(select(func.count(func.distinct(table.at))).where(
        table.vcdn_id == vcdn_id, table.at >= since, table.at <= until))
        for table in (History, Sample))
    if points <= MAX_POINTS:
        return None
    return math.ceil((until - since).total_seconds() / MAX_POINTS)


def window(session, vcdn_id, since, until, scope=None, step=None):
    """The vCDN's series within ``[since, until]``: ``[{scope, key, points}]``, each oldest
    first (its history, then its points), a point per row or (``step`` seconds) per
    step from ``since``."""
    series = {}
    for table in (History, Sample):
        query = select(table).where(table.vcdn_id == vcdn_id, table.at >= since,
                                    table.at <= until)
        if scope:
            query = query.where(table.scope == scope)
        for row in session.scalars(query.order_by(table.at)):
            series.setdefault((row.scope, row.key), []).append(row)
    order = {name: index for index, name in enumerate(SCOPES)}
    return [{"scope": scope_, "key": key,
             "points": _steps(rows, since, step) if step else [point_view(r) for r in rows]}
            for (scope_, key), rows in sorted(series.items(),
                                              key=lambda item: (order[item[0][0]], item[0][1]))]


def _steps(rows, since, step):
    """One point per ``step`` seconds from ``since`` that holds rows (oldest first), each
    row weighing as many passes as it holds."""
    points = []
    for index, held in itertools.groupby(
            rows, key=lambda row: int((aware(row.at) - since).total_seconds() // step)):
        held = list(held)
        point = {"at": isoformat(since + dt.timedelta(seconds=index * step))}
        for name in FIGURES:
            known = [(getattr(row, name), row.passes) for row in held
                     if getattr(row, name) is not None]
            if not known:
                point[name] = None
            elif name in AVERAGED:
                point[name] = _rounded(sum(v * w for v, w in known) / sum(w for _v, w in known))
            else:
                point[name] = _rounded(max(v for v, _w in known))
        point["passes"] = sum(row.passes for row in held)
        points.append(point)
    return points


def point_view(row):
    view = {"at": isoformat(aware(row.at))}
    view.update({name: _rounded(getattr(row, name)) for name in FIGURES})
    if row.passes != 1:
        view["passes"] = row.passes
    return view


def _rounded(value):
    return round(value, 3) if isinstance(value, float) else value
