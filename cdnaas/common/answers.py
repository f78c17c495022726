"""The answers of the internal services that callers read, as small typed records.

In the manner of openstacksdk's resources, a client of :mod:`cdnaas.common.clients`
returns one of these in place of the JSON it received: callers read ``deployment.status``,
not ``deployment["status"]``. Each class names in ``SPEC`` the answer of ``api-spec/`` it
models (``(document, method, path, status[, part...])``, a part naming a property, the
items of an array ``"name[]"`` or a ``oneOf`` branch ``"oneOf:N"``); a unit test resolves
that schema and checks that every field is one of its properties, required where the
field has no default.

Two kinds of record, both immutable: :func:`answer` makes a frozen dataclass with slots;
:func:`row` a tuple with named fields (:class:`typing.NamedTuple`), for the answers the
Instance Manager reads of every vCDN each pass (SO's vCDNs, RO's readings), which it
builds about ten times faster (one ``tuple.__new__``, not a ``setattr`` per field).

Built by :func:`from_json`, one generic helper that compiles, once per record class, a
builder over its fields: keys the record does not model are left out (a service may add
some), a nested record is built from its object, ``tuple[Record, ...]`` from a list. A
record with a ``body`` field keeps the whole JSON there too (what a proxy such as the
customer API forwards unchanged).
"""
import collections
import dataclasses
import functools
import typing
from typing import ClassVar

from cdnaas.common import errors


def from_json(cls, data):
    """An instance of the answer record ``cls`` from the decoded JSON object ``data``.

    :raises cdnaas.common.errors.UpstreamError: ``data`` is no object or lacks a field
        ``cls`` requires (the peer answered what its document does not say).
    """
    return _builder(cls)(data)


def many(cls, items):
    """:func:`from_json` of each object of the list ``items``, as a list."""
    build = _builder(cls)
    return [build(item) for item in items]


def answer(cls):
    """Make ``cls`` an answer record: a frozen dataclass with slots."""
    return dataclasses.dataclass(frozen=True, slots=True)(cls)


def _body():
    """The ``body`` field of an answer dataclass: the whole JSON, left out of its repr and
    comparisons."""
    return dataclasses.field(default=None, repr=False, compare=False)


def row(cls):
    """Make ``cls`` (a class body of annotated fields, defaults last) an answer record
    built as a tuple: a named tuple with its fields' types, docstring and ``SPEC``."""
    hints = {name: kind for name, kind in typing.get_type_hints(cls).items()
             if kind is not ClassVar and typing.get_origin(kind) is not ClassVar}
    made = collections.namedtuple(cls.__name__, list(hints), module=cls.__module__,
                                  defaults=[cls.__dict__[n] for n in hints if n in cls.__dict__])
    made.__annotations__, made.__doc__, made.SPEC = hints, cls.__doc__, cls.SPEC
    if "body" in hints:
        made.__repr__ = _repr_without_body
    return made


def _repr_without_body(record):
    shown = ", ".join(f"{name}={value!r}" for name, value in zip(record._fields, record)
                      if name != "body")
    return f"{type(record).__name__}({shown})"


def fields(cls):
    """``[(name, required)]`` of the answer record ``cls``'s fields, in order."""
    if dataclasses.is_dataclass(cls):
        return [(f.name, f.default is dataclasses.MISSING
                 and f.default_factory is dataclasses.MISSING) for f in dataclasses.fields(cls)]
    return [(name, name not in cls._field_defaults) for name in cls._fields]


def _is_record(kind):
    return isinstance(kind, type) and (dataclasses.is_dataclass(kind)
                                       or issubclass(kind, tuple) and hasattr(kind, "SPEC"))


@functools.cache
def _builder(cls):
    """``build(data)`` of the record ``cls``, its code written once from its fields (a pass
    of 10,000 vCDNs builds 200,000 records: no look at type hints, no loop per field)."""
    hints = typing.get_type_hints(cls)
    defaults = {} if dataclasses.is_dataclass(cls) else cls._field_defaults
    scope = {"cls": cls, "new": tuple.__new__, "missing": _missing, "not_object": _not_object,
             "dict": dict, "tuple": tuple, "map": map}
    values = []
    for index, (name, required) in enumerate(fields(cls)):
        if name == "body":
            values.append("data")
            continue
        if required:
            value = f"data[{name!r}]"
        else:
            scope[f"d{index}"] = _default(cls, name, defaults)
            value = f"data.get({name!r}, d{index})"
        nested, in_tuple = _nested(hints[name])
        if nested is not None:
            scope[f"b{index}"] = _builder(nested)
            built = f"tuple(map(b{index}, v))" if in_tuple else f"b{index}(v)"
            value = f"({built} if (v := {value}) is not None else None)"
        values.append(value)
    made = "new(cls, ({},))" if not dataclasses.is_dataclass(cls) else "cls({})"
    source = "\n".join(["def build(data):",
                         "    if data.__class__ is not dict: not_object(cls, data)",
                         "    try:",
                         "        return " + made.format(", ".join(values)),
                         "    except KeyError as exc: missing(cls, exc)"])
    exec(compile(source, f"<answer {cls.__name__}>", "exec"), scope)  # pylint: disable=exec-used
    return scope["build"]


