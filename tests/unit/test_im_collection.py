"""The collector around an IM pass (:mod:`cdnaas.im.collection`): held during the pass,
what the pass leaves frozen, frozen cycles reclaimed on the thawing pass."""
import gc
import weakref

import pytest

from cdnaas.im import collection


class Node:
    """An object that can be part of a reference cycle, and weakly referenced."""

    def __init__(self):
        self.other = None


@pytest.fixture(autouse=True)
def collector():
    """The collector as a fresh process has it, whatever a test leaves."""
    gc.unfreeze()
    gc.enable()
    yield
    gc.unfreeze()
    gc.enable()


def _cycle():
    """A weak reference to one of two nodes that refer to each other and to nothing else."""
    first, second = Node(), Node()
    first.other, second.other = second, first
    return weakref.ref(first)


def test_a_pass_runs_without_the_collector_and_what_it_keeps_is_frozen_after():
    frozen = gc.get_freeze_count()
    with collection.paused(1):
        assert not gc.isenabled()
        kept = [Node() for _ in range(100)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen + len(kept)


def test_the_cycles_a_pass_dropped_are_collected_at_its_end_not_frozen():
    with collection.paused(1):
        cycle = _cycle()
    assert cycle() is None


def test_cycles_frozen_by_earlier_passes_are_reclaimed_every_thaw_passes():
    cycle = _cycle()
    gc.freeze()  # as an earlier pass left it
    with collection.paused(collection.THAW_PASSES - 1):
        pass
    assert cycle() is not None  # still frozen: not a thawing pass
    with collection.paused(collection.THAW_PASSES):
        pass
    assert cycle() is None
