"""Settings are declared once (cdnaas/common/settings.py): every name the code reads is
declared, read at call time, refused with its name when malformed, and the README's
table is the declaration's."""
import re
from pathlib import Path

import pytest

from cdnaas.common import config, errors, settings

REPO = Path(__file__).resolve().parents[1]
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


def test_the_readme_table_is_the_declaration():
    readme = (REPO / "README.md").read_text()
    begin, end = "<!-- settings table: python -m cdnaas.common.settings -->\n", "<!-- end -->"
    assert begin in readme, "the README lost its generated settings table"
    table = readme.split(begin, 1)[1].split(end, 1)[0]
    assert table == settings.markdown_table(), "run: python -m cdnaas.common.settings"


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
        assert setting.kind in settings.KINDS and setting.help and setting.group
        if setting.default is not None and setting.kind != "text":
            assert isinstance(setting.default, {"number": float, "integer": int, "list": list,
                                                "flag": bool}[setting.kind]), setting.name