def _default(cls, name, defaults):
    if name in defaults:
        return defaults[name]
    field = cls.__dataclass_fields__[name]
    return field.default if field.default is not dataclasses.MISSING else field.default_factory()


def _nested(kind):
    """``(record class or None, whether a tuple of them)`` of the field type ``kind``."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if _is_record(kind):
        return kind, False
    if typing.get_origin(kind) is tuple and args and _is_record(args[0]):
        return args[0], True
    if len(args) == 1 and _is_record(args[0]):  # Optional[Record]
        return args[0], False
    return None, False


def _not_object(cls, data):
    raise errors.UpstreamError(f"expected {cls.__name__} as a JSON object, got "
                               f"{type(data).__name__}")


def _missing(cls, exc):
    raise errors.UpstreamError(f"{cls.__name__} answered without {exc.args[0]!r}") from None


# -- Resource Orchestrator (api-spec/ro.yaml) ----------------------------------------------------

@answer
class DeployedVnf:
    """One VNF of a deployment, where it runs."""

    SPEC: ClassVar = ("ro", "get", "/ro/v1/deployments/{deployment_id}", "200", "vnfs[]")
    name: str
    role: str
    region: str
    host: typing.Optional[str]
    address: str
    vcpus: int


@answer
class Deployment:
    """RO's deployment of a vCDN's SIG: its status, progress and where it serves."""

    SPEC: ClassVar = ("ro", "get", "/ro/v1/deployments/{deployment_id}", "200")
    id: str
    driver: str
    status: str
    steps: list
    error: typing.Optional[str]
    last_error: typing.Optional[str]
    sig_digest: typing.Optional[str]
    entry_point: typing.Optional[dict]
    region_endpoints: dict
    vnfs: tuple[DeployedVnf, ...]


@answer
class Calibration:
    """A calibration job of RO (the whole job in ``body``, what the API shows)."""

    SPEC: ClassVar = ("ro", "get", "/ro/v1/calibrations/{job_id}", "200")
    id: str
    state: str
    flavor: str
    host: str
    vcpus: list
    steps: list
    created_at: str
    updated_at: str
    error: typing.Optional[str]
    result: typing.Optional[dict] = None  # the list of jobs leaves it out
    body: dict = _body()


@row
class VnfHealth:
    """What RO's health check found of one VNF."""

    SPEC: ClassVar = ("ro", "get", "/ro/v1/deployments/{deployment_id}/health", "200", "vnfs[]")
    name: str
    role: str
    region: str
    healthy: bool
    detail: str
    lasting: bool = False


@row
class Health:
    """RO's health check of a deployment."""

    SPEC: ClassVar = ("ro", "get", "/ro/v1/deployments/{deployment_id}/health", "200")
    healthy: bool
    vnfs: tuple[VnfHealth, ...]


@row
class VnfFigures:
    """One VNF's load figures as RO read them (counters since it started)."""

    SPEC: ClassVar = ("ro", "get", "/ro/v1/deployments/{deployment_id}/metrics", "200", "vnfs[]")
    name: str
    role: str
    region: str
    host: typing.Optional[str]
    vcpus: int
    read_at: float
    active_connections: typing.Optional[int]
    requests: typing.Optional[int]
    cpu_seconds: typing.Optional[float]


@row
class Figures:
    """The load figures of a deployment's VNFs."""

    SPEC: ClassVar = ("ro", "get", "/ro/v1/deployments/{deployment_id}/metrics", "200")
    id: str
    vnfs: tuple[VnfFigures, ...]


@row
class TrafficMinute:
    """A balancer's requests of one minute (``status``: ``{"2xx": n, ...}``)."""

    SPEC: ClassVar = ("ro", "get", "/ro/v1/deployments/{deployment_id}/traffic", "200",
                      "regions[]", "minutes[]")
    minute: str
    requests: int
    bytes_out: int
    hits: int
    misses: int
    status: dict


