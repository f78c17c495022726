"""Time series of the Instance Manager: points per cache, region, vCDN and host.

One pass writes all its points with the same ``at`` (the pass's clock), so
"the previous pass" of a vCDN is its points at their latest ``at``. Points
older than ``CDNAAS_IM_RETENTION_HOURS`` (default 24) are removed.

A window can be read pass by pass or in steps of ``step`` seconds, each step
one point: the mean of its passes' levels (viewers, requests/s, MOS, CPU,
watts) and the vCPUs and cumulative energy of its last pass.
"""
import datetime as dt
import itertools
import math
import statistics

from sqlalchemy import and_, delete, func, select

from cdnaas.common import config
from cdnaas.common.timeutil import aware, isoformat
from cdnaas.im.models import Sample

SCOPES = ("cache", "vnf", "region", "vcdn", "host")
#: figures a point carries in the API, in order
FIGURES = ("viewers", "requests_per_second", "mos", "cpu", "vcpus", "watts", "energy_wh")
#: figures a step averages over its passes; the others are its last pass's
AVERAGED = ("viewers", "requests_per_second", "mos", "cpu", "watts")
#: most points per series in a window read without a step
MAX_POINTS = 720


def retention():
    """How long points are kept (``CDNAAS_IM_RETENTION_HOURS``)."""
    return dt.timedelta(hours=config.float_setting("CDNAAS_IM_RETENTION_HOURS", 24))


def write(session, at, points):
    """Store ``points`` (dicts of :class:`Sample` columns but ``at``) as taken ``at``."""
    session.add_all(Sample(at=at, **point) for point in points)


def previous(session, vcdn_id):
    """``{(scope, key): Sample}`` of the vCDN's latest pass ({} before its first)."""
    latest = select(func.max(Sample.at)).where(Sample.vcdn_id == vcdn_id).scalar_subquery()
    rows = session.scalars(select(Sample).where(Sample.vcdn_id == vcdn_id, Sample.at == latest))
    return {(row.scope, row.key): row for row in rows}


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


def recent(session, vcdn_id, scope, key, after, limit):
    """Up to ``limit`` latest points of one series taken after ``after`` (None: any), oldest first."""
    query = select(Sample).where(Sample.vcdn_id == vcdn_id, Sample.scope == scope,
                                 Sample.key == key)
    if after is not None:
        query = query.where(Sample.at > after)
    rows = session.scalars(query.order_by(Sample.at.desc()).limit(limit)).all()
    return rows[::-1]


def purge(session, now):
    """Remove points older than the retention period."""
    session.execute(delete(Sample).where(Sample.at < now - retention()))


def default_step(session, vcdn_id, since, until):
    """Seconds per point that keep the vCDN's series within ``[since, until]`` at
    :data:`MAX_POINTS` points; None when its passes there fit."""
    passes = session.scalar(select(func.count(func.distinct(Sample.at))).where(
        Sample.vcdn_id == vcdn_id, Sample.at >= since, Sample.at <= until))
    if passes <= MAX_POINTS:
        return None
    return math.ceil((until - since).total_seconds() / MAX_POINTS)


def window(session, vcdn_id, since, until, scope=None, step=None):
    """The vCDN's series within ``[since, until]``: ``[{scope, key, points}]``, each oldest
    first, a point per pass or (``step`` seconds) per step from ``since``."""
    query = select(Sample).where(Sample.vcdn_id == vcdn_id, Sample.at >= since, Sample.at <= until)
    if scope:
        query = query.where(Sample.scope == scope)
    series = {}
    for row in session.scalars(query.order_by(Sample.at)):
        series.setdefault((row.scope, row.key), []).append(row)
    order = {name: index for index, name in enumerate(SCOPES)}
    return [{"scope": scope_, "key": key,
             "points": _steps(rows, since, step) if step else [point_view(r) for r in rows]}
            for (scope_, key), rows in sorted(series.items(),
                                              key=lambda item: (order[item[0][0]], item[0][1]))]


def _steps(rows, since, step):
    """One point per ``step`` seconds from ``since`` that holds passes (``rows``, oldest first)."""
    points = []
    for index, passes in itertools.groupby(
            rows, key=lambda row: int((aware(row.at) - since).total_seconds() // step)):
        passes = list(passes)
        point = {"at": isoformat(since + dt.timedelta(seconds=index * step))}
        for name in FIGURES:
            if name in AVERAGED:
                known = [getattr(row, name) for row in passes if getattr(row, name) is not None]
                point[name] = _rounded(statistics.fmean(known)) if known else None
            else:
                point[name] = _rounded(getattr(passes[-1], name))
        point["passes"] = len(passes)
        points.append(point)
    return points


def point_view(row):
    view = {"at": isoformat(aware(row.at))}
    view.update({name: _rounded(getattr(row, name)) for name in FIGURES})
    return view


def _rounded(value):
    return round(value, 3) if isinstance(value, float) else value
