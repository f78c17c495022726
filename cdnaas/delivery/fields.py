"""Checks the delivery options share: objects, lists, integers, and the HTTP header names
and values an option renders into an nginx config.

A name is 1 to 64 of ``A-Z a-z 0-9 -`` (a subset of RFC 9110's token: nothing that starts
a comment, quotes or ends a directive), not one the proxy itself must own
(:data:`RESERVED`); a value is 1 to 256 printable ASCII characters without quotes,
backslash, ``;``, braces, ``$`` or a backtick (what could end a quoted nginx string, start a
variable or a directive), and without leading or trailing space. Either way nothing can
split a header (no CR, LF or NUL).
"""
import re

from cdnaas.common import errors

_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?")
_VALUE = re.compile(r"[A-Za-z0-9!#%&()*+,./:<=>?@\[\]^_|~-](?:[A-Za-z0-9 !#%&()*+,./:<=>?@\[\]^_|~-]{0,254}[A-Za-z0-9!#%&()*+,./:<=>?@\[\]^_|~-])?")
#: Names the proxy owns (hop-by-hop, framing, Host: set by its own field), in lower case.
RESERVED = frozenset({"host", "connection", "keep-alive", "proxy-connection", "te", "trailer",
                      "transfer-encoding", "upgrade", "content-length", "proxy-authenticate",
                      "proxy-authorization", "content-encoding", "date", "server"})


def bad(field, problem):
    """Refuse ``field``: a BadRequest naming it, saying ``problem``."""
    raise errors.BadRequest(f"{field} {problem}", field=field,
                            details=[{"field": field, "problem": problem}])


def name(value, field, reserved=RESERVED):
    """``value`` as a header name (its case kept).

    :raises BadRequest: naming ``field``: not a name, or one the proxy owns (``reserved``).
    """
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        bad(field, f"{value!r} is not a header name: 1 to 64 of A-Z, a-z, 0-9 and - "
                   "(not starting or ending with -)")
    if value.lower() in reserved:
        bad(field, f"{value!r} is a header the CDN sets itself; choose another name")
    return value


def value_text(value, field):
    """``value`` as a header value.

    :raises BadRequest: naming ``field``, with the characters allowed.
    """
    if not isinstance(value, str) or not _VALUE.fullmatch(value):
        bad(field, f"{value!r} is not a header value: 1 to 256 printable ASCII characters "
                   "without quotes, backslash, backtick, ; { } $ or spaces at either end")
    return value


def object_of(value, field, keys, required=()):
    """``value`` if it is an object of only ``keys``, with every one of ``required``.

    :raises BadRequest: naming the first unknown or missing key.
    """
    if not isinstance(value, dict):
        bad(field, "must be an object")
    unknown = sorted(set(value) - set(keys), key=str)
    if unknown:
        bad(f"{field}.{unknown[0]}", f"is not known; send only {', '.join(keys)}")
    for key in required:
        if key not in value:
            bad(f"{field}.{key}", "is missing")
    return value


def list_of(value, field, most, what="items"):
    """``value`` if it is a list of at most ``most`` items (``what`` they are, for the
    message).

    :raises BadRequest: naming ``field``.
    """
    if not isinstance(value, list) or len(value) > most:
        bad(field, f"must be a list of at most {most} {what}")
    return value


def integer(value, field, low, high):
    """``value`` if it is an integer from ``low`` to ``high``.

    :raises BadRequest: naming ``field``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        bad(field, f"{value!r} is not an integer from {low} to {high}")
    return value
