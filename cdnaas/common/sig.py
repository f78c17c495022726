"""The Service Instance Graph (SIG): what SO plans and RO deploys.

Its JSON form is documented by ``api-spec/sig.schema.json`` and checked
against it whenever a SIG crosses a service boundary.
"""
import collections
import dataclasses
import functools
import hashlib
import json

import jsonschema

from cdnaas.common import config, errors

ROLES = ("cache", "load_balancer", "dns", "shield")


@dataclasses.dataclass(frozen=True)
class Origin:
    """The content provider's origin server."""

    scheme: str
    host: str
    port: int

    @property
    def url(self):
        """``scheme://host:port``, an IPv6 host in brackets (as URLs and nginx write it)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


@dataclasses.dataclass
class RegionPlan:
    """A region of the vCDN: where it maps in the VIM, who its clients are, what it must serve."""

    name: str
    zone: str | None
    vim_region: str | None
    client_prefixes: list[str]
    demand: int
    quality: dict


@dataclasses.dataclass
class Vnf:
    """One VNF instance placed on a host of a region."""

    name: str
    role: str
    region: str
    host: str | None
    vcpus: int
    ram_mb: int
    image: str
    config_templates: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ServiceInstanceGraph:
    """VNF instances of one vCDN, placed on hosts of its regions."""

    vcdn_id: str
    flavor: str
    template_version: int
    hostname: str
    origin: Origin
    default_region: str
    regions: list[RegionPlan]
    vnfs: list[Vnf]
    #: what the vCDN serves beyond its VNFs (``cache_rules``, ``hostnames``, ``tls``), as
    #: the SIG schema's ``service``; empty: the flavor's defaults, HTTP on ``hostname``
    service: dict = dataclasses.field(default_factory=dict)
    #: entry-point name of the flavor's plugin, whose ``templates/`` folder and
    #: ``boot_config`` RO uses to render the VNFs' ``config_templates``; None (SIGs
    #: planned before plugins chose configs): the project's templates only
    plugin: str | None = None

    def vnfs_in(self, region=None, role=None):
        """VNFs of ``region`` and/or ``role``, in SIG order."""
        return [v for v in self.vnfs
                if (region is None or v.region == region) and (role is None or v.role == role)]

    def region(self, name):
        return next(r for r in self.regions if r.name == name)

    def to_dict(self):
        """The JSON form; ``service`` and ``plugin`` only when set, so a SIG without them
        keeps the form (and :meth:`digest`) it had before they existed."""
        data = dataclasses.asdict(self)
        if not data["service"]:
            del data["service"]
        if data["plugin"] is None:
            del data["plugin"]
        return data

    def digest(self):
        """:func:`digest` of this SIG: what SO and RO compare to agree on what serves."""
        return digest(self.to_dict())

    @classmethod
    def from_dict(cls, data, field_prefix=None):
        """Build a SIG from its JSON form.

        :param field_prefix: where the SIG sits in a request body (e.g. ``sig``),
            to name fields in errors.
        :raises cdnaas.common.errors.BadRequest: the document breaks the SIG schema
            or its cross-references (unique names, declared regions).
        """
        validate(data, field_prefix)
        return cls.from_record(data)

    @classmethod
    def from_record(cls, data):
        """Build a SIG from the JSON form a service stored after validating it.

        Not validated again: a SIG of a large vCDN takes milliseconds to check, and
        its record is read on every view of the vCDN.
        """
        return cls(
            vcdn_id=data["vcdn_id"], flavor=data["flavor"],
            template_version=data["template_version"], hostname=data["hostname"],
            origin=Origin(**data["origin"]), default_region=data["default_region"],
            regions=[RegionPlan(**r) for r in data["regions"]],
            vnfs=[Vnf(**v) for v in data["vnfs"]], service=dict(data.get("service") or {}),
            plugin=data.get("plugin"))


def digest(document):
    """SHA-256 (hex) of a SIG's JSON form, keys sorted: equal for equal SIGs."""
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


@functools.cache
def schema():
    """The SIG JSON Schema from ``api-spec/``."""
    with open(config.REPO_ROOT / "api-spec" / "sig.schema.json", encoding="utf-8") as handle:
        return json.load(handle)


@functools.cache
def _validator():
    return jsonschema.Draft202012Validator(schema())


def validate(data, field_prefix=None):
    """Raise :class:`BadRequest` listing every way ``data`` is not a valid SIG."""
    problems = [(".".join(map(str, e.absolute_path)), e.message)
                for e in sorted(_validator().iter_errors(data), key=lambda e: list(e.absolute_path))]
    if not problems:
        problems = _reference_problems(data)
    if problems:
        details = [{"field": ".".join(filter(None, [field_prefix, field])) or "sig",
                    "problem": problem} for field, problem in problems]
        raise errors.BadRequest("invalid SIG: " + "; ".join(f"{d['field']}: {d['problem']}"
                                                            for d in details),
                                field=details[0]["field"], details=details)


def _reference_problems(data):
    """What the schema cannot say: names unique, every VNF in a declared region."""
    regions = collections.Counter(r["name"] for r in data["regions"])
    problems = [(f"regions.{i}.name", f"region {r['name']} is declared twice")
                for i, r in enumerate(data["regions"]) if regions[r["name"]] > 1]
    if data["default_region"] not in regions:
        problems.append(("default_region", f"{data['default_region']} is not one of the regions"))
    names = collections.Counter(v["name"] for v in data["vnfs"])
    for i, vnf in enumerate(data["vnfs"]):
        if names[vnf["name"]] > 1:
            problems.append((f"vnfs.{i}.name", f"VNF name {vnf['name']} is used twice"))
        if vnf["region"] not in regions:
            problems.append((f"vnfs.{i}.region", f"{vnf['region']} is not one of the regions"))
    return problems
