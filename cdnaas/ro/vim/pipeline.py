"""One way for every VIM driver to deploy, update, restore and remove: flows of steps.

In the manner of Octavia's controller worker (taskflow's tasks and linear flows), a
driver writes each of its lifecycle actions as a list of :class:`Step` objects over one
:class:`Context`, and :func:`run` runs them in order. A step that fails stops the flow:
the reverts recorded so far run newest first (each step's own :attr:`Step.revert`, and
the finer ones its work pushed on :attr:`Context.undo` as it went, such as one per
server booted), a revert that fails is logged and the others still run, and the step's
error is raised. A step runs its items in parallel where it has several
(:func:`each`), and steps that need nothing of one another run side by side
(:func:`together`, taskflow's unordered flow).

Step names are :mod:`cdnaas.ro.vim.steps` constants: a step reports its progress under
its name, which RO records and SO shows.
"""
import concurrent.futures
import dataclasses
import logging
import threading
from typing import Callable

from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro.vim.base import Progress, no_progress, run_all
from cdnaas.ro.vim.changes import Change

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

    def drop(self):
        """Forget every recorded revert (what they undo is to stay)."""
        with self._lock:
            self._steps = []

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


@dataclasses.dataclass
class Context:
    """What the steps of one flow share: what they build towards, what they built.

    :param deployment_id: the deployment the flow works on (the vCDN's id).
    :param sig: the SIG the flow brings the deployment to (None: a removal).
    :param record: the driver's own record of the deployment (``Deployment.resources``),
        which steps fill in as they make things.
    :param addresses: VNF name -> its address (a multi-homed VNF's: one per region).
    :param undo: the reverts of what was done, run by :func:`run` when a step fails.
    :param progress: where steps report, under their names.
    :param change: what an update or restore changes (:func:`.changes.sig_change`);
        None for a deploy or a removal.
    :param previous: the SIG the deployment served before (what a failed update goes
        back to), or None.

    Drivers add what is theirs in a subclass (the local driver's bridges, the OpenStack
    driver's cloud).
    """

    deployment_id: str
    sig: ServiceInstanceGraph | None = None
    record: dict = dataclasses.field(default_factory=dict)
    addresses: dict = dataclasses.field(default_factory=dict)
    undo: Undo = dataclasses.field(default_factory=Undo)
    progress: Progress = no_progress
    change: Change | None = None
    previous: ServiceInstanceGraph | None = None


@dataclasses.dataclass(frozen=True)
class Step:
    """One step of a flow: ``execute(context)`` does it, ``revert(context)`` undoes it.

    The revert is recorded as the step starts, so that a step that fails halfway is
    reverted too: it must undo what was done of it and treat what was not as success.
    A step without a revert is undone only by the finer reverts its work pushes on
    :attr:`Context.undo` (or not at all: what an update removes once it is done).
    """

    name: str
    execute: Callable[[Context], object]
    revert: Callable[[Context], None] | None = None


def each(name: str, items: Callable[[Context], list], action: Callable, pool,
         revert: Callable[[Context], None] | None = None) -> Step:
    """A step that runs ``action(context, item)`` on every item of ``items(context)`` at
    once in ``pool``, reporting ``name`` from 0 and as each ends (from 0 to 0 for none);
    every started action ends before the first error is raised
    (:func:`~cdnaas.ro.vim.base.run_all`)."""
    def execute(context):
        run_all(pool, lambda item: action(context, item), items(context), name,
                context.progress)
    return Step(name, execute, revert)


def together(*steps: Step) -> Step:
    """A step that runs ``steps`` side by side (none needs another's work), each in its
    own thread; it ends once all have, and fails with the first error. Each one's revert
    is recorded as it starts, as :func:`run` does."""
    def execute(context):
        with concurrent.futures.ThreadPoolExecutor(len(steps)) as pool:
            run_all(pool, lambda step: _started(step, context).execute(context), steps)
    return Step(" + ".join(s.name for s in steps), execute)


def isolated(step: Step, revert_on_failure: bool = True) -> Step:
    """``step`` with reverts of its own: what its work pushes on :attr:`Context.undo` is
    run (newest first) should it fail, before its error is raised, or with
    ``revert_on_failure`` False never; either way a later step's failure does not undo it
    (a restore's repair, an update's removals)."""
    def execute(context):
        outer, context.undo = context.undo, Undo()
        try:
            step.execute(context)
        except Exception:
            if revert_on_failure:
                context.undo.run()
            raise
        finally:
            context.undo = outer
    return Step(step.name, execute, step.revert)


def run(flow: list[Step], context: Context) -> Context:
    """Run the steps of ``flow`` in order over ``context``; return it. Once every step
    succeeded, the flow is done: its reverts are dropped (a flow run next on the same
    context reverts only its own).

    :raises Exception: the error of the step that failed, once every revert recorded
        (the steps' own and those their work pushed) ran, newest first; a revert that
        failed is logged, not raised.
    """
    step = None
    try:
        for step in flow:
            _started(step, context).execute(context)
    except Exception as exc:
        LOG.warning("%s failed for %s, reverting %d step(s): %s", step.name,
                    context.deployment_id, len(context.undo), exc)
        context.undo.run()
        raise
    context.undo.drop()
    return context


def _started(step, context):
    """``step``, its revert recorded on ``context.undo``."""
    if step.revert is not None:
        context.undo.push(step.name, step.revert, context)
    return step
