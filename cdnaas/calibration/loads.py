"""One load test as a generator host runs it: its parameters checked, its command line, its tool.

A test is a JSON-ready dict: the fields of :class:`cdnaas.ro.vim.base.LoadTest`
(``kind``, ``path``, ``connections``, ``seconds``, ``chunk_seconds``, ``segments``,
``window_seconds``, ``buffer_chunks``) plus the target's ``address`` and ``port``.
The local driver builds its generator's command here; so does the load-generator agent
(:mod:`cdnaas.calibration.agent`) on an OpenStack server, which receives tests from the
network and runs nothing :func:`check` has not accepted. Standard library only (with
:mod:`.wrk` and :mod:`.viewers`): the agent's server has these files and python3, no more.
"""
import ipaddress
import math
import re
import sys

from cdnaas.calibration import viewers, wrk

KINDS = ("http", "viewers")
#: the most connections (wrk) or viewers one test may ask for
MAX_CONNECTIONS = 1_000_000
#: the longest load one test may ask for, in seconds
MAX_SECONDS = 3600.0
#: a generator may overrun its load by this many seconds before it is killed
GRACE_SECONDS = 30
#: a request target: ``/``, then RFC 3986 path and query characters but ``;`` (no
#: space, control byte, quote, brace or backslash), at most 1024 in all
_TARGET = re.compile(r"/[A-Za-z0-9._~!$&'()*+,=:@/%?-]{0,1023}")
_SEGMENT = "{n}"  # where viewers put the segment number
#: field -> (type, smallest, largest, default); no default: required
_NUMBERS = {
    "connections": (int, 1, MAX_CONNECTIONS, None),
    "seconds": (float, 0.001, MAX_SECONDS, None),
    "chunk_seconds": (float, 0.05, 60.0, 2.0),
    "segments": (int, 1, 100_000, 300),
    "window_seconds": (float, 0.5, MAX_SECONDS, 16.0),
    "buffer_chunks": (int, 1, 100, 2),
    "port": (int, 1, 65535, 80),
    # http: each request asks bytes range_start.. of the object, range_bytes of them (0: all)
    "range_start": (int, 0, 1 << 40, 0),
    "range_bytes": (int, 0, 1 << 30, 0),
}
FIELDS = ("kind", "path", "address", *_NUMBERS)


def check(fields, targets=None):
    """``fields`` (a decoded JSON object) as a test: every field checked, defaults filled.

    :param targets: address prefixes (``ipaddress`` networks) the target must be in;
        None: any unicast address.
    :returns: a new dict with exactly :data:`FIELDS`.
    :raises ValueError: naming the first field refused and why.
    """
    if not isinstance(fields, dict):
        raise ValueError("a load test is a JSON object")
    unknown = sorted(str(k)[:40] for k in fields if k not in FIELDS)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(map(repr, unknown))}")
    test = {"kind": fields.get("kind")}
    if test["kind"] not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}")
    for name, (kind, low, high, default) in _NUMBERS.items():
        test[name] = _number(name, fields.get(name, default), kind, low, high)
    _path(fields.get("path"), test["kind"])
    test["path"] = fields["path"]
    test["address"] = _address(fields.get("address"), targets)
    return test


def _number(name, value, kind, low, high):
    if value is None:
        raise ValueError(f"{name} is required")
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or (kind is int and not isinstance(value, int)):
        raise ValueError(f"{name} must be {'an integer' if kind is int else 'a number'}")
    if (isinstance(value, float) and not math.isfinite(value)) or not low <= value <= high:
        raise ValueError(f"{name} must be between {low:g} and {high:g}")
    return kind(value)


def _path(value, kind):
    """http: a request target; viewers: one holding ``{n}`` (the segment number) once."""
    if not isinstance(value, str):
        raise ValueError("path must be a string")
    if kind == "viewers":
        if value.count(_SEGMENT) != 1:
            raise ValueError(f"path of viewers must hold {_SEGMENT} (the segment number) once")
        value = value.replace(_SEGMENT, "")
    if _TARGET.fullmatch(value) is None:
        raise ValueError("path must be a request target: '/' then at most 1023 URL characters "
                         "(no space, control byte, quote, brace, backslash or ';')")


def _address(value, targets):
    if not isinstance(value, str) or len(value) > 45:
        raise ValueError("address must be an IP address")
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        raise ValueError("address must be an IP address") from None
    if address.is_unspecified or address.is_multicast or getattr(address, "scope_id", None):
        raise ValueError("address must be a unicast address without a zone")
    if targets is not None and not any(address in prefix for prefix in targets):
        raise ValueError(f"address {address} is outside the prefixes this generator may load "
                         f"({', '.join(map(str, targets)) or 'none'})")
    return str(address)


def command(test, python=sys.executable, viewers_script=viewers.__file__):
    """The command line (a list of arguments, never a shell's) of the :func:`check`\\ ed ``test``.

    :param python, viewers_script: the Python and the :mod:`.viewers` file that run viewers.
    """
    host = f"[{test['address']}]" if ":" in test["address"] else test["address"]
    if test["kind"] == "http":
        return wrk.command(f"http://{host}:{test['port']}{test['path']}", test["connections"],
                           test["seconds"], byte_range=(test["range_start"], test["range_bytes"])
                           if test["range_bytes"] else None)
    return [python, viewers_script, "--address", test["address"], "--port", str(test["port"]),
            "--path", test["path"], "--viewers", str(test["connections"]),
            "--seconds", str(test["seconds"]), "--chunk-seconds", str(test["chunk_seconds"]),
            "--segments", str(test["segments"]), "--window-seconds", str(test["window_seconds"]),
            "--buffer-chunks", str(test["buffer_chunks"])]


def tool(kind):
    """The generator of ``kind`` and its version on this host (``wrk 4.1.0``)."""
    return wrk.version() if kind == "http" else viewers.TOOL


def timeout(test):
    """Seconds after which the generator of ``test`` is killed."""
    return test["seconds"] + test["chunk_seconds"] + GRACE_SECONDS
