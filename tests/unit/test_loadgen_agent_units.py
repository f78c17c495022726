"""The load generator of a calibration, without a cloud: the tests that start no process (the
unit tier); the others, and what the module covers, are in
tests/service/test_loadgen_agent.py."""
import base64
import gzip
import ipaddress
import json
from pathlib import Path

import pytest
import yaml

from cdnaas.calibration import agent, loads, viewers
from cdnaas.ro.vim import loadreport
from cdnaas.ro.vim.base import GeneratorLimit, LoadTest, VimError
from cdnaas.ro.vim.openstack import userdata
from cdnaas.vnf import endpoints

TARGETS = [ipaddress.ip_network("10.0.0.0/24")]
GOOD = {"kind": "http", "path": "/objects/small", "connections": 10, "seconds": 5,
        "address": "10.0.0.10"}


# -- what a test may ask ------------------------------------------------------------------

@pytest.mark.parametrize("change, field", [
    ({"path": "/a b"}, "path"), ({"path": "/a\nHost: x"}, "path"), ({"path": "/a\0"}, "path"),
    ({"path": "/a;rm -rf /"}, "path"), ({"path": "/$(reboot)`id`"}, "path"),
    ({"path": "/{n.__class__}"}, "path"), ({"path": "a"}, "path"), ({"path": ""}, "path"),
    ({"path": "/" + "a" * 1024}, "path"), ({"path": 7}, "path"), ({"path": None}, "path"),
    ({"path": "/\\..\\etc"}, "path"), ({"path": '/"'}, "path"), ({"path": "/é"}, "path"),
    ({"kind": "viewers", "path": "/seg.m4s"}, "path"), ({"kind": "viewers", "path": "/{n}{n}"},
                                                        "path"),
    ({"kind": "viewers", "path": "/{n}/{x}"}, "path"),
    ({"connections": 0}, "connections"), ({"connections": -1}, "connections"),
    ({"connections": 10 ** 100}, "connections"), ({"connections": 1.5}, "connections"),
    ({"connections": True}, "connections"), ({"connections": "10"}, "connections"),
    ({"connections": None}, "connections"),
    ({"seconds": 0}, "seconds"), ({"seconds": -5}, "seconds"), ({"seconds": 3601}, "seconds"),
    ({"seconds": float("inf")}, "seconds"), ({"seconds": float("nan")}, "seconds"),
    ({"seconds": 10 ** 400}, "seconds"), ({"seconds": "5"}, "seconds"),
    ({"seconds": [5]}, "seconds"),
    ({"kind": "shell"}, "kind"), ({"kind": None}, "kind"), ({"kind": ["http"]}, "kind"),
    ({"address": "10.0.0.10; reboot"}, "address"), ({"address": "0.0.0.0"}, "address"),
    ({"address": "224.0.0.1"}, "address"), ({"address": "fe80::1%eth0"}, "address"),
    ({"address": "x" * 100}, "address"), ({"address": 167772170}, "address"),
    ({"address": "10.0.1.10"}, "is outside"), ({"address": "127.0.0.1"}, "address"),
    ({"port": 0}, "port"), ({"port": 65536}, "port"), ({"chunk_seconds": 0}, "chunk_seconds"),
    ({"segments": 10 ** 9}, "segments"), ({"buffer_chunks": -1}, "buffer_chunks"),
    ({"range_bytes": -1}, "range_bytes"), ({"range_start": "0-1\r\nX: y"}, "range_start"),
    ({"command": ["sh", "-c", "id"]}, "unknown field"), ({"--lua": "x"}, "unknown field"),
])
def test_a_hostile_test_is_refused_naming_its_field(change, field):
    with pytest.raises(ValueError, match=field):
        loads.check({**GOOD, **change}, TARGETS)


def test_a_test_is_a_json_object():
    for value in ([], "http", None, 5):
        with pytest.raises(ValueError, match="JSON object"):
            loads.check(value, TARGETS)


def test_a_checked_test_has_every_field_and_becomes_an_argument_list():
    test = loads.check(GOOD, TARGETS)
    assert test == {**GOOD, "seconds": 5.0, "chunk_seconds": 2.0, "segments": 300,
                    "window_seconds": 16.0, "buffer_chunks": 2, "port": 80, "range_start": 0,
                    "range_bytes": 0}
    assert loads.command(test) == ["wrk", "-t1", "-c10", "-d5s", "--timeout=10s", "--latency",
                                   "http://10.0.0.10:80/objects/small"]
    ranged = loads.check({**GOOD, "range_start": 100, "range_bytes": 10}, TARGETS)
    assert loads.command(ranged)[-3:] == ["-H", "Range: bytes=100-109",
                                          "http://10.0.0.10:80/objects/small"]
    assert loads.timeout(test) == 5 + 2 + loads.GRACE_SECONDS
    ipv6 = loads.check({**GOOD, "address": "2001:db8::10", "port": 8080})
    assert loads.command(ipv6)[-1] == "http://[2001:db8::10]:8080/objects/small"
    watch = loads.check({**GOOD, "kind": "viewers", "path": "/video/hd/seg-{n}.m4s",
                         "segments": 60, "window_seconds": 8}, TARGETS)
    assert loads.command(watch, python="python3", viewers_script="/opt/v.py") == [
        "python3", "/opt/v.py", "--address", "10.0.0.10", "--port", "80", "--path",
        "/video/hd/seg-{n}.m4s", "--viewers", "10", "--seconds", "5.0", "--chunk-seconds",
        "2.0", "--segments", "60", "--window-seconds", "8.0", "--buffer-chunks", "2"]
    assert loads.tool("viewers") == viewers.TOOL


