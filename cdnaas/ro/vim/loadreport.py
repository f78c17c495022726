"""A load generator's run turned into the :class:`~cdnaas.ro.vim.base.LoadReport` every
driver's ``load_test`` returns: one reading of wrk's and the viewer simulator's output."""
import dataclasses
import json

from cdnaas.calibration import loads, viewers, wrk
from cdnaas.ro.vim.base import GeneratorLimit, LoadReport, VimError

_VIEWER_FIGURES = ("seconds", "requests", "errors", "non_2xx", "latency_ms", "windows")


@dataclasses.dataclass
class Run:
    """What one generator run did, as :mod:`cdnaas.calibration.agent` answers it.

    :param status: the generator's exit status (-9: killed at its time bound).
    :param cpu_seconds: CPU time the generator used; ``seconds``: how long it ran.
    :param tool: the generator and its version (``wrk 4.1.0``).
    """

    status: int
    stdout: str
    stderr: str
    cpu_seconds: float
    seconds: float
    tool: str


def checked(test, address, port=None):
    """``test`` (a :class:`~cdnaas.ro.vim.base.LoadTest`) aimed at ``address`` (and
    ``port``, default 80) as a generator runs it (:func:`cdnaas.calibration.loads.check`).

    :raises VimError: the test is refused, naming the field.
    """
    fields = {**dataclasses.asdict(test), "address": address}
    if port is not None:
        fields["port"] = port
    try:
        return loads.check(fields)
    except ValueError as exc:
        raise VimError(f"load test refused: {exc}") from None


def report(test, run, target_cpu_seconds, isolated):
    """The report of ``test`` (a :class:`~cdnaas.ro.vim.base.LoadTest`) from its ``run``.

    :param target_cpu_seconds: CPU time the measured VNF used meanwhile (None: unknown).
    :param isolated: the generator ran on CPUs the VNF does not run on.
    :raises GeneratorLimit: the viewer simulator cannot drive that many viewers.
    :raises VimError: the generator failed or printed no report.
    """
    said = (run.stderr or run.stdout).strip()[-500:]
    if test.kind == "viewers" and run.status == viewers.LIMIT_STATUS:
        raise GeneratorLimit(said)
    if run.status != 0:
        raise VimError(f"{run.tool} failed (status {run.status}): {said}")
    try:
        figures = wrk.parse(run.stdout) if test.kind == "http" else _viewer_figures(run.stdout)
    except ValueError as exc:
        raise VimError(f"{run.tool} printed no report: {exc}") from exc
    seconds = figures["seconds"] or run.seconds
    return LoadReport(kind=test.kind, seconds=seconds, requests=figures["requests"],
                      errors=figures["errors"], non_2xx=figures["non_2xx"],
                      requests_per_second=round(figures["requests"] / seconds, 1),
                      latency_ms=figures["latency_ms"],
                      generator_cpu_seconds=round(run.cpu_seconds, 3),
                      target_cpu_seconds=None if target_cpu_seconds is None
                      else round(target_cpu_seconds, 3),
                      isolated=isolated, tool=run.tool, windows=figures.get("windows"))


def _viewer_figures(text):
    """The viewer simulator's JSON report.

    :raises ValueError: it is not one (``json.JSONDecodeError`` is a ValueError).
    """
    figures = json.loads(text)
    if not isinstance(figures, dict) or any(k not in figures for k in _VIEWER_FIGURES):
        raise ValueError(f"not a viewers report: {text.strip()[:200]!r}")
    return figures
