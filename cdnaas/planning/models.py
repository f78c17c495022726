"""Performance models of cache VNFs: loading, checking and reading model files.

A model file (YAML, described by ``api-spec/model.schema.json``) states what
one vCPU of a cache serves on one technology: HTTP throughput by object size
and concurrency, the MOS of HD viewers against concurrent viewers per vCPU,
and percentile response-time curves. Everything is per vCPU and scales
linearly with vCPUs.

How curves are read between and beyond their points:

- **MOS**: piecewise linear in viewers per vCPU. Below the first point it is
  the first point's MOS (less load never hurts; the paper does not report low
  loads because quality is unaffected there). Beyond the last point it is
  :data:`MOS_FLOOR`: a load nobody measured is treated as unusable, so the
  planner never extrapolates optimistically.
- **Response time**: piecewise linear; below the first point the first
  point's value, beyond the last point unknown (no load there is allowed).
  A curve for percentile p also bounds every lower percentile.
- **Throughput**: piecewise linear in concurrency for a measured object size
  (sizes are not interpolated), held at the nearest measured concurrency
  outside the measured range.
"""
import bisect
import dataclasses
import functools
import itertools
import json
import typing
from pathlib import Path

import jsonschema
import yaml

from cdnaas.common import config

#: MOS of a load beyond the model's last point: the bottom of the 1-5 scale.
MOS_FLOOR = 1.0


class ModelError(ValueError):
    """A model file is missing, does not parse or breaks the model rules.

    ``problems`` lists ``(field, problem)`` pairs, ``field`` a dotted path such
    as ``qoe.points.2.mos``.
    """

    def __init__(self, origin, problems):
        self.origin = str(origin)
        self.problems = problems
        super().__init__(f"model {origin} is invalid: "
                         + "; ".join(f"{field or '(top)'}: {problem}" for field, problem in problems))


@dataclasses.dataclass(frozen=True)
class Curve:
    """A piecewise-linear curve through points with strictly increasing ``xs``."""

    xs: tuple
    ys: tuple

    def at(self, x):
        """The curve's value at ``x``: ``ys[0]`` below the first point, None beyond the last."""
        if x <= self.xs[0]:
            return self.ys[0]
        if x > self.xs[-1]:
            return None
        right = bisect.bisect_left(self.xs, x)
        x0, x1, y0, y1 = self.xs[right - 1], self.xs[right], self.ys[right - 1], self.ys[right]
        return y0 + (y1 - y0) * (x - x0) / (x1 - x0)

    def last_x_within(self, threshold, within):
        """Largest x in ``[xs[0], xs[-1]]`` where this monotone curve is ``within(y, threshold)``.

        None if even the first point is not within.
        """
        if not within(self.ys[0], threshold):
            return None
        for x0, x1, y0, y1 in zip(self.xs, self.xs[1:], self.ys, self.ys[1:]):
            if not within(y1, threshold):
                return x0 + (threshold - y0) * (x1 - x0) / (y1 - y0)
        return self.xs[-1]


class ResponseCurve(typing.NamedTuple):
    """Response time (ms) within which ``percentile`` % of requests for ``video`` chunks complete."""

    percentile: float
    video: str
    curve: Curve


@dataclasses.dataclass(frozen=True)
class Model:
    """A checked model file, with the readings the planner needs."""

    name: str
    technology: str
    origin: str
    chunk_seconds: float
    chunk_kb: dict
    qoe: Curve
    qoe_video: str
    response_time: dict   # percentile -> ResponseCurve
    throughput: dict      # object_kb -> Curve of requests/s against connections

    @property
    def best_mos(self):
        """The highest MOS the model predicts at any load."""
        return self.qoe.ys[0]

    def mos(self, viewers_per_vcpu):
        """Predicted MOS of viewers (of ``qoe_video`` chunks) at ``viewers_per_vcpu``."""
        value = self.qoe.at(viewers_per_vcpu)
        return MOS_FLOOR if value is None else value

    def max_load_for_mos(self, min_mos):
        """Most viewers per vCPU with MOS >= ``min_mos``; None if the model never reaches it."""
        return self.qoe.last_x_within(min_mos, lambda y, t: y >= t)

    def response_curve(self, percentile):
        """The :class:`ResponseCurve` of the lowest modelled percentile >= ``percentile``, or None."""
        covering = [p for p in self.response_time if p >= percentile]
        return self.response_time[min(covering)] if covering else None

    def requests_per_second(self, object_kb, connections):
        """HTTP requests/s one vCPU sustains for objects of ``object_kb`` at ``connections``.

        :raises KeyError: the model has no throughput points for that object size.
        """
        curve = self.throughput[object_kb]
        return curve.at(connections) if connections <= curve.xs[-1] else curve.ys[-1]

    def utilisation(self, viewers, vcpus, video="hd"):
        """Share of ``vcpus``' throughput that ``viewers`` of ``video`` chunks use, one per chunk period."""
        rate = viewers / self.chunk_seconds
        capacity = vcpus * self.requests_per_second(self.chunk_kb[video], viewers / vcpus)
        return min(1.0, rate / capacity)


