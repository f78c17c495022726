"""The load generator of a calibration, without a cloud: what a test may ask
(:mod:`cdnaas.calibration.loads`, hostile inputs refused), the agent that runs it on
an OpenStack server (:mod:`cdnaas.calibration.agent`, in this process on loopback),
RO's side of the conversation (:mod:`cdnaas.ro.vim.openstack.loadgen`), the one
reading of a generator's output every driver shares (:mod:`cdnaas.ro.vim.loadreport`),
and the user-data that ships the agent (:func:`.userdata.load_generator`).

The agent here runs no generator: its ``measure`` is replaced by one answering wrk's
printed report, so what is checked is everything around the generator. The real wrk
and viewers run under the agent in ``tests/test_openstack_driver.py`` (the mini cloud,
and the VNF image in qemu).
"""
import base64
import gzip
import ipaddress
import json
import socket
import threading
import time
from pathlib import Path

import pytest
import yaml

from cdnaas.calibration import agent, loads, viewers
from cdnaas.ro.vim import loadreport
from cdnaas.ro.vim.base import GeneratorLimit, LoadTest, VimError
from cdnaas.ro.vim.openstack import loadgen, userdata
from cdnaas.vnf import endpoints

WRK_REPORT = """Running 1s test @ http://10.0.0.10:80/objects/small
  1 threads and 2 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    42.44ms    7.54ms  48.07ms   96.00%
    Req/Sec    45.45      9.34    60.00     72.73%
  Latency Distribution
     50%   43.97ms
     75%   44.00ms
     90%   44.07ms
     99%   48.07ms
  50 requests in 1.10s, 11.75KB read
  Socket errors: connect 0, read 1, write 0, timeout 2
  Non-2xx or 3xx responses: 4
Requests/sec:     45.61
Transfer/sec:     10.72KB
"""
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

@pytest.fixture
def running_agent(monkeypatch):
    """``start(management, targets, answer)``: an agent on loopback whose generator
    answers ``answer`` (exit status, stdout, stderr, CPU s, s: wrk's report by default);
    returns the agent. ``start.ran`` lists the argument lists it was given."""
    ran, agents, answers = [], [], []

    def measure(argv, seconds):
        ran.append((argv, seconds))
        return answers[-1]
    monkeypatch.setattr(agent, "measure", measure)

    def start(management="127.0.0.0/8", targets="127.0.0.0/8",
              answer=(0, WRK_REPORT, "", 0.25, 1.2)):
        answers.append(answer)
        server = agent.Agent("127.0.0.1", 0, agent.prefixes([management]),
                             agent.prefixes([targets]))
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        agents.append(server)
        return server
    start.ran = ran
    yield start
    for server in agents:
        server.shutdown()
        server.server_close()


