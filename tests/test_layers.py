"""The package's layers (``.importlinter``): each package imports only those below it
(``osc > cli > api > portal > so | im | sidr | ro > calibration > vnf > delivery | planning
| db | origin > common``; the four services never import each other), and no two modules
of any package import each other, directly or through others."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_layers_and_the_absence_of_cycles_hold():
    linter = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(linter), "--config", str(REPO / ".importlinter"),
                             "--no-cache"], cwd=REPO, capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Contracts: 2 kept, 0 broken." in result.stdout
