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
import inspect
import itertools
import json
import re
import stat
import typing
from pathlib import Path

import jsonschema
import yaml

from cdnaas.common import config, validation

#: MOS of a load beyond the model's last point: the bottom of the 1-5 scale.
MOS_FLOOR = 1.0
#: Largest model file read (the shipped ones are a few KiB).
MAX_BYTES = 1 << 20
_SEGMENT = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
_MODEL_NAME = re.compile(rf"(?:{_SEGMENT}/)*{_SEGMENT}\.ya?ml")
_KEY = re.compile(r"[A-Za-z0-9_-]{1,40}")


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


def load(path, name=None) -> Model:
    """Read, check and parse the model file at ``path`` (re-read when the file changes).

    Messages never quote the file: a file that is not a model (``/etc/passwd``) is
    described by what is wrong with it, not by its lines.

    :param name: how messages name the file (default: ``path``).
    :raises ModelError: the file is missing, too large, not UTF-8 YAML, or breaks the rules.
    """
    path = Path(path)
    name = str(path) if name is None else name
    try:
        found = path.stat()
    except OSError as exc:
        raise ModelError(name, [("", f"cannot read the file: {exc.strerror}")]) from None
    if not stat.S_ISREG(found.st_mode):
        raise ModelError(name, [("", "cannot read the file: it is not a regular file")])
    if found.st_size > MAX_BYTES:
        raise ModelError(name, [("", f"is larger than {MAX_BYTES // 1024} KiB")])
    return _load(path, name, found.st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _load(path, name, _stamp):
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ModelError(name, [("", f"cannot read the file: {exc.strerror}")]) from None
    except UnicodeDecodeError:
        raise ModelError(name, [("", "does not parse: it is not UTF-8 text")]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ModelError(name, [("", f"does not parse: not valid YAML{where}")]) from None
    except RecursionError:
        raise ModelError(name, [("", "does not parse: nested too deeply")]) from None
    return parse(document, origin=name)


def named(name, folder) -> Model:
    """The model a service template names ``name``, found by :func:`resolve` from ``folder``.

    :raises ModelError: as :func:`resolve` and :func:`load`, naming the file by ``name``.
    """
    return load(resolve(name, folder), name=name)


def resolve(name, folder) -> Path:
    """Where the model file a template names ``name`` is: in ``folder`` (the flavor
    plugin's folder) or, failing that, in one of the operator's ``CDNAAS_MODEL_DIRS``.

    ``name`` is a relative path of ``A-Z a-z 0-9 _ . -`` segments (none starting with
    a dot) ending in ``.yaml`` or ``.yml``, like ``models/vm.yaml``: never absolute,
    never ``..``, and a symbolic link must not lead out of the folder it is found in.

    :raises ModelError: the name is not allowed, or no folder has the file.
    """
    problem = name_problem(name)
    if problem:
        raise ModelError(validation.shown(name), [("", problem)])
    for base in [Path(folder), *config.model_dirs()]:
        base = base.resolve()
        candidate = (base / name).resolve()
        if not candidate.is_relative_to(base):
            raise ModelError(name, [("", "leads out of its folder through a symbolic link")])
        if candidate.exists():
            return candidate
    raise ModelError(name, [("", "cannot read the file: no such file in the plugin's folder"
                                 + (" or in CDNAAS_MODEL_DIRS" if config.model_dirs() else ""))])


def name_problem(name):
    """What is wrong with ``name`` as a template's model file name, or None."""
    if not isinstance(name, str):
        return "must be a file name (a string)"
    if name.startswith("/") or re.match(r"[A-Za-z]:", name):
        return ("must be relative to the plugin's folder (like models/vm.yaml), not an "
                "absolute path; put your own models in a folder of CDNAAS_MODEL_DIRS")
    if ".." in name.split("/"):
        return "must not leave the plugin's folder (no .. segments)"
    if len(name) > 255 or not _MODEL_NAME.fullmatch(name):
        return ("must be a relative path like models/vm.yaml: segments of A-Z, a-z, 0-9, _, "
                ". and - (none starting with a dot), ending in .yaml or .yml")
    return None


def plugin_folder(plugin) -> Path:
    """The folder of the package that defines the flavor plugin object ``plugin``."""
    return Path(inspect.getfile(type(plugin))).resolve().parent


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
        return [(_field(e.absolute_path), _schema_problem(e)) for e in errors]
    found = _monotone(document["qoe"]["points"], "qoe.points", "mos", rising=False)
    percentiles = set()
    for index, curve in enumerate(document.get("response_time", [])):
        field = f"response_time.{index}"
        if curve["percentile"] in percentiles:
            found.append((f"{field}.percentile", f"percentile {curve['percentile']} has two curves"))
        percentiles.add(curve["percentile"])
        found += _monotone(curve["points"], f"{field}.points", "max_ms", rising=True)
    return found + _throughput_problems(document)


def _field(path):
    """A dotted path; keys that are not plain names are shown as ``?`` (never file text)."""
    return ".".join(str(p) if isinstance(p, int) or _KEY.fullmatch(str(p)) else "?" for p in path)


def _schema_problem(error):
    """What a schema error says, in words of the schema only: the value that broke the
    rule is never quoted (the document may be any file's text)."""
    rule, wanted = error.validator, error.validator_value
    if rule == "required":
        return error.message  # "'name' is a required property": the name is the schema's
    if rule == "additionalProperties":
        return "Additional properties are not allowed (remove the fields the schema does not name)"
    words = {"type": "is not of type", "enum": "is not one of",
             "maximum": "is greater than the maximum of", "minimum": "is less than the minimum of",
             "exclusiveMaximum": "is not less than", "exclusiveMinimum": "is not greater than",
             "minItems": "has fewer items than", "maxItems": "has more items than",
             "minLength": "is shorter than", "maxLength": "is longer than",
             "pattern": "does not match"}
    if rule == "const":
        return f"{wanted!r} was expected"
    return f"{words[rule]} {wanted!r}" if rule in words else f"breaks the schema's {rule} rule"


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
