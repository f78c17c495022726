"""Garbage collection around an IM replica's passes.

A pass makes millions of objects at 10,000 vCDNs (readings, points, region levels,
what its replica keeps for the next pass), most of them living to its end. Left to
itself, the cyclic garbage collector walked them again and again while the pass ran:
its young generations filled, their survivors went to the old one, which it then
collected whole; at 10,000 vCDNs that held about 40% of a pass's CPU (the same
in-process passes: 11.4-13.7 s of CPU with it, 7.7 s without).
So during a pass (:func:`paused`) the collector waits: what a pass drops is freed by
reference counting as before, and at its end one collection of the young generations
walks what the pass made once; what survives that is frozen (:func:`gc.freeze`), out of
later collections' sight, until it too is dropped (freed by its count). Every
:data:`THAW_PASSES` passes everything is thawed and collected once, so cyclic garbage
frozen meanwhile (rare: a pass's objects do not refer back to themselves) is reclaimed.
"""
import contextlib
import gc

#: passes between two collections of everything
THAW_PASSES = 60


@contextlib.contextmanager
def paused(passes):
    """Hold the collector during a pass, this replica's ``passes``-th; collect after it
    as the module docstring says."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if passes % THAW_PASSES == 0:
            gc.unfreeze()
            gc.collect()
        else:
            gc.collect(1)
        gc.freeze()
        if enabled:
            gc.enable()
