"""The documentation site builds without a warning, shows what it is generated from (every
declared setting, every documented route), and the README stays the short front page that
links into it: the tests that start no process (the unit tier); the others, and what the
module covers, are in tests/service/test_docs.py."""
import re
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]
#: the README's first lines: the two commands a newcomer runs on a fresh machine
TWO_COMMANDS = """# CDNaaS

```bash
scripts/demo    # set up this machine, run the five services, lease a vCDN and print its entry point
scripts/test    # set up this machine and run the whole test suite
```
"""
#: two screens of a terminal
README_MAX_LINES = 100


def test_the_readme_begins_with_the_two_commands_and_fits_two_screens():
    readme = (REPO / "README.md").read_text()
    assert readme.startswith(TWO_COMMANDS)
    assert len(readme.splitlines()) <= README_MAX_LINES


def test_every_local_link_of_the_readme_and_the_pages_leads_to_a_file():
    """Sphinx checks the pages' links to pages; these are the README's links and the
    pages' links to repository files outside the site."""
    broken = []
    for page in [REPO / "README.md", *(REPO / "docs").rglob("*.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert broken == []
