"""SIDR's logic: validate and store service templates; find, deprecate and delete them.

A template (parsed once, by the body gate: :func:`cdnaas.common.bodies.current_document`)
is checked before it is stored: against ``api-spec/service-template.schema.json``
(JSON Schema 2020-12), then for the rules that schema cannot express (see
:func:`semantic_problems`), then with the real parts (:mod:`cdnaas.sidr.checks`): its
plugin is installed, its model and config templates are files of the plugin's folder
(or the project's), and each role's config renders and passes ``nginx -t`` or
``dnsmasq --test``. Every problem of a step is reported at once, so an operator fixes
a template in one go.

A deprecated version is not offered for new vCDNs (the latest offered version is the
highest not deprecated) and keeps serving the vCDNs made of it; a version is deleted
only when SO says no vCDN but DELETED ones uses it.
"""
import functools
import json
import logging

import jsonschema
from sqlalchemy.exc import IntegrityError

from cdnaas.common import config, errors
from cdnaas.common.sig import ROLES
from cdnaas.planning import models
from cdnaas.sidr import checks, repository
from cdnaas.sidr.models import Template, utcnow
from cdnaas.vnf import subnet

LOG = logging.getLogger(__name__)

BOUNDS = ("instances", "vcpus", "ram_mb")
AT_LEAST_ONE = {"cache": "a vCDN needs at least one cache in every requested region",
                "load_balancer": "every requested region needs its load balancer",
                "dns": "a vCDN needs at least one DNS VNF to be reachable"}


def validate(document):
    """Check ``document`` against the template schema and the semantic rules.

    :raises cdnaas.common.errors.BadRequest: listing every problem in ``details``,
        each as ``{field, problem}`` with a dotted field path such as ``vnfs.cache.vcpus``.
    """
    problems = schema_problems(document) + semantic_problems(document)
    if problems:
        summary = "; ".join(f"{p['field']}: {p['problem']}" for p in problems)
        raise errors.BadRequest(f"the service template has {len(problems)} problem(s); fix them "
                                f"and register it again: {summary}",
                                field=problems[0]["field"], details=problems)


def schema_problems(document):
    """Ways ``document`` breaks ``api-spec/service-template.schema.json``, in document order."""
    validator = jsonschema.Draft202012Validator(template_schema())
    found = sorted(validator.iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path])
    problems = [problem for error in found for problem in _describe(error)]
    # jsonschema reports "required" once per missing field, _describe lists them all each time
    return list({(p["field"], p["problem"]): p for p in problems}.values())


def semantic_problems(document):
    """Rules the schema cannot express; parts with the wrong shape are left to the schema.

    - every bounds object has ``min <= max``;
    - cache, load_balancer and dns ``instances.min`` is at least 1;
    - an origin shield, where the template has one, is exactly one instance;
    - at most as many DNS instances as a region's subnet has DNS addresses
      (:data:`cdnaas.ro.vim.subnet.DNS_HOSTS`);
    - ``placement.max_host_share`` is only set with ``placement.objective: spread``.
    """
    if not isinstance(document, dict):
        return []
    problems = []
    vnfs = document.get("vnfs")
    for role in ROLES:
        vnf = vnfs.get(role) if isinstance(vnfs, dict) else None
        if not isinstance(vnf, dict):
            continue
        for name in BOUNDS:
            bounds = vnf.get(name)
            low, high = (bounds.get("min"), bounds.get("max")) if isinstance(bounds, dict) else (None, None)
            if _is_int(low) and _is_int(high) and low > high:
                problems.append({"field": f"vnfs.{role}.{name}",
                                 "problem": f"min ({low}) is greater than max ({high}); make min <= max"})
            if role == "shield" and name == "instances" and (low, high) != (1, 1) \
                    and _is_int(low) and _is_int(high):
                problems.append({"field": "vnfs.shield.instances",
                                 "problem": f"must be {{min: 1, max: 1}} (got {{min: {low}, "
                                            f"max: {high}}}): a vCDN has one origin shield; "
                                            "remove vnfs.shield for none"})
            elif name == "instances" and _is_int(low) and low < 1:
                problems.append({"field": f"vnfs.{role}.instances.min",
                                 "problem": f"must be at least 1 (got {low}): {AT_LEAST_ONE[role]}"})
            if role == "dns" and name == "instances" and _is_int(high) \
                    and high > len(subnet.DNS_HOSTS):
                problems.append({"field": "vnfs.dns.instances.max",
                                 "problem": f"must be at most {len(subnet.DNS_HOSTS)} (got "
                                            f"{high}): each DNS VNF has its own address in "
                                            "every region's subnet, and there are "
                                            f"{len(subnet.DNS_HOSTS)}"})
    placement = document.get("placement")
    if isinstance(placement, dict) and "max_host_share" in placement \
            and placement.get("objective", "fewest_hosts") != "spread":
        problems.append({"field": "placement.max_host_share",
                         "problem": "only applies with objective spread; set placement.objective "
                                    "to spread or remove max_host_share"})
    return problems