@row
class BalancerTraffic:
    """What one region's balancer logged since the cursor (``lost``: records rotated away
    before they were read)."""

    SPEC: ClassVar = ("ro", "get", "/ro/v1/deployments/{deployment_id}/traffic", "200",
                      "regions[]")
    region: str
    vnf: str
    minutes: tuple[TrafficMinute, ...]
    records: int
    skipped: int
    lost: bool


@row
class Traffic:
    """A deployment's logged requests since a cursor, and the cursor to send next."""

    SPEC: ClassVar = ("ro", "get", "/ro/v1/deployments/{deployment_id}/traffic", "200")
    id: str
    cursor: str
    more: bool
    regions: tuple[BalancerTraffic, ...]


@row
class Readings:
    """A deployment's health, load figures and traffic in one answer (``traffic`` None with
    ``traffic_error`` when its logs could not be read)."""

    SPEC: ClassVar = ("ro", "get", "/ro/v1/deployments/{deployment_id}/readings", "200")
    id: str
    health: Health
    metrics: Figures
    traffic: typing.Optional[Traffic]
    traffic_error: typing.Optional[str]


@row
class ReadError:
    """Why RO could not read one deployment of a many-deployment read."""

    SPEC: ClassVar = ("ro", "post", "/ro/v1/readings", "200", "readings[]", "oneOf:1", "error")
    status: int
    message: str


@row
class Unread:
    """A deployment of a many-deployment read that RO could not read."""

    SPEC: ClassVar = ("ro", "post", "/ro/v1/readings", "200", "readings[]", "oneOf:1")
    id: str
    error: ReadError


@answer
class CacheResult:
    """One cache's part in a purge or prefetch."""

    SPEC: ClassVar = ("ro", "post", "/ro/v1/deployments/{deployment_id}/invalidations", "200",
                      "caches[]")
    name: str
    region: str
    ok: bool
    requests: int
    done: int
    detail: str
    seconds: float


@answer
class CacheResults:
    """RO's answer to a purge or prefetch, once every cache confirmed or failed."""

    SPEC: ClassVar = ("ro", "post", "/ro/v1/deployments/{deployment_id}/invalidations", "200")
    id: str
    caches: tuple[CacheResult, ...]


@answer
class ReconciledVnf:
    """What a reconciliation did to one VNF."""

    SPEC: ClassVar = ("ro", "get", "/ro/v1/reconciliations", "200", "reconciliations[]",
                      "actions[]")
    deployment: str
    vnf: typing.Optional[str]
    role: typing.Optional[str]
    action: str
    detail: str


@answer
class Reconciliation:
    """A reconciliation after a restore of the databases (the whole record in ``body``)."""

    SPEC: ClassVar = ("ro", "get", "/ro/v1/reconciliations", "200", "reconciliations[]")
    id: str
    cause: str
    status: str
    actions: tuple[ReconciledVnf, ...]
    error: typing.Optional[str]
    created_at: str
    finished_at: typing.Optional[str]
    body: dict = _body()


@answer
class Secret:
    """A reference RO keeps to a vCDN's certificate and key (never the key)."""

    SPEC: ClassVar = ("ro", "get", "/ro/v1/secrets", "200", "secrets[]")
    ref: str
    owner: str
    backend: str
    fingerprint_sha256: str
    created_at: str


@answer
class PowerDriver:
    """RO's host power driver, and whether it only records actions."""

    SPEC: ClassVar = ("ro", "get", "/ro/v1/power", "200")
    driver: str
    records_only: bool


@answer
class PowerAction:
    """What RO's host power driver did to a host."""

    SPEC: ClassVar = ("ro", "post", "/ro/v1/hosts/{host}/power", "200")
    host: str
    action: str
    state: str
    applied: bool
    steps: list
    driver: str


# -- Service Instance Descriptor Repository (api-spec/sidr.yaml) -------------------------------

@answer
class Template:
    """One version of a flavor's service template (``document``: the template itself)."""

    SPEC: ClassVar = ("sidr", "get", "/sidr/v1/templates/{flavor}/{version}", "200")
    flavor: str
    version: int
    description: str
    technology: str
    plugin: str
    deprecated: bool
    document: dict
    body: dict = _body()


# -- Service Orchestrator (api-spec/so.yaml, common.yaml) --------------------------------------


@row
class Lease:
    """When a vCDN serves."""

    SPEC: ClassVar = ("so", "get", "/so/v1/instances/{instance_id}", "200", "lease")
    start: str = None
    end: str = None


@row
class RequestedRegion:
    """A region of a vCDN as its tenant asked for it (``quality``: the target, a
    ``Quality`` object), with what was planned there."""

    SPEC: ClassVar = ("so", "get", "/so/v1/instances/{instance_id}", "200", "regions[]")
    name: str = None
    demand: int = None
    quality: dict = None

