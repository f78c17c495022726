"""Running the real ``openstack`` command (python-openstackclient with the ``cdn`` plugin of
this checkout) as a user would: a subprocess of the venv's ``openstack`` script."""
import json
import os
import subprocess
import sys
from pathlib import Path

OPENSTACK = Path(sys.executable).parent / "openstack"


class Osc:
    """``openstack`` with fixed global options (how it authenticates and finds the API)
    and an environment without the caller's ``OS_*`` variables."""

    def __init__(self, *global_options, env=None):
        self.global_options = list(global_options)
        self.env = {key: value for key, value in os.environ.items()
                    if not key.startswith("OS_")}
        self.env.update(env or {})

    def run(self, *args, timeout=240):
        """``openstack <global options> *args``: the finished process (text output)."""
        return subprocess.run([str(OPENSTACK), *self.global_options, *map(str, args)],
                              capture_output=True, text=True, env=self.env, timeout=timeout,
                              check=False)

    def ok(self, *args, timeout=240):
        """Run and expect success; the JSON of ``-f json`` decoded, else the stdout text."""
        done = self.run(*args, timeout=timeout)
        assert done.returncode == 0, f"openstack {' '.join(map(str, args))}: exit " \
            f"{done.returncode}\n{done.stdout}\n{done.stderr}"
        return json.loads(done.stdout) if "json" in args else done.stdout

    def fails(self, *args, status=1):
        """Run and expect exit ``status``; return the stderr text."""
        done = self.run(*args)
        assert done.returncode == status, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stderr


def with_token(api_url, token):
    """``openstack`` sending ``token`` (``X-Auth-Token``) to the API at ``api_url``, no
    Keystone involved (``admin_token`` auth)."""
    return Osc("--os-auth-type", "admin_token", "--os-endpoint", api_url, "--os-token", token)
