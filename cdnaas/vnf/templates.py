"""The templates a VNF's config renders from: the project's ``templates/`` and, first, the
flavor plugin's own (:func:`flavor_config`), with the plugin's extra variables checked
(:func:`extra_variables`)."""
import dataclasses
import functools
import re
from pathlib import Path

import jinja2

from cdnaas.common import config, plugins
from cdnaas.vnf import fields
from cdnaas.vnf.fields import ConfigError

CACHE_TEMPLATE = "nginx-cache.conf.j2"
LB_TEMPLATE = "nginx-lb.conf.j2"
DNS_TEMPLATE = "dnsmasq-geo.conf.j2"
STEERING_TEMPLATE = "nft-geo-steering.nft.j2"
#: The project's templates: the stock ones above and the pieces flavor templates include.
TEMPLATES_DIR = config.REPO_ROOT / "templates"

_TEMPLATE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,123}\.j2")
_VARIABLE = re.compile(r"[a-z][a-z0-9_]{0,62}")
_WORD = re.compile(r"[A-Za-z0-9_.:/+,=-]{1,256}")


@dataclasses.dataclass(frozen=True)
class FlavorConfig:
    """What a vCDN's flavor chooses of a VNF's main configuration (:func:`flavor_config`).

    :param template: the file that renders it (None: the role's stock template).
    :param folders: folders searched, in order, before the project's ``templates/``
        (the flavor plugin's own ``templates/``).
    :param extra: the plugin's ``boot_config`` variables, checked when rendering
        (:func:`extra_variables`).
    """

    template: str | None = None
    folders: tuple = ()
    extra: dict = dataclasses.field(default_factory=dict)


def flavor_config(sig, vnf) -> FlavorConfig | None:
    """What ``sig``'s flavor chooses for ``vnf``: the first of its ``config_templates``
    (the others are pieces that one includes), found in the ``templates/`` folder of the
    SIG's plugin, then the project's, rendered with the plugin's ``boot_config(vnf, sig)``
    besides the usual values. None: the stock config of the VNF's role (a SIG that names
    neither a plugin nor a template).

    :raises ConfigError: the plugin is not installed here (after looking again) or its
        ``boot_config`` failed.
    """
    template = vnf.config_templates[0] if vnf.config_templates else None
    if sig.plugin is None:
        return None if template is None else FlavorConfig(template=template)
    try:
        plugin = plugins.load(plugins.FLAVORS, sig.plugin)
    except LookupError as exc:
        raise ConfigError(f"cannot configure {vnf.name}: {exc}") from None
    try:
        extra = plugin.boot_config(vnf, sig)
    except Exception as exc:  # the plugin's own code: its failure is the VNF's config error
        raise ConfigError(f"plugin {sig.plugin}: boot_config of {vnf.name} failed: "
                          f"{type(exc).__name__}: {exc}") from exc
    return FlavorConfig(template=template, folders=(str(plugin.templates_folder()),),
                        extra=extra)


class _FolderLoader(jinja2.BaseLoader):
    """Templates by plain file name (``[A-Za-z0-9_][A-Za-z0-9_.-]*.j2``: no folder, no
    ``..``) from the first of ``folders`` that has the file; a file that is a symbolic
    link leading out of its folder is refused, not followed."""

    def __init__(self, folders):
        self.folders = tuple(Path(f) for f in folders)

    def get_source(self, environment, template):
        path = find_template(template, self.folders)
        if path is None:
            raise jinja2.TemplateNotFound(template)
        mtime = path.stat().st_mtime
        return (path.read_text(encoding="utf-8"), str(path),
                lambda: path.is_file() and path.stat().st_mtime == mtime)


