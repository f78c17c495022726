"""The customer API's oslo.policy rules: one per route, the defaults for each kind of caller,
the local strategy's two token headers, a policy file's overrides and the committed sample.
(The Keystone strategy against a real Keystone: ``tests/system/test_openstack_identity.py``.)

Its tests that start no process are in tests/unit/test_policy_units.py (the unit tier)."""
import subprocess
import sys
from pathlib import Path


SAMPLE = Path(__file__).resolve().parents[2] / "docs/policy.yaml.sample"


def test_the_committed_sample_is_what_the_generator_writes(tmp_path):
    generator = Path(sys.executable).parent / "oslopolicy-sample-generator"
    written = tmp_path / "policy.yaml.sample"
    subprocess.run([str(generator), "--namespace", "cdnaas", "--output-file", str(written)],
                   check=True, capture_output=True)
    assert written.read_text() == SAMPLE.read_text(), \
        "regenerate: oslopolicy-sample-generator --namespace cdnaas " \
        "--output-file docs/policy.yaml.sample"
