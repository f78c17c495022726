"""Time windows named in query strings (``from``/``to``, ``since``/``until``), checked once.

Every window of a usage report, traffic series or log export is read here: ISO 8601
times between 1970 and 9000, the start before the end, at most a given length. A
refusal is a 400 naming the parameter and saying what to send.
"""
import datetime as dt

from cdnaas.common import errors
from cdnaas.common.timeutil import parse


def parse_time(text, field):
    """The ISO 8601 time ``text`` (a query parameter or a field of a body) as aware UTC.

    :raises BadRequest: (field ``field``) not an ISO 8601 time from 1970 to 9000.
    """
    try:
        return parse(text)
    except ValueError:
        raise errors.BadRequest(f"{field} is not an ISO 8601 time between 1970 and 9000 "
                                "like 2026-12-01T10:00:00Z", field=field) from None


def moment(args, name, default):
    """The time in query parameter ``name`` of ``args``, or ``default`` when absent.

    :raises BadRequest: (field ``name``) not an ISO 8601 time from 1970 to 9000.
    """
    text = args.get(name)
    if not text:
        return default
    return parse_time(text, name)


def window(args, start, end, now, default_start, longest):
    """``(start time, end time)`` of the window in ``args``.

    :param start, end: the parameters' names (``"from"``, ``"to"``).
    :param now: the end when ``end`` is absent.
    :param default_start: ``default_start(end time)``: the start when ``start`` is absent.
    :param longest: a :class:`datetime.timedelta`: the longest window allowed.
    :raises BadRequest: naming the parameter: not a time, start not before end, or
        the window longer than ``longest``.
    """
    until = moment(args, end, now)
    since = moment(args, start, None)
    if since is None:
        since = max(default_start(until), until - longest)
    if since >= until:
        raise errors.BadRequest(f"{start} must be before {end} ({start} {since.isoformat()}, "
                                f"{end} {until.isoformat()})", field=start)
    if until - since > longest:
        raise errors.BadRequest(f"the window from {start} to {end} is longer than "
                                f"{_days(longest)}; ask for a shorter one", field=start)
    return since, until


def _days(length: dt.timedelta):
    if length >= dt.timedelta(days=1):
        return f"{length / dt.timedelta(days=1):g} days"
    return f"{length / dt.timedelta(hours=1):g} hours"