def find_template(name, folders) -> Path | None:
    """The file of template ``name`` in the first of ``folders`` that has it, or None.

    :raises ConfigError: ``name`` is not a plain file name (``[A-Za-z0-9_][A-Za-z0-9_.-]*``
        ending in ``.j2``: no folder, no ``..``, not absolute), or the file found is a
        symbolic link leading out of its folder.
    """
    if not isinstance(name, str) or not _TEMPLATE_NAME.fullmatch(name):
        fields.refuse("template name", name, "is not a file name like nginx-cache.conf.j2 (A-Z, "
                                       "a-z, 0-9, _ . -, ending in .j2, no folder)")
    for folder in folders:
        base = Path(folder).resolve()
        path = (base / name).resolve()
        if not path.is_relative_to(base):
            fields.refuse("template", name, f"in {folder} is a link out of its folder; put the "
                                      "file itself there")
        if path.is_file():
            return path
    return None


@functools.cache
def _environment(folders):
    return jinja2.Environment(
        loader=_FolderLoader(folders), undefined=jinja2.StrictUndefined, autoescape=False,
        keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)


def render(template_name: str, **values) -> str:
    """Render ``templates/<template_name>`` with ``values`` as they are (no validation).

    Prefer the functions below, which validate first.

    :raises jinja2.UndefinedError: the template uses a value not given.
    :raises ConfigError: the template (or a piece it includes) is missing, its name is
        not a plain file name, or it does not parse.
    """
    return _render(template_name, (str(TEMPLATES_DIR),), values)


def render_flavored(template_name: str, flavor: FlavorConfig | None, **values) -> str:
    """:func:`render` what the vCDN's flavor chooses instead (:func:`flavor_config`):
    its template (``template_name`` when it names none), found first in its folders,
    with its extra variables added to ``values`` once checked (:func:`extra_variables`).

    :raises: as :func:`render`, and ConfigError for a refused extra variable.
    """
    if flavor is None:
        return render(template_name, **values)
    return _render(flavor.template or template_name,
                   (*map(str, flavor.folders), str(TEMPLATES_DIR)),
                   {**values, **extra_variables(flavor.extra, values)})


def _render(template_name, folders, values):
    try:
        return _environment(folders).get_template(template_name).render(**values)
    except jinja2.TemplateNotFound as exc:
        raise ConfigError(f"template {exc.name!r} is in none of {', '.join(folders)}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"template {exc.name or template_name!r} line {exc.lineno}: "
                          f"{exc.message}") from None


def extra_variables(extra, given) -> dict:
    """``extra`` (a plugin's ``boot_config``) checked, to render beside the values
    ``given``: at most 64 names of ``[a-z][a-z0-9_]*`` (none of ``given``); values bool,
    int (32-bit), a string of ``A-Z a-z 0-9 _ . : / + , = -`` (1 to 256, nothing that
    could end or add an nginx or dnsmasq directive), or a list of at most 64 of those.

    :raises ConfigError: naming the variable and what is wrong with it.
    """
    if not isinstance(extra, dict) or len(extra) > 64:
        fields.refuse("boot_config", extra, "is not a dict of at most 64 variables")
    checked = {}
    for name, value in extra.items():
        if not isinstance(name, str) or not _VARIABLE.fullmatch(name):
            fields.refuse("boot_config variable", name, "is not a name of a-z, 0-9 and _ "
                                                  "(letter first, at most 63)")
        if name in given:
            fields.refuse("boot_config variable", name, "would replace a value every template "
                                                  "gets; give it another name")
        field = f"boot_config variable {name}"
        if isinstance(value, (list, tuple)):
            if len(value) > 64:
                fields.refuse(field, value, "is a list of more than 64 values")
            checked[name] = [_extra_scalar(f"{field}[{i}]", v) for i, v in enumerate(value)]
        else:
            checked[name] = _extra_scalar(field, value)
    return checked


def _extra_scalar(field, value):
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return fields.integer(field, value, -(1 << 31), (1 << 31) - 1)
    return fields.match(field, value, _WORD, "is not a bool, an int or a string of A-Z, a-z, "
                                       "0-9, _ . : / + , = - (1 to 256)")


