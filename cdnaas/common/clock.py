"""The services' notion of now, which tests and trace replays can move.

``CDNAAS_CLOCK_FILE`` (read at every call) may name a file holding either an
ISO 8601 time (the clock stands there) or a signed number of seconds (an
offset from real time, e.g. ``+3600``). Absent, empty or missing: real UTC.
Every process of a stack that shares the variable shares the clock.
"""
import datetime as dt
from pathlib import Path

from cdnaas.common import config
from cdnaas.common.timeutil import parse, utcnow


def now():
    """Timezone-aware UTC now, as the clock file says."""
    path = config.setting("CDNAAS_CLOCK_FILE")
    text = Path(path).read_text().strip() if path and Path(path).exists() else ""
    if not text:
        return utcnow()
    if text[0] in "+-" or text.replace(".", "", 1).isdigit():
        return utcnow() + dt.timedelta(seconds=float(text))
    return parse(text)
