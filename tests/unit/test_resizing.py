"""The run-time SIG rules SO and the IM's simulated plant share (cdnaas.planning.resizing)."""
import pytest

from cdnaas.common import errors
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.planning import resizing
from tests.support.sigs import sample_sig

BOUNDS = {"min": 1, "max": 6}


def north(caches=3):
    """north-cache-1 and -3 share north-host-1 with the balancer and DNS; -2 is alone on host-2."""
    return ServiceInstanceGraph.from_dict(sample_sig("v1", {"north": caches, "south": 1}))


def cache_names(sig):
    return [(v.name, v.host) for v in sig.vnfs_in("north", "cache")]


def test_growing_adds_caches_shaped_like_the_first_with_the_next_names_and_no_host():
    sig = north()
    new = resizing.resize(sig, "north", 5, BOUNDS)
    assert [(v.name, v.host, v.vcpus) for v in new] == [("north-cache-4", None, 2),
                                                         ("north-cache-5", None, 2)]
    assert len(sig.vnfs_in("north", "cache")) == 5 and len(sig.vnfs_in("south", "cache")) == 1


def test_shrinking_empties_the_least_loaded_host_first_then_the_newest_cache():
    sig = north()
    assert resizing.resize(sig, "north", 2, BOUNDS) == []
    assert cache_names(sig) == [("north-cache-1", "north-host-1"), ("north-cache-3", "north-host-1")]
    resizing.resize(sig, "north", 1, BOUNDS)
    assert cache_names(sig) == [("north-cache-1", "north-host-1")]


def test_a_count_outside_the_templates_bounds_is_refused_and_nothing_changes():
    sig = north()
    with pytest.raises(errors.Unprocessable, match="allows 1 to 6 caches per region, not 7"):
        resizing.resize(sig, "north", 7, BOUNDS)
    assert len(sig.vnfs_in("north", "cache")) == 3


def test_replacing_a_cache_keeps_its_host_under_a_new_name_and_only_caches_are_replaced():
    sig = north()
    fresh = resizing.replace(sig, "north-cache-2")
    assert (fresh.name, fresh.host) == ("north-cache-4", "north-host-2")
    assert "north-cache-2" not in [v.name for v in sig.vnfs]
    with pytest.raises(errors.Unprocessable, match="only caches are replaced"):
        resizing.replace(sig, "north-lb")
