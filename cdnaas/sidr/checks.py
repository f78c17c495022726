"""What SIDR checks of a template beyond its schema, with the real parts: its plugin is
installed, each VNF role's ``config_templates`` are files of the plugin's
``templates/`` folder or the project's, and the first (the role's main config) renders
with sample values and the plugin's ``boot_config`` and passes the tool that will run
it (``nginx -t`` for caches and balancers, ``dnsmasq --test`` for DNS).

The sample is a vCDN of one region with one VNF of each role at the template's
smallest size, listening on 127.0.0.1 and free ports (``nginx -t`` binds them), so
the checks need no root and no network namespace; a cache is checked towards an
``http`` and an ``https`` origin (a template may render them differently). The three
roles take a few tens of milliseconds.
"""
import contextlib
import tempfile

import jinja2

from cdnaas.common import errors, plugins, slicing
from cdnaas.common.ports import free_loopback_ports
from cdnaas.common.sig import Origin, RegionPlan, ServiceInstanceGraph, Vnf
from cdnaas.vnf import fields, templates, tools
from cdnaas.vnf.balancer import balancer_of
from cdnaas.vnf.cache import cache_of
from cdnaas.vnf.geodns import dns_of

SAMPLE_REGION = "sample"
_ORIGINS = (Origin("http", "127.0.0.1", 8080), Origin("https", "origin.example.net", 443))


def installed_plugin(document):
    """The plugin ``document`` names (installed distributions are read again on a miss).

    :raises cdnaas.common.errors.Unprocessable: naming field ``plugin``.
    """
    try:
        return plugins.load(plugins.FLAVORS, document["plugin"])
    except LookupError as exc:
        raise unprocessable([{"field": "plugin", "problem": (
            f"{exc}; install the plugin's package (pip install) where SO, RO, IM and SIDR "
            "run, then register the template again")}]) from None


def config_problems(document, plugin):
    """Every problem of ``document``'s config templates: ``[{field, problem}]``, each
    field like ``vnfs.cache.config_templates[0]``."""
    try:
        slicing.slice_bytes(document.get("slice_size", slicing.DEFAULT))
    except errors.BadRequest as exc:
        return [{"field": exc.field, "problem": exc.message}]
    sig = sample_sig(document)
    folders = (plugin.templates_folder(), templates.TEMPLATES_DIR)
    problems = []
    for role, spec in document["vnfs"].items():
        names = spec["config_templates"]
        missing = [{"field": f"vnfs.{role}.config_templates[{index}]", "problem": problem}
                   for index, name in enumerate(names)
                   if (problem := _file_problem(name, folders))]
        if missing:
            problems += missing
            continue
        field = f"vnfs.{role}.config_templates[0]" if names else f"vnfs.{role}.config_templates"
        try:
            _SAMPLES[role](sig, sig.vnfs_in(role=role)[0])
        except (fields.ConfigError, jinja2.TemplateError) as exc:
            what = names[0] if names else "the stock template"
            why = f"{type(exc).__name__}: {exc}" if isinstance(exc, jinja2.TemplateError) \
                else str(exc)
            problems.append({"field": field, "problem": (
                f"{what} does not give a working {role} config with sample values: {why}; "
                "fix the template (docs/flavor-plugins.md lists the variables every "
                "template gets)")})
    return problems


def check_configs(document, plugin):
    """:func:`config_problems`, raised.

    :raises cdnaas.common.errors.Unprocessable: listing every problem.
    """
    problems = config_problems(document, plugin)
    if problems:
        raise unprocessable(problems)


def unprocessable(problems):
    """A 422 naming the first problem's field and listing them all."""
    summary = "; ".join(f"{p['field']}: {p['problem']}" for p in problems)
    return errors.Unprocessable(summary, field=problems[0]["field"], details=problems)


def sample_sig(document):
    """A one-region vCDN of ``document``'s flavor: one VNF of each role, smallest size."""
    vnfs = [Vnf(name=f"{SAMPLE_REGION}-{role.replace('_', '-')}-0", role=role,
                region=SAMPLE_REGION, host="sample-host",
                vcpus=max(1, min(spec["vcpus"]["min"], 64)), ram_mb=spec["ram_mb"]["min"],
                image=spec["image"], config_templates=list(spec["config_templates"]))
            for role, spec in document["vnfs"].items()]
    return ServiceInstanceGraph(
        vcdn_id="sample", flavor=document["flavor"], template_version=document["version"],
        hostname="sample.cdn.example.net", origin=_ORIGINS[0], default_region=SAMPLE_REGION,
        regions=[RegionPlan(name=SAMPLE_REGION, zone=None, vim_region=None,
                            client_prefixes=["10.0.0.0/8"], demand=1000,
                            quality={"min_mos": 4.0})],
        vnfs=vnfs, plugin=document["plugin"],
        service={"slice_size": document["slice_size"]} if "slice_size" in document else {})


def _file_problem(name, folders):
    try:
        if templates.find_template(name, folders) is None:
            return (f"no file {name} in the plugin's templates folder ({folders[0]}) or the "
                    f"project's ({folders[1]}); ship it in the plugin package's templates/")
    except fields.ConfigError as exc:
        return str(exc)
    return None


def _check_cache(sig, vnf):
    for origin in _ORIGINS:
        port, management = free_loopback_ports(2)
        with _scratch() as prefix:
            text = cache_of(sig, vnf, listen_address="127.0.0.1", listen_port=port,
                            management_port=management, origin=origin,
                            origin_address="127.0.0.1", prefix_dir=prefix,
                            management_sources=["127.0.0.1"])
            tools.check_nginx(text, prefix)


def _check_balancer(sig, vnf):
    cache = sig.vnfs_in(role="cache")[0]
    port, management, member = free_loopback_ports(3)
    with _scratch() as prefix:
        text = balancer_of(sig, vnf, listen_address="127.0.0.1", listen_port=port,
                           management_port=management,
                           members=[(cache.name, "127.0.0.1", member)], prefix_dir=prefix,
                           management_sources=["127.0.0.1"])
        tools.check_nginx(text, prefix)


def _check_dns(sig, vnf):
    (port,) = free_loopback_ports(1)
    with _scratch() as prefix:
        tools.check_dnsmasq(dns_of(sig, vnf, SAMPLE_REGION, answer_address="127.0.0.1",
                                   listen_addresses=["127.0.0.1"], port=port,
                                   prefix_dir=prefix))


_SAMPLES = {"cache": _check_cache, "load_balancer": _check_balancer, "dns": _check_dns,
            "shield": _check_cache}


@contextlib.contextmanager
def _scratch():
    with tempfile.TemporaryDirectory(prefix="cdnaas-sidr-check-") as folder:
        yield folder
