"""A vCDN's flavor as the Instance Manager needs it: template, plugin and performance model.

A template version never changes once stored, so each is fetched from SIDR
once per process. The model file is named by the template, relative to the
plugin's folder or the operator's ``CDNAAS_MODEL_DIRS`` (found by
:func:`cdnaas.planning.models.resolve`, which keeps it inside them), and read
again when it changes (an operator's calibration); a template that names none
(the static flavor) has no QoE estimate.
"""
import dataclasses
import logging
import threading
from pathlib import Path

from cdnaas.common import plugins
from cdnaas.planning import models

LOG = logging.getLogger(__name__)

_cache = {}
_cache_lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class Flavor:
    """What the IM uses of a vCDN's flavor."""

    template: dict
    plugin: object  # a cdnaas.common.flavor.FlavorPlugin
    plugin_folder: Path

    @property
    def technology(self):
        return self.template["technology"]

    def model(self):
        """The template's :class:`~cdnaas.planning.models.Model`; None if it names none
        or the file is unusable (logged)."""
        if not self.template.get("model"):
            return None
        try:
            return models.named(self.template["model"], self.plugin_folder)
        except models.ModelError as exc:
            LOG.warning("flavor %s: no QoE estimate, its model is unusable: %s",
                        self.template["flavor"], exc)
            return None


def of(vcdn, sidr):
    """The :class:`Flavor` of ``vcdn`` (an SO instance view).

    :raises LookupError: its plugin is not installed here.
    :raises cdnaas.common.errors.CdnaasError: SIDR could not give the template.
    """
    key = (sidr.base_url, vcdn.flavor, vcdn.template_version)
    with _cache_lock:
        found = _cache.get(key)
    if found is None:
        template = sidr.get_template(vcdn.flavor, vcdn.template_version).document
        plugin = plugins.load(plugins.FLAVORS, template["plugin"])
        found = Flavor(template=template, plugin=plugin, plugin_folder=models.plugin_folder(plugin))
        with _cache_lock:
            _cache[key] = found
    return found

