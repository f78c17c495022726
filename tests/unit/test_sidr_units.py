"""SIDR: the tests that start no process (the unit tier); the others, and what the module
covers, are in tests/service/test_sidr.py."""
import copy
from pathlib import Path

import pytest
import yaml

from cdnaas.common import errors
from cdnaas.sidr import service

REPO = Path(__file__).resolve().parents[2]
STATIC_TEMPLATE = REPO / "plugins" / "static" / "template.yaml"


@pytest.fixture
def static():
    return yaml.safe_load(STATIC_TEMPLATE.read_text(encoding="utf-8"))


def test_semantic_rules(static):
    broken = copy.deepcopy(static)
    broken["vnfs"]["cache"]["instances"] = {"min": 0, "max": 3}
    broken["vnfs"]["load_balancer"]["instances"] = {"min": 0, "max": 1}
    broken["vnfs"]["dns"]["ram_mb"] = {"min": 512, "max": 256}
    broken["vnfs"]["dns"]["instances"] = {"min": 1, "max": 7}  # 6 DNS addresses a region
    broken["placement"] = {"objective": "fewest_hosts", "max_host_share": 0.5}

    with pytest.raises(errors.BadRequest) as raised:
        service.validate(broken)

    assert [d["field"] for d in raised.value.details] == [
        "vnfs.cache.instances.min", "vnfs.load_balancer.instances.min",
        "vnfs.dns.instances.max", "vnfs.dns.ram_mb", "placement.max_host_share"]
    assert "at most 6 (got 7)" in raised.value.details[2]["problem"]
    spread = copy.deepcopy(static)
    spread["placement"] = {"objective": "spread", "max_host_share": 0.5}
    service.validate(spread)


def test_wrongly_shaped_parts_are_reported_once(static):
    broken = copy.deepcopy(static)
    broken["vnfs"]["cache"]["vcpus"] = {"min": "two", "max": 1}
    broken["vnfs"]["dns"] = "one please"

    assert [p["field"] for p in service.schema_problems(broken)] == ["vnfs.cache.vcpus.min", "vnfs.dns"]
    assert service.semantic_problems(broken) == []