@row
class Instance:
    """A vCDN as SO records it (the whole representation in ``body``); a ``brief`` list
    gives only what the Instance Manager reads (``id`` to ``revision``; the rest None)."""

    SPEC: ClassVar = ("so", "get", "/so/v1/instances/{instance_id}", "200")
    id: str = None
    name: str = None
    tenant: str = None
    flavor: str = None
    template_version: int = None
    state: str = None
    lease: Lease = None
    regions: tuple[RequestedRegion, ...] = ()
    revision: int = None
    log_streams: list = None
    created_at: str = None
    updated_at: str = None
    body: dict = None


@answer
class Operation:
    """An operation of SO on a vCDN (the whole representation in ``body``)."""

    SPEC: ClassVar = ("so", "get", "/so/v1/operations/{operation_id}", "200")
    id: str = None
    vcdn_id: str = None
    type: str = None
    state: str = None
    body: dict = _body()


@answer
class Accepted:
    """SO's answer to a change of a vCDN: the vCDN and the operation that carries it out."""

    SPEC: ClassVar = ("so", "post", "/so/v1/instances", "202")
    vcdn: Instance = None
    operation: Operation = None
    body: dict = _body()


@answer
class Region:
    """A region of the operator (the whole representation in ``body``)."""

    SPEC: ClassVar = ("so", "get", "/so/v1/regions/{region}", "200")
    name: str = None
    description: str = None
    default: bool = None
    client_prefixes: list = None
    vim_region: typing.Optional[str] = None
    zone: typing.Optional[str] = None
    hosts: int = None
    vcpus: int = None
    body: dict = _body()


@answer
class Host:
    """A registered host (the whole representation in ``body``)."""

    SPEC: ClassVar = ("so", "get", "/so/v1/regions/{region}/hosts", "200", "hosts[]")
    name: str = None
    region: str = None
    vcpus: int = None
    ram_mb: int = None
    idle_watts: float = None
    peak_watts: float = None
    enabled: bool = None
    reserved_vcpus: int = 0
    body: dict = _body()


@answer
class Price:
    """The price of usage figures from the operator's price table."""

    SPEC: ClassVar = ("so", "post", "/so/v1/prices", "200")
    amount: float = None
    currency: str = None
    breakdown: dict = None
    body: dict = _body()


# -- Instance Manager (api-spec/im.yaml) -------------------------------------------------------

@answer
class UsageFigures:
    """What a vCDN used in a region (``name``) or in total (``name`` None)."""

    SPEC: ClassVar = ("im", "get", "/im/v1/vcdns/{vcdn_id}/usage", "200", "regions[]")
    name: str = None
    requests: int = None
    bytes_out: int = None
    gb: float = None
    hits: int = None
    misses: int = None
    hit_ratio: typing.Optional[float] = None
    status: dict = None
    viewer_hours: float = None
    vcpu_hours: float = None
    kwh: float = None
    body: dict = _body()


@answer
class Usage:
    """A vCDN's usage within a window, per region and in total."""

    SPEC: ClassVar = ("im", "get", "/im/v1/vcdns/{vcdn_id}/usage", "200")
    vcdn_id: str = None
    regions: tuple[UsageFigures, ...] = ()
    total: UsageFigures = None
    body: dict = _body()


@answer
class MeasuredRegion:
    """A region of a vCDN at the IM's latest pass."""

    SPEC: ClassVar = ("im", "get", "/im/v1/vcdns", "200", "vcdns[]", "regions[]")
    name: str = None
    viewers: float = None
    mos: typing.Optional[float] = None
    vcpus: float = None
    watts: typing.Optional[float] = None


@answer
class Measured:
    """A vCDN's figures at the IM's latest pass, with its regions'."""

    SPEC: ClassVar = ("im", "get", "/im/v1/vcdns", "200", "vcdns[]")
    vcdn_id: str = None
    at: str = None
    viewers: float = None
    watts: typing.Optional[float] = None
    energy_wh: typing.Optional[float] = None
    regions: tuple[MeasuredRegion, ...] = ()


#: every answer record, for the test that checks them against ``api-spec/``
RECORDS = (DeployedVnf, Deployment, Calibration, VnfHealth, Health, VnfFigures, Figures,
           TrafficMinute, BalancerTraffic, Traffic, Readings, ReadError, Unread, CacheResult,
           CacheResults, ReconciledVnf, Reconciliation, Secret, PowerDriver, PowerAction,
           Template, Lease, RequestedRegion, Instance, Operation, Accepted, Region, Host, Price,
           UsageFigures, Usage, MeasuredRegion, Measured)
