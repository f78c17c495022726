"""Steps that undo themselves: every step that creates something records its revert here."""
import logging
import threading

LOG = logging.getLogger(__name__)


class Undo:
    """A stack of reverts, run last-in first-out when a later step fails.

    Thread-safe: steps running in parallel (server boots) record their reverts
    as they succeed. A revert that fails is logged and the others still run;
    each revert must treat "already gone" as success.
    """

    def __init__(self):
        self._steps = []
        self._lock = threading.Lock()

    def push(self, description, revert, *args):
        """Record ``revert(*args)`` as the undo of the step just done."""
        with self._lock:
            self._steps.append((description, revert, args))

    def __len__(self):
        return len(self._steps)

    def run(self):
        """Revert every recorded step, newest first; return the descriptions that failed."""
        with self._lock:
            steps, self._steps = self._steps[::-1], []
        failed = []
        for description, revert, args in steps:
            try:
                revert(*args)
            except Exception as exc:  # the rest still runs; the tag sweep catches leftovers
                LOG.warning("undo of %s failed: %s", description, exc)
                failed.append(description)
        return failed
