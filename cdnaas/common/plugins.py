"""Loading flavor plugins and VIM drivers by entry-point name (stevedore)."""
from stevedore import driver as stevedore_driver
from stevedore import extension
from stevedore.exception import NoMatches

FLAVORS = "cdnaas.flavors"
VIM_DRIVERS = "cdnaas.vim_drivers"


def load(group, name):
    """An instance of the plugin ``name`` of entry-point ``group``.

    :raises LookupError: no such plugin is installed.
    """
    try:
        return stevedore_driver.DriverManager(group, name, invoke_on_load=True).driver
    except NoMatches as exc:
        raise LookupError(f"no plugin {name!r} installed in {group} "
                          f"(installed: {', '.join(names(group)) or 'none'})") from exc


def names(group):
    """Names of the plugins installed in ``group``."""
    return sorted(extension.ExtensionManager(group, invoke_on_load=False).names())