@functools.cache
def schema():
    """The model JSON Schema from ``api-spec/``."""
    with open(config.REPO_ROOT / "api-spec" / "model.schema.json", encoding="utf-8") as handle:
        return json.load(handle)


def load(path) -> Model:
    """Read, check and parse the model file at ``path`` (re-read when the file changes).

    :raises ModelError: the file is missing, does not parse or breaks the rules.
    """
    path = Path(path)
    try:
        stamp = path.stat().st_mtime_ns
    except OSError as exc:
        raise ModelError(path, [("", f"cannot read the file: {exc.strerror}")]) from None
    return _load(path, stamp)


@functools.lru_cache(maxsize=32)
def _load(path, _stamp):
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ModelError(path, [("", f"does not parse: {exc}")]) from None
    return parse(document, origin=path)


def parse(document, origin="<model>") -> Model:
    """Build a :class:`Model` from a parsed model document.

    :raises ModelError: listing every problem found.
    """
    found = problems(document)
    if found:
        raise ModelError(origin, found)
    points = document["qoe"]["points"]
    throughput = {}
    for point in sorted(document["throughput"]["points"], key=lambda p: p["connections"]):
        throughput.setdefault(point["object_kb"], []).append(
            (point["connections"], point["requests_per_second"]))
    return Model(
        name=document["name"], technology=document["technology"], origin=str(origin),
        chunk_seconds=document["video"]["chunk_seconds"],
        chunk_kb=dict(document["video"]["chunk_kb"]),
        qoe=Curve(tuple(p["viewers_per_vcpu"] for p in points), tuple(p["mos"] for p in points)),
        qoe_video=document["qoe"]["video"],
        response_time={c["percentile"]: ResponseCurve(
            c["percentile"], c["video"], Curve(tuple(p["viewers_per_vcpu"] for p in c["points"]),
                                               tuple(p["max_ms"] for p in c["points"])))
            for c in document.get("response_time", [])},
        throughput={kb: Curve(*map(tuple, zip(*pairs))) for kb, pairs in throughput.items()})


def problems(document):
    """Every ``(field, problem)`` of ``document``: the schema first, then the curve rules."""
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(document), key=lambda e: [str(p) for p in e.path])
    if errors:
        return [(".".join(map(str, e.absolute_path)), e.message) for e in errors]
    found = _monotone(document["qoe"]["points"], "qoe.points", "mos", rising=False)
    percentiles = set()
    for index, curve in enumerate(document.get("response_time", [])):
        field = f"response_time.{index}"
        if curve["percentile"] in percentiles:
            found.append((f"{field}.percentile", f"percentile {curve['percentile']} has two curves"))
        percentiles.add(curve["percentile"])
        found += _monotone(curve["points"], f"{field}.points", "max_ms", rising=True)
    return found + _throughput_problems(document)


def _monotone(points, field, key, rising):
    """Loads strictly increase; ``key`` never falls (``rising``) or never rises with load."""
    found = []
    for index, (before, point) in enumerate(itertools.pairwise(points), start=1):
        if point["viewers_per_vcpu"] <= before["viewers_per_vcpu"]:
            problem = (f"loads must increase from point to point ({point['viewers_per_vcpu']} "
                       f"after {before['viewers_per_vcpu']})")
            found.append((f"{field}.{index}.viewers_per_vcpu", problem))
        elif (point[key] < before[key]) if rising else (point[key] > before[key]):
            problem = (f"{key} must not {'fall' if rising else 'rise'} as load grows "
                       f"({point[key]} after {before[key]})")
            found.append((f"{field}.{index}.{key}", problem))
    return found


def _throughput_problems(document):
    found, seen = [], set()
    for index, point in enumerate(document["throughput"]["points"]):
        key = (point["object_kb"], point["connections"])
        if key in seen:
            found.append((f"throughput.points.{index}",
                          f"a second point for {key[0]} KB at {key[1]} connections"))
        seen.add(key)
    for video, size in document["video"]["chunk_kb"].items():
        if size not in {kb for kb, _ in seen}:
            problem = (f"no point for the {video} chunk size ({size} KB): the planner needs it "
                       "to estimate utilisation")
            found.append(("throughput.points", problem))
    return found