# -- the agent --------------------------------------------------------------------------


# -- the one reading of a generator's output -----------------------------------------------

def run_of(status=0, stdout="", stderr="", tool="wrk 4.1.0"):
    return loadreport.Run(status, stdout, stderr, 0.5, 2.0, tool)


def test_the_shared_reading_of_viewers_and_failures():
    watch = LoadTest("viewers", "/v/{n}", 2, 16)
    figures = {"tool": viewers.TOOL, "seconds": 16, "requests": 16, "errors": 0, "non_2xx": 0,
               "latency_ms": {"p50": 3.0}, "windows": [[[0, 0, 0, 0.1, False]]] * 2}
    report = loadreport.report(watch, run_of(stdout=json.dumps(figures), tool=viewers.TOOL),
                               None, isolated=False)
    assert (report.requests_per_second, report.windows, report.target_cpu_seconds,
            report.isolated) == (1.0, figures["windows"], None, False)
    with pytest.raises(GeneratorLimit, match="need 164 open files"):
        loadreport.report(watch, run_of(viewers.LIMIT_STATUS, stderr="100 viewers need 164 "
                                                                     "open files"), None, True)
    with pytest.raises(VimError, match=r"wrk 4.1.0 failed \(status -9\): killed"):
        loadreport.report(LoadTest("http", "/", 1, 1), run_of(-9, stderr="killed"), None, True)
    with pytest.raises(VimError, match="printed no report: not a wrk report"):
        loadreport.report(LoadTest("http", "/", 1, 1), run_of(stdout="hello"), None, True)
    with pytest.raises(VimError, match="printed no report: not a viewers report"):
        loadreport.report(watch, run_of(stdout='{"requests": 1}'), None, True)
    with pytest.raises(VimError, match="printed no report"):
        loadreport.report(watch, run_of(stdout="[1, 2"), None, True)


# -- the user-data that ships the agent --------------------------------------------------

def test_the_load_generator_user_data_ships_this_agent():
    text = userdata.load_generator("cal1-1", "loadgen-north", "10.200.0.254",
                                   ["10.200.0.0/24"], ["192.0.2.0/24", "2001:db8::/64"])
    assert text.startswith("#cloud-config\n")
    assert len(base64.b64encode(text.encode())) < 65535 // 2  # Nova's limit, with room
    document = yaml.safe_load(text)
    files = {}
    for entry in document["write_files"]:
        content = entry["content"]
        if entry.get("encoding") == "gz+b64":
            content = gzip.decompress(base64.b64decode(content)).decode()
        files[entry["path"]] = content
    package = Path(agent.__file__).parent
    for module in userdata.LOADGEN_MODULES:  # the very files of this tree
        assert files[f"{userdata.LOADGEN_DIR}/cdnaas/calibration/{module}.py"] == \
            (package / f"{module}.py").read_text()
    assert files[f"{userdata.LOADGEN_DIR}/cdnaas/__init__.py"] == ""
    unit = files["/etc/systemd/system/cdnaas-loadgen.service"]
    assert (f"ExecStart=/usr/bin/python3 -m cdnaas.calibration.agent --address 10.200.0.254 "
            f"--port {endpoints.MANAGEMENT_PORT} \\\n  --management 192.0.2.0/24 2001:db8::/64 "
            "--targets 10.200.0.0/24\n") in unit
    assert "DynamicUser=yes" in unit and f"PYTHONPATH={userdata.LOADGEN_DIR}" in unit
    assert document["runcmd"][-1] == ["systemctl", "enable", "--now", "cdnaas-loadgen.service"]


@pytest.mark.parametrize("address, targets, management", [
    ("10.0.0.1 --targets 0.0.0.0/1", ["10.0.0.0/24"], ["10.9.0.0/24"]),
    ("fe80::1%eth0", ["10.0.0.0/24"], ["10.9.0.0/24"]),
    ("10.0.0.1", ["0.0.0.0/0"], ["10.9.0.0/24"]),
    ("10.0.0.1", ["10.0.0.0/24"], ["10.9.0.0/24\nExecStartPre=/bin/sh"]),
    ("10.0.0.1", ["10.0.0.0/24"], ["fe80::%eth0/64"]),
])
def test_the_load_generator_user_data_refuses_what_its_unit_would_run(address, targets,
                                                                     management):
    with pytest.raises(ValueError):
        userdata.load_generator("cal1-1", "loadgen-north", address, targets, management)
