"""The model a calibrated curve is compared with, and curves as points a chart draws.

The reference is the model the flavor's latest template names (``in use``: an earlier
calibration, say), else the paper's model the ``qoe-video`` plugin ships for the
technology (``paper``). Both ``cdnaas calibrate`` and the operator console show it.
"""
from cdnaas.common import plugins
from cdnaas.planning import models

#: the paper's models the qoe-video plugin ships, by technology (when a template names none)
SHIPPED = {"vm": "models/vm.yaml", "container": "models/container.yaml"}


def latest_document(templates):
    """The document of the latest of ``templates`` (SIDR's template list of one flavor), or {}."""
    latest = max(templates, key=lambda t: t["version"]) if templates else {}
    return latest.get("document") or {}


def plugin_without_model(templates):
    """The plugin of the flavor's latest template when it uses no performance model (a
    calibration would write a model nothing reads), else None (also when the plugin is not
    installed where this runs: SO's answer is the authority)."""
    name = latest_document(templates).get("plugin")
    if not templates or name is None:
        return None
    try:
        plugin = plugins.load(plugins.FLAVORS, name)
    except LookupError:
        return None
    return None if plugin.uses_model else name


def reference_model(templates, technology):
    """``(kind, Model)``: the model the latest of ``templates`` (SIDR's template list of
    the flavor) names (``in use``), else the paper's that the plugin ships (``paper``)."""
    document = latest_document(templates)
    named = document.get("model")
    try:
        plugin = plugins.load(plugins.FLAVORS, document.get("plugin", "qoe-video"))
        model = models.named(named or SHIPPED[technology], models.plugin_folder(plugin))
        return ("paper" if named in (None, *SHIPPED.values()) else "in use"), model
    except (models.ModelError, RuntimeError, KeyError):
        qoe_video = plugins.load(plugins.FLAVORS, "qoe-video")
        return "paper", models.named(SHIPPED[technology], models.plugin_folder(qoe_video))


def curve_points(label, model):
    """``{"label", "model", "points": [{"viewers_per_vcpu", "mos"}]}``: a model's QoE curve
    (its points, as the planner interpolates between them)."""
    return {"label": label, "model": model.name,
            "points": [{"viewers_per_vcpu": x, "mos": y}
                       for x, y in zip(model.qoe.xs, model.qoe.ys)]}
