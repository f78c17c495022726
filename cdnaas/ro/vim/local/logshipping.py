"""The log shipper of a local VNF (:mod:`cdnaas.ro.vim.logship`): started, restarted on a
new config, and stopped with its VNF's streams.

The shipper runs in the VNF's namespace (it reads nginx's datagrams on the namespace's
loopback and reaches collectors on this machine at the region bridge's gateway) and in
its CPU group (removing the VNF's group stops it with nginx). Its config is
``<prefix>/logship.json``, its process id ``<prefix>/logship.pid``.
"""
import json
import logging
import sys

from cdnaas.delivery import logstreams
from cdnaas.ro.vim import logship, management
from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.local import cgroups, processes

LOG = logging.getLogger(__name__)


def sync(namespace, prefix, group, address, stored, hostname, connect_to):
    """Make the VNF's shipper run on the config ``stored`` streams give (none: no shipper).
    A running shipper on the same config is left alone; on another it is restarted (what
    it queued is lost and its counts start again).

    :param address: the VNF's managed address (its management listener shows the counts).
    :param connect_to: ``(host, port) ->`` where the VNF reaches a collector.
    :raises VimError: a collector is not reachable from here, or the shipper did not
        start.
    """
    config_file, pid_file = prefix / "logship.json", prefix / "logship.pid"
    text = json.dumps(logstreams.shipper_config(stored, hostname, connect_to), indent=1) \
        if stored else None
    running = _running_pid(pid_file)
    if running and config_file.exists() and config_file.read_text() == text:
        return
    if running:
        processes.stop(running)
        pid_file.unlink(missing_ok=True)
    if text is None:
        config_file.unlink(missing_ok=True)
        return
    config_file.write_text(text)
    processes.start_daemon(namespace, [sys.executable, logship.__file__, str(config_file),
                                       "--pid-file", str(pid_file)])
    processes.wait_until(lambda: management.answers_http(address, path=logstreams.STATUS_PATH),
                         f"the log shipper of {hostname}")
    cgroups.adopt(group, processes.pid_in(pid_file))
    LOG.info("log shipper of %s ships to %d collectors", hostname, len(stored))


def _running_pid(pid_file):
    try:
        pid = processes.pid_in(pid_file)
    except VimError:
        return None
    return pid if processes.running(pid) else None
