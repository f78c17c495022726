"""The ``cdnaas`` CLI: the tests that start no process (the unit tier); the others, and what
the module covers, are in tests/service/test_cli.py."""

import pytest

from cdnaas.cli import api_commands


# -- arguments --------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("eu-west:1000", {"name": "eu-west", "demand": 1000}),
    ("eu-west:1000:4.0", {"name": "eu-west", "demand": 1000, "quality": {"min_mos": 4.0}}),
    ("us-east:50:p95=200", {"name": "us-east", "demand": 50,
                            "quality": {"response_time": {"percentile": 95.0, "max_ms": 200.0}}}),
])
def test_region_syntax(text, expected):
    assert api_commands.parse_region(text) == expected


def test_an_update_may_change_only_demand_or_only_quality():
    assert api_commands.parse_region("eu-west:2000", update=True) == {"name": "eu-west", "demand": 2000}
    assert api_commands.parse_region("eu-west::4.2", update=True) == {
        "name": "eu-west", "quality": {"min_mos": 4.2}}
    with pytest.raises(ValueError, match="changes nothing"):
        api_commands.parse_region("eu-west", update=True)
