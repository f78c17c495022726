"""Loading flavor plugins and drivers by entry-point name (``importlib.metadata``).

Plugins are found by their entry points, read once per group and kept. A name that
is not among them makes the installed distributions be read again
(:func:`importlib.invalidate_caches` first, so a package installed since, into the
environment of the running service, is seen and importable): an operator installs a
flavor plugin with ``pip install`` and every running service finds it at its first
use, without a restart. Listing the names (:func:`names`) always reads them afresh
(a few milliseconds).
"""
import importlib
import importlib.metadata
import threading

FLAVORS = "cdnaas.flavors"
VIM_DRIVERS = "cdnaas.vim_drivers"

_known = {}  # group -> {name: EntryPoint}, as last read
_lock = threading.Lock()


def load(group, name):
    """An instance of the plugin ``name`` of entry-point ``group`` (its class called
    without arguments).

    :raises LookupError: no such plugin is installed, even after reading the installed
        distributions again.
    """
    with _lock:
        found = _known.get(group, {}).get(name)
    if found is None:
        scanned = _scan(group)
        found = scanned.get(name)
        if found is None:
            raise LookupError(f"no plugin {name!r} installed in {group} "
                              f"(installed: {', '.join(sorted(scanned)) or 'none'})")
    return found.load()()


def names(group):
    """Names of the plugins installed in ``group`` now."""
    return sorted(_scan(group))


def _scan(group):
    """Read ``group``'s entry points from the installed distributions and keep them."""
    importlib.invalidate_caches()
    found = {}
    for entry_point in importlib.metadata.entry_points(group=group):
        found.setdefault(entry_point.name, entry_point)
    with _lock:
        _known[group] = found
    return found