def raw(port, request):
    """Send ``request`` bytes to the agent; return what it answers until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while True:
            data = sock.recv(65536)
            if not data:
                return answer
            answer += data


def post(port, body):
    return raw(port, b"POST /load HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n%s"
               % (len(body), body))


def status_of(answer):
    return int(answer.split(b" ", 2)[1]) if answer else None


def test_the_agent_answers_its_management_side_only(running_agent):
    port = running_agent(management="10.9.0.0/16").server_address[1]
    answer = raw(port, b"GET /health HTTP/1.1\r\nHost: a\r\n\r\n")
    assert answer == b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    assert status_of(post(port, json.dumps(GOOD).encode())) == 403
    assert running_agent.ran == []


@pytest.mark.parametrize("body, status, says", [
    (b"not json", 400, b"Expecting value"),
    (b"\xff\xfe", 400, b"utf-8"),
    (b"[" * 4000, 400, b"nests too deep"),
    (b"[]", 400, b"JSON object"),
    (json.dumps({**GOOD, "path": "/a;reboot"}).encode(), 400, b"path must be"),
    (json.dumps({**GOOD, "seconds": 10 ** 30}).encode(), 400, b"seconds must be between"),
    (b'{"kind":"http","path":"/","connections":1,"seconds":NaN,"address":"127.0.0.1"}', 400,
     b"seconds must be between"),
    (json.dumps({**GOOD, "address": "127.0.0.1\n"}).encode(), 400, b"IP address"),
    (json.dumps(GOOD).encode(), 400, b"outside the prefixes"),  # 10.0.0.10: not a target
    (b"x" * (agent.MAX_BODY + 1), 413, b"at most"),
])
def test_the_agent_refuses_hostile_bodies(running_agent, body, status, says):
    answer = post(running_agent().server_address[1], body)
    assert status_of(answer) == status, answer
    assert says in answer
    assert running_agent.ran == []


def test_the_agent_wants_a_length_and_knows_two_paths(running_agent):
    port = running_agent().server_address[1]
    chunked = b"POST /load HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    assert status_of(raw(port, chunked)) == 411
    assert status_of(raw(port, b"POST /load HTTP/1.1\r\nHost: a\r\n\r\n")) == 411
    assert status_of(raw(port, b"POST /load HTTP/1.1\r\nContent-Length: -5\r\n\r\n")) == 411
    huge = b"POST /load HTTP/1.1\r\nContent-Length: " + b"9" * 400 + b"\r\n\r\n"
    assert status_of(raw(port, huge)) == 413
    assert status_of(raw(port, b"GET /load?x HTTP/1.1\r\n\r\n")) == 404
    assert status_of(raw(port, b"DELETE /load HTTP/1.1\r\n\r\n")) == 501
    assert status_of(raw(port, b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n")) == 414
    assert running_agent.ran == []


def test_one_test_at_a_time(running_agent):
    server = running_agent()
    with server.busy:
        answer = post(server.server_address[1],
                      json.dumps({**GOOD, "address": "127.0.0.1"}).encode())
    assert status_of(answer) == 409 and b"running already" in answer
    assert running_agent.ran == []


def test_ro_drives_a_test_through_the_agent(running_agent):
    """RO's side checks, sends, and reads the agent's answer into the shared report."""
    port = running_agent().server_address[1]
    health = loadgen.wait_for_agent("127.0.0.1", 5, port=port)
    assert health["agent"] == agent.AGENT and set(health["tools"]) == {"http", "viewers"}
    test = LoadTest("http", "/objects/small", 2, 1)
    done = loadgen.measure("127.0.0.1", test, "127.0.0.2", target_port=8080, port=port)
    [(argv, seconds)] = running_agent.ran
    assert argv == loads.command(loads.check({**GOOD, "connections": 2, "seconds": 1,
                                              "address": "127.0.0.2", "port": 8080}))
    assert seconds == 1 + 2 + loads.GRACE_SECONDS
    report = loadreport.report(test, done, 3.5, isolated=True)
    assert (report.requests, report.errors, report.non_2xx, report.seconds) == (50, 3, 4, 1.1)
    assert report.requests_per_second == 45.5
    assert report.latency_ms == {"p50": 43.97, "p90": 44.07, "p99": 48.07}
    assert (report.generator_cpu_seconds, report.target_cpu_seconds) == (0.25, 3.5)
    assert report.tool.startswith("wrk")
    with pytest.raises(VimError, match=r"refused the test \(400\): address 10.1.1.1 is outside"):
        loadgen.measure("127.0.0.1", test, "10.1.1.1", port=port)
    with pytest.raises(VimError, match="load test refused: path must be"):  # not even sent
        loadgen.measure("127.0.0.1", LoadTest("http", "/a b", 1, 1), "127.0.0.2", port=port)
    assert len(running_agent.ran) == 1


def test_ro_refuses_an_answer_that_is_not_a_run(running_agent):
    port = running_agent(answer=("0", WRK_REPORT, None, 0.1, 1.0)).server_address[1]
    with pytest.raises(VimError, match="answered no valid status, stderr"):
        loadgen.measure("127.0.0.1", LoadTest("http", "/", 1, 1), "127.0.0.2", port=port)


def test_an_agent_that_does_not_answer_is_given_up_in_time():
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(loadgen.Unreachable, match="did not answer within 1 s"):
            loadgen.wait_for_agent("127.0.0.1", 1, port=port)
        assert time.monotonic() - started < 3
    with pytest.raises(loadgen.Unreachable, match="ConnectionRefusedError"):
        loadgen.call("127.0.0.1", port, "GET", agent.HEALTH_PATH)


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