def register(database, document):
    """Validate and store a new template; return its representation.

    :raises cdnaas.common.errors.BadRequest: the template is invalid (every problem listed).
    :raises cdnaas.common.errors.Unprocessable: its plugin is not installed, its ``model``
        is not a file of its plugin's folder (:func:`check_model`), or its config
        templates are missing or do not work (:func:`cdnaas.sidr.checks.check_configs`).
    :raises cdnaas.common.errors.Conflict: its flavor already has that version.
    """
    validate(document)
    plugin = checks.installed_plugin(document)
    check_model(document)
    checks.check_configs(document, plugin)
    flavor, version = document["flavor"], document["version"]
    with database.transaction() as session:
        if repository.find(session, flavor, version) is not None:
            raise _duplicate(flavor, version, repository.latest(session, flavor).version)
        template = Template(flavor=flavor, version=version, description=document["description"],
                            plugin=document["plugin"], document=document)
        try:
            repository.add(session, template)
        except IntegrityError as exc:  # registered concurrently since the check above
            raise _duplicate(flavor, version, version) from exc
    LOG.info("registered template %s version %s (plugin %s)", flavor, version, template.plugin)
    return template.to_dict()


def check_model(document):
    """A template's ``model`` (when not null) names a model file inside its plugin's folder
    or the operator's ``CDNAAS_MODEL_DIRS`` (:func:`cdnaas.planning.models.resolve`): a
    relative path, no ``..``, no symbolic link out. The file is not read here; SO reads
    it when it plans, and says only what is wrong with it, never what it holds.

    :raises cdnaas.common.errors.Unprocessable: naming field ``model`` (or ``plugin``,
        when no installed plugin has that name, so there is no folder to look in).
    """
    name = document.get("model")
    if name is None:
        return
    problem = models.name_problem(name)
    if problem is None:
        try:
            models.resolve(name, models.plugin_folder(checks.installed_plugin(document)))
        except models.ModelError as exc:
            problem = "; ".join(p for _field, p in exc.problems)
    if problem:
        raise checks.unprocessable([{"field": "model", "problem": problem}])


def list_templates(database, flavor=None):
    """Every stored version (of ``flavor`` only, when given), by flavor then version."""
    with database.sessions() as session:
        return [t.to_dict() for t in repository.all_versions(session, flavor)]


def get_template(database, flavor, version=None):
    """The template of ``flavor`` at ``version`` (deprecated or not), or its highest
    version not deprecated (the one offered) when omitted.

    :raises cdnaas.common.errors.NotFound: no such flavor or version, or every version
        is deprecated; the message lists what is stored.
    """
    with database.sessions() as session:
        template = repository.latest(session, flavor, offered=True) if version is None \
            else repository.find(session, flavor, version)
        if template is None:
            raise _missing(session, flavor, version)
        return template.to_dict()


def set_deprecated(database, flavor, version, deprecated):
    """Deprecate ``flavor``'s ``version`` (or offer it again); return the template.

    Deprecating a deprecated version keeps its first ``deprecated_at``.

    :raises cdnaas.common.errors.NotFound: no such flavor or version.
    """
    with database.transaction() as session:
        template = _stored(session, flavor, version)
        if not deprecated:
            template.deprecated_at = None
        elif template.deprecated_at is None:
            template.deprecated_at = utcnow()
        session.flush()
        found = template.to_dict()
    LOG.info("template %s version %s %s", flavor, version,
             "deprecated" if deprecated else "offered again")
    return found


