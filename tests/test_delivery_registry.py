"""The delivery options' registry (cdnaas.delivery): how an option's field is accepted,
stored, shown, rendered and compared, whatever the option."""
import types

import pytest

from cdnaas import delivery
from cdnaas.common import errors
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro.vim.changes import caches_reconfigured
from cdnaas.vnf import fields, options
from tests.support.sigs import sample_sig


def _check(value, field):
    if not isinstance(value, dict) or set(value) - {"level"}:
        raise errors.BadRequest(f"{field} must be an object with level", field=field)
    level = value.get("level", 0)
    if not isinstance(level, int) or not 0 <= level <= 9:
        raise errors.BadRequest(f"{field}.level must be 0 to 9", field=f"{field}.level")
    return None if level == 0 else {"level": level}


LOUDNESS = types.SimpleNamespace(
    FIELD="loudness", ROLES=("cache",), check=_check,
    view=lambda stored: stored or {"level": 0},
    render=lambda stored: (stored or {"level": 0})["level"])


@pytest.fixture
def one_option(monkeypatch):
    monkeypatch.setattr(delivery, "OPTIONS", (LOUDNESS,))


def test_an_option_is_stored_only_when_not_the_defaults(one_option):
    service = delivery.accept({"loudness": {"level": 3}}, {"hostnames": ["a.example"]})
    assert service == {"hostnames": ["a.example"], "loudness": {"level": 3}}
    assert delivery.accept({"loudness": {"level": 0}}, service) == {"hostnames": ["a.example"]}
    assert delivery.accept({"loudness": None}, service) == {"hostnames": ["a.example"]}
    assert delivery.accept({"origin": "x"}, service) == service  # not in the body: kept


def test_a_refused_option_names_its_field(one_option):
    with pytest.raises(errors.BadRequest) as refused:
        delivery.accept({"loudness": {"level": 12}})
    assert refused.value.field == "loudness.level"


def test_view_shows_the_defaults_of_an_option_not_stored(one_option):
    assert delivery.view({}) == {"loudness": {"level": 0}}
    assert delivery.view({"loudness": {"level": 4}}) == {"loudness": {"level": 4}}


def test_a_rolled_back_change_puts_the_previous_options_back(one_option):
    now = {"hostnames": ["a.example"], "loudness": {"level": 5}}
    assert delivery.restored(now, {"loudness": {"level": 2}}) == \
        {"hostnames": ["a.example"], "loudness": {"level": 2}}
    assert delivery.restored(now, {}) == {"hostnames": ["a.example"]}


def test_rendering_checks_the_stored_option_again(one_option):
    assert options.delivery_values({"loudness": {"level": 7}}) == {"loudness": 7}
    assert options.delivery_values(None) == {"loudness": 0}
    assert options.delivery_values(None, "cache") == {"loudness": 0}
    assert options.delivery_values(None, "load_balancer") == {}  # not among its ROLES
    with pytest.raises(fields.ConfigError, match="loudness.level"):
        options.delivery_values({"loudness": {"level": "7; evil"}})


def test_caches_are_reconfigured_only_by_options_they_render(one_option, monkeypatch):
    sig = ServiceInstanceGraph.from_dict(sample_sig())
    louder = ServiceInstanceGraph.from_dict(sample_sig())
    louder.service = {"loudness": {"level": 1}}
    assert caches_reconfigured(sig, louder)
    assert not caches_reconfigured(sig, ServiceInstanceGraph.from_dict(sample_sig()))
    monkeypatch.setattr(LOUDNESS, "ROLES", ("load_balancer",))
    assert not caches_reconfigured(sig, louder)
    assert delivery.reconfigures(sig.service, louder.service, "load_balancer")
