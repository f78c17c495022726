"""A cache guest's supervision of its nginx master, as the OpenStack user-data renders it:
the cache's unit restarts a master that dies without killing its workers
(``KillMode=process``), which serve on beside the new master until it has its own, then
end gracefully (the unit's ``ExecStartPost``, :data:`cdnaas.ro.vim.openstack.userdata.
ORPHANS_SCRIPT`). Real nginx on the rendered config, in a PID and network namespace of
its own standing in for the guest (this machine has no systemd to run the unit: the test
does what it asks, in its order); its management listener asked all along (root only)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cdnaas.ro.vim.openstack import userdata
from cdnaas.vnf import generation
from tests.test_status_private import make_sig

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and nginx need root")

ADDRESS = "10.200.0.10"
REPO = Path(__file__).resolve().parents[1]

#: the guest, run as PID 1 of its namespaces: the harness's own process reaps the
#: orphans, as systemd does; prints what it saw as JSON
GUEST = r"""
import json, os, signal, subprocess, sys, threading, time
from cdnaas.ro.vim import management
from cdnaas.ro.vim.local import cgroups, processes
address, prefix, script = sys.argv[1:4]
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
subprocess.run(["ip", "addr", "add", f"{address}/32", "dev", "lo"], check=True)
nginx = ["nginx", "-p", f"{prefix}/", "-c", f"{prefix}/nginx.conf"]
def reap():
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            time.sleep(0.01)
threading.Thread(target=reap, daemon=True).start()
first = subprocess.Popen(nginx)
processes.wait_until(lambda: management.generation(address) is not None, "nginx")
old = [first.pid, *cgroups.children(first.pid)]
asked, unanswered, stop = [0], [0], threading.Event()
def ask():
    while not stop.is_set():
        asked[0] += 1
        unanswered[0] += management.generation(address, timeout=2) is None
        time.sleep(0.01)
asking = threading.Thread(target=ask)
asking.start()
os.kill(first.pid, signal.SIGKILL)
time.sleep(1)
served_alone = management.generation(address)
second = subprocess.Popen(nginx)  # Restart=always
subprocess.run(["/bin/sh", script], env={**os.environ, "MAINPID": str(second.pid)},
               check=True, timeout=30)  # ExecStartPost
processes.wait_until(lambda: not any(processes.running(p) for p in old[1:]), "the orphans' end")
time.sleep(0.5)
stop.set()
asking.join()
print(json.dumps({"old": old, "workers": cgroups.children(second.pid),
                  "served_alone": served_alone, "asked": asked[0],
                  "unanswered": unanswered[0], "generation": management.generation(address),
                  "left": [p for p in old if processes.running(p)]}))
second.terminate()
second.wait()
"""


def test_a_master_that_dies_is_restarted_beside_its_workers_which_then_end(tmp_path):
    sig = make_sig({"north": 1})
    cache = sig.vnfs_in(role="cache")[0]
    rendered = userdata.cache(sig, cache, ADDRESS, "192.0.2.80")
    files = {f["path"]: f["content"] for f in yaml.safe_load(rendered)["write_files"]}
    unit = files["/etc/systemd/system/cdnaas-cache.service"]
    for line in ("KillMode=process", "Restart=always",
                 f"ExecStartPost=/bin/sh {userdata.ORPHANS_SCRIPT}"):
        assert line in unit.splitlines()
    sysctl = files["/etc/sysctl.d/60-cdnaas-vnf.conf"]
    assert "net.ipv4.tcp_migrate_req = 1" in sysctl.splitlines()
    conf = files[f"{userdata.CONF_DIR}/nginx.conf"]
    written = generation.generation_of(conf)
    assert userdata.generation(rendered) == written
    prefix = tmp_path / "vnf"
    for folder in ("logs", "temp"):
        (prefix / folder).mkdir(parents=True)
    prefix.chmod(0o755)
    (prefix / "nginx.conf").write_text(conf.replace(userdata.PREFIX, str(prefix)))
    script = tmp_path / "end-orphans.sh"
    script.write_text(files[userdata.ORPHANS_SCRIPT])
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "--net", sys.executable, "-c", GUEST,
         ADDRESS, str(prefix), str(script)],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["served_alone"] == written  # the orphans served while no master ran
    assert seen["left"] == [] and seen["workers"]  # they ended; the new master has its own
    assert seen["generation"] == written
    assert seen["asked"] > 50 and seen["unanswered"] == 0, seen
