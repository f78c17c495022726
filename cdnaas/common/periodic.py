"""A pass run again and again in a thread, as SO's background checkers do."""
import logging
import threading

from cdnaas.common import config


def run_every(setting, action, name, stop, what):
    """Call ``action()`` every ``<setting>`` seconds (read before each wait) in a daemon
    thread named ``name`` until ``stop`` (a :class:`threading.Event`) is set; a pass that
    raises is logged (``"<what> failed"``) and the next one runs as planned."""
    log = logging.getLogger(action.__module__)

    def loop():
        while not stop.wait(config.setting(setting)):
            try:
                action()
            except Exception:  # keep going; the next pass retries
                log.exception("%s failed", what)
    threading.Thread(target=loop, name=name, daemon=True).start()
