"""Flavor plugins made on the spot for tests, found as installed ones are.

:func:`installed_plugin` writes a package and its ``.dist-info`` (with a
``cdnaas.flavors`` entry point) into a folder on ``sys.path``, which is all
``importlib.metadata`` looks at: the in-process services find it by re-scanning,
as they find a package ``pip`` installed after they started. End-to-end tests
install a real package with pip instead (``tests/system/test_flavor_packages.py``).
"""
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SMALL_OBJECTS = REPO / "examples" / "cdnaas-small-objects"


def installed_plugin(site, name, templates=None, boot_config="{}", base="static"):
    """Write plugin ``name`` into folder ``site`` (already on ``sys.path``).

    :param templates: ``{file name: text}`` of its ``templates/`` folder.
    :param boot_config: Python expression its ``boot_config(vnf, sig)`` returns.
    :param base: the in-tree plugin its planning comes from (``static``).
    :returns: the package's folder.
    """
    module = "cdnaas_test_" + name.replace("-", "_")
    package = Path(site) / module
    (package / "templates").mkdir(parents=True)
    for file_name, text in (templates or {}).items():
        (package / "templates" / file_name).write_text(text)
    base_class = {"static": "StaticFlavor", "qoe-video": "QoeVideoFlavor"}[base]
    base_module = base.replace("-", "_")
    (package / "__init__.py").write_text(textwrap.dedent(f'''\
        from cdnaas_plugins.{base_module}.plugin import {base_class}


        class Plugin({base_class}):
            name = {name!r}

            def boot_config(self, vnf, sig):
                return {boot_config}
        '''))
    info = Path(site) / f"{module}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[cdnaas.flavors]\n{name} = {module}:Plugin\n")
    return package
