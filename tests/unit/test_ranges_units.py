"""Byte ranges for video delivery: the tests that start no process (the unit tier); the others,
and what the module covers, are in tests/system/test_ranges.py."""
import copy

import pytest

from cdnaas.common import errors, slicing
from cdnaas.common.flavor import PlanRequest
from cdnaas.common.sig import Origin
from cdnaas.sidr import checks
from cdnaas.vnf import fields
from cdnaas.vnf.options import nginx_slice_size
from tests.unit.test_origin_shield_units import STATIC


# --- the slice size -----------------------------------------------------------------------

@pytest.mark.parametrize("value", ["256k", "65m", "1g", "0m", "01m", "1M", "1 m", "1m;",
                                   "", 1048576, None])
def test_slice_sizes_outside_512k_to_64m_are_refused(value):
    with pytest.raises(errors.BadRequest) as caught:
        slicing.slice_bytes(value)
    assert caught.value.field == "slice_size"
    with pytest.raises(fields.ConfigError, match="slice_size"):
        nginx_slice_size(value if value is not None else "")


def test_the_flavor_sets_the_slice_size_sidr_checks_it_and_the_sig_carries_it():
    template = copy.deepcopy(STATIC)
    template["slice_size"] = "128k"
    assert checks.config_problems(template, None) == [{
        "field": "slice_size", "problem": "slice_size '128k' is not a size like 512k, 1m or "
                                          "64m (k or m, from 512k to 64m)"}]
    template["slice_size"] = "4m"
    request = PlanRequest(vcdn_id="v", hostname="h", origin=Origin("http", "o", 80),
                          regions=[], default_region="r", template=template)
    assert request.graph([]).service == {"slice_size": "4m"}
    assert PlanRequest(vcdn_id="v", hostname="h", origin=Origin("http", "o", 80), regions=[],
                       default_region="r", template=STATIC).graph([]).service == {}
