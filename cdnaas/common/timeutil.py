"""Time helpers: timezone-aware UTC everywhere, ISO 8601 on the wire."""
import datetime as dt


def utcnow():
    """The current time, timezone-aware UTC."""
    return dt.datetime.now(dt.timezone.utc)


def isoformat(value):
    """ISO 8601 text of ``value`` (naive values are taken as UTC), or None."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")


#: the times a request may name: every window and lease computed from them stays a datetime
EARLIEST = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
LATEST = dt.datetime(9000, 1, 1, tzinfo=dt.timezone.utc)


def parse(text):
    """Parse ISO 8601 text into aware UTC; text without an offset is taken as UTC.

    :raises ValueError: not ISO 8601, or outside :data:`EARLIEST` .. :data:`LATEST`.
    """
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    try:
        value = value.astimezone(dt.timezone.utc)
    except OverflowError:
        value = None
    if value is None or not EARLIEST <= value < LATEST:
        raise ValueError(f"{text} is not between {EARLIEST.year} and {LATEST.year}")
    return value


def aware(value):
    """``value`` with UTC attached if the database handed it back naive (SQLite)."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=dt.timezone.utc)
    return value
