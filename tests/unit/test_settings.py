"""Settings are declared once (cdnaas/common/settings.py): every name the code reads is
declared, read at call time and refused with its name when malformed; the docs' configuration
reference is rendered from the declaration (tests/service/test_docs.py builds it)."""
import re
from pathlib import Path

import pytest

from cdnaas.common import config, errors, settings
from tests.support import faults

REPO = Path(__file__).resolve().parents[2]
FAMILIES = re.compile(r"^CDNAAS_(API|SO|SIDR|RO|IM)_(URL|BIND)$")


def _names_in_code():
    found = set()
    for path in [*REPO.glob("cdnaas/**/*.py"), *REPO.glob("plugins/**/*.py")]:
        found |= set(re.findall(r"\bCDNAAS_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    return found


def test_every_setting_the_code_names_is_declared():
    undeclared = {name for name in _names_in_code()
                  if name not in settings.BY_NAME and not FAMILIES.match(name)
                  and not name.startswith("CDNAAS_OS_")}
    assert undeclared == set()
    openstack = {n for n in _names_in_code() if n.startswith("CDNAAS_OS_") and n != "CDNAAS_OS"}
    assert openstack <= set(settings.BY_NAME)


def test_no_setting_or_name_only_tests_use_is_in_the_runtime_code():
    """The faults tests inject live in tests/support/faults.py, not in cdnaas/."""
    assert not any("tests only" in setting.help for setting in settings.DECLARED)
    assert set(faults.VARIABLES) & _names_in_code() == set()
    assert not any(name.startswith("CDNAAS_TEST_") for name in settings.BY_NAME)


def test_settings_are_read_at_call_time_with_their_declared_default(monkeypatch):
    monkeypatch.delenv("CDNAAS_DEPLOY_TIMEOUT", raising=False)
    assert config.setting("CDNAAS_DEPLOY_TIMEOUT") == 600.0
    monkeypatch.setenv("CDNAAS_DEPLOY_TIMEOUT", "12.5")
    assert config.setting("CDNAAS_DEPLOY_TIMEOUT") == 12.5
    monkeypatch.setenv("CDNAAS_ORIGIN_ALLOW", " 127.0.0.1 ,, 10.0.0.0/8 ")
    assert config.setting("CDNAAS_ORIGIN_ALLOW") == ["127.0.0.1", "10.0.0.0/8"]


@pytest.mark.parametrize("name, value", [
    ("CDNAAS_DEPLOY_TIMEOUT", "ten"), ("CDNAAS_RO_WORKERS", "8.5"),
    ("CDNAAS_OS_CREATE_FLAVORS", "yes"), ("CDNAAS_IM_INTERVAL", "1e400x"),
])
def test_a_malformed_value_is_refused_naming_the_setting(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(errors.CdnaasError, match=name):
        config.setting(name)


def test_every_declaration_is_complete():
    for setting in settings.DECLARED:
        assert setting.kind in settings.KINDS and setting.help
        assert setting.group in settings.GROUPS, f"{setting.name}: a group the reference shows"
        if setting.default is not None and setting.kind != "text":
            assert isinstance(setting.default, {"number": float, "integer": int, "list": list,
                                                "flag": bool}[setting.kind]), setting.name