def delete(database, flavor, version, users):
    """Delete ``flavor``'s ``version`` unless a vCDN uses it.

    :param users: ``(flavor, version) -> [Instance]`` (:class:`cdnaas.common.answers.Instance`
        records of ``id``, ``tenant`` and ``state``), the vCDNs not
        DELETED made of it (SO's answer: :meth:`cdnaas.common.clients.SoClient.template_users`).
    :raises cdnaas.common.errors.NotFound: no such flavor or version.
    :raises cdnaas.common.errors.Conflict: vCDNs use it (the first ten named).
    :raises cdnaas.common.errors.UpstreamError: SO could not say.
    """
    with database.sessions() as session:
        _stored(session, flavor, version)
    using = users(flavor, version)
    if using:
        named = ", ".join(f"{u.id} ({u.state})" for u in using[:10])
        problem = (f"{len(using)} vCDN(s) use template {flavor} version {version}: {named}"
                   f"{' ...' if len(using) > 10 else ''}; deprecate the version so no new vCDN "
                   "uses it and delete it once they are DELETED")
        raise errors.Conflict(problem, field="version",
                              details=[{"field": "version", "problem": problem}])
    with database.transaction() as session:
        repository.remove(session, _stored(session, flavor, version))
    LOG.info("deleted template %s version %s", flavor, version)


def _stored(session, flavor, version):
    template = repository.find(session, flavor, version)
    if template is None:
        raise _missing(session, flavor, version)
    return template


def _missing(session, flavor, version):
    """The NotFound of ``flavor`` at ``version`` (None: its offered version), saying what
    is stored."""
    stored = repository.all_versions(session, flavor)
    if not stored:
        known = sorted({t.flavor for t in repository.all_versions(session)})
        return errors.NotFound(f"no template for flavor {flavor!r}; register one with "
                               f"POST /sidr/v1/templates (known flavors: "
                               f"{', '.join(known) or 'none'})", field="flavor",
                               details=[{"field": "flavor",
                                         "problem": f"unknown flavor {flavor!r}"}])
    versions = ", ".join(str(t.version) for t in stored)
    if version is None:
        return errors.NotFound(f"every version of flavor {flavor!r} is deprecated ({versions}); "
                               "register a new version or offer one again", field="flavor",
                               details=[{"field": "flavor", "problem": "no version is offered"}])
    return errors.NotFound(f"flavor {flavor!r} has no version {version} (stored versions: "
                           f"{versions})", field="version",
                           details=[{"field": "version", "problem": f"use one of {versions}"}])


@functools.cache
def template_schema():
    """The service template JSON Schema from ``api-spec/``."""
    path = config.REPO_ROOT / "api-spec" / "service-template.schema.json"
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _describe(error):
    """Turn one jsonschema error into [{field, problem}] entries naming the exact field."""
    location = _path(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = sorted(error.schema.get("properties", {}))
        return [{"field": _join(location, str(name)),
                 "problem": f"unknown field; remove it (allowed here: {', '.join(known)})"}
                for name in error.instance if name not in known]
    if error.validator == "required" and isinstance(error.instance, dict):
        return [{"field": _join(location, name), "problem": "required field is missing; add it"}
                for name in error.validator_value if name not in error.instance]
    if error.validator == "enum":
        allowed = ", ".join(map(str, error.validator_value))
        return [{"field": location or "body",
                 "problem": f"{error.instance!r} is not allowed; use one of {allowed}"}]
    return [{"field": location or "body", "problem": error.message}]


def _path(parts):
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")


def _join(location, name):
    return f"{location}.{name}" if location else name


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _duplicate(flavor, version, latest):
    problem = (f"template {flavor} version {version} already exists; bump version "
               f"(to {latest + 1} or more) to register a changed template")
    return errors.Conflict(problem, field="version", details=[{"field": "version", "problem": problem}])
