"""``wrk``, the HTTP load generator of the throughput measurements: its command and its report.

wrk (Debian package ``wrk``) keeps ``connections`` connections busy, each sending the
next request as soon as the previous answer arrived (a closed loop, as the paper's
weighttp), and prints requests, socket errors, non-2xx/3xx answers and latency
percentiles (``--latency``).
"""
import functools
import re
import shutil
import subprocess

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60000.0}
_LATENCY = re.compile(r"^\s*(50|75|90|99)%\s+([\d.]+)(us|ms|s|m)\s*$", re.M)
_TOTAL = re.compile(r"(\d+) requests in ([\d.]+)(us|ms|s|m)")
_ERRORS = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
_NON_2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)")


def command(url, connections, seconds, threads=1, timeout_seconds=10, byte_range=None):
    """The wrk command line of one measurement; ``byte_range``: ``(first byte, bytes)``
    every request asks of the object (``Range``), None: the whole object."""
    asked = [] if byte_range is None else \
        ["-H", f"Range: bytes={byte_range[0]}-{byte_range[0] + byte_range[1] - 1}"]
    return ["wrk", f"-t{threads}", f"-c{max(connections, threads)}", f"-d{max(1, round(seconds))}s",
            f"--timeout={timeout_seconds}s", "--latency", *asked, url]


@functools.cache
def version():
    """``wrk <version>`` of the wrk on this machine, or ``wrk (missing)``."""
    if shutil.which("wrk") is None:
        return "wrk (missing)"
    done = subprocess.run(["wrk", "--version"], capture_output=True, text=True, check=False)
    found = re.search(r"wrk\s+(\S+)", done.stdout + done.stderr)
    return f"wrk {found.group(1)}" if found else "wrk"


def parse(text):
    """``{requests, seconds, errors, non_2xx, latency_ms}`` of wrk's report.

    :raises ValueError: the text is not a wrk report.
    """
    total = _TOTAL.search(text)
    if total is None:
        raise ValueError(f"not a wrk report: {text.strip()[:200]!r}")
    errors = _ERRORS.search(text)
    non_2xx = _NON_2XX.search(text)
    return {"requests": int(total.group(1)),
            "seconds": float(total.group(2)) * _UNITS[total.group(3)] / 1000,
            "errors": sum(map(int, errors.groups())) if errors else 0,
            "non_2xx": int(non_2xx.group(1)) if non_2xx else 0,
            "latency_ms": {f"p{p}": round(float(v) * _UNITS[u], 3)
                           for p, v, u in _LATENCY.findall(text) if p in ("50", "90", "99")}}
