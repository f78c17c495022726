"""The answers of the internal services that callers read, as small typed records.

In the manner of openstacksdk's resources, a client of :mod:`cdnaas.common.clients`
returns one of these in place of the JSON it received: callers read ``deployment.status``,
not ``deployment["status"]``. Each class names in ``SPEC`` the answer of ``api-spec/`` it
models (``(document, method, path, status)``); a unit test resolves that schema and checks
that every field is one of its properties, required where the field has no default.

Built by :func:`from_json`, one generic helper over :func:`dataclasses.fields`: keys the
record does not model are left out (a service may add some), a nested record is built from
its object, ``tuple[Record, ...]`` from a list. A record with a ``body`` field keeps the
whole JSON there too (what a proxy such as the customer API forwards unchanged).
"""
import dataclasses
import functools
import typing
from typing import ClassVar

from cdnaas.common import errors


def from_json(cls, data):
    """An instance of the answer dataclass ``cls`` from the decoded JSON object ``data``.

    :raises cdnaas.common.errors.UpstreamError: ``data`` is no object or lacks a field
        ``cls`` requires (the peer answered what its document does not say).
    """
    if not isinstance(data, dict):
        raise errors.UpstreamError(f"expected {cls.__name__} as a JSON object, got "
                                   f"{type(data).__name__}")
    values = {}
    for field, kind in _fields(cls):
        if field.name == "body":
            values["body"] = data
        elif field.name in data:
            values[field.name] = _value(kind, data[field.name])
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise errors.UpstreamError(f"{cls.__name__} answered without {field.name!r}")
    return cls(**values)


def many(cls, items):
    """:func:`from_json` of each object of the list ``items``, as a list."""
    return [from_json(cls, item) for item in items]


@functools.cache
def _fields(cls):
    hints = typing.get_type_hints(cls)
    return tuple((field, hints[field.name]) for field in dataclasses.fields(cls))


def _value(kind, value):
    """``value`` as the field type ``kind`` wants: a record, a tuple of records, or as is."""
    if value is None:
        return None
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if dataclasses.is_dataclass(kind):
        return from_json(kind, value)
    if typing.get_origin(kind) is tuple and args and dataclasses.is_dataclass(args[0]):
        return tuple(from_json(args[0], item) for item in value)
    if len(args) == 1 and dataclasses.is_dataclass(args[0]):  # Optional[Record]
        return from_json(args[0], value)
    return value


def answer(cls):
    """Make ``cls`` an answer record: a frozen dataclass with slots."""
    return dataclasses.dataclass(frozen=True, slots=True)(cls)


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
    body: dict = dataclasses.field(default=None, repr=False, compare=False)


# -- Service Instance Descriptor Repository (api-spec/sidr.yaml) -------------------------------

@answer
class Template:
    """One version of a flavor's service template (``document``: the template itself)."""

    SPEC: ClassVar = ("sidr", "get", "/sidr/v1/templates/{flavor}/{version}", "200")
    flavor: str
    version: int
    technology: str
    plugin: str
    deprecated: bool
    document: dict
    body: dict = dataclasses.field(default=None, repr=False, compare=False)


# -- Service Orchestrator (api-spec/so.yaml, common.yaml) --------------------------------------

@answer
class Instance:
    """A vCDN as SO records it (the whole representation in ``body``)."""

    SPEC: ClassVar = ("so", "get", "/so/v1/instances/{instance_id}", "200")
    id: str = None
    tenant: str = None
    flavor: str = None
    state: str = None
    revision: int = None
    log_streams: list = None
    created_at: str = None
    body: dict = dataclasses.field(default=None, repr=False, compare=False)


@answer
class Operation:
    """An operation of SO on a vCDN (the whole representation in ``body``)."""

    SPEC: ClassVar = ("so", "get", "/so/v1/operations/{operation_id}", "200")
    id: str = None
    vcdn_id: str = None
    type: str = None
    state: str = None
    body: dict = dataclasses.field(default=None, repr=False, compare=False)


@answer
class Accepted:
    """SO's answer to a change of a vCDN: the vCDN and the operation that carries it out."""

    SPEC: ClassVar = ("so", "post", "/so/v1/instances", "202")
    vcdn: Instance = None
    operation: Operation = None
    body: dict = dataclasses.field(default=None, repr=False, compare=False)


#: every answer record, for the test that checks them against ``api-spec/``
RECORDS = (DeployedVnf, Deployment, Calibration, Template, Instance, Operation, Accepted)
