"""The ``cdnaas`` CLI: argument checks in-process, the real stack end to end.

Its tests that start no process are in tests/unit/test_cli_units.py (the unit tier)."""
import json
import os
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cdnaas.cli import stack as stacks
from cdnaas.cli.main import cli
from tests.support.stack import running_stack

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "plugins" / "static" / "template.yaml"
QOE_TEMPLATE = REPO / "plugins" / "qoe_video" / "template.yaml"
CREATE = ["vcdn", "create", "--name", "news", "--flavor", "static", "--origin", "http://o.example"]


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def isolated(tmp_path):
    """Environment of a CLI that can reach nothing and has its own settings file."""
    return {"CDNAAS_CONFIG": str(tmp_path / "config.yaml"), "CDNAAS_TOKEN": None,
            "CDNAAS_STATE_DIR": str(tmp_path / "state"), "CDNAAS_DATABASE_URL": None,
            "CDNAAS_API_URL": f"http://127.0.0.1:{_free_port()}",
            "CDNAAS_SIDR_URL": f"http://127.0.0.1:{_free_port()}"}


def invoke(args, env, token=None):
    full = dict(env)
    if token:
        full["CDNAAS_TOKEN"] = token
    return CliRunner().invoke(cli, args, env=full, catch_exceptions=False)


def invoke_json(args, env, token=None):
    result = invoke(["--json", *args], env, token)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# -- arguments --------------------------------------------------------------------------------

@pytest.mark.parametrize("region, problem", [
    ("eu-west", "is not NAME:DEMAND[:QUALITY]"),
    ("eu-west:lots", "whole number of viewers"),
    ("eu-west:0", "whole number of viewers"),
    ("EU:100", "lower-case letters"),
    ("eu-west:100:7", "outside 1-5"),
    ("eu-west:100:good", "neither a MOS"),
    ("eu-west:100:4:extra", "is not NAME:DEMAND[:QUALITY]"),
])
def test_a_bad_region_is_a_usage_error_that_says_the_syntax(isolated, region, problem):
    result = invoke([*CREATE, "--region", region, "--lease-hours", "1"], isolated)
    assert result.exit_code == 2
    assert "Invalid value for '--region'" in result.output
    assert problem in result.output


@pytest.mark.parametrize("lease", [[], ["--lease-hours", "2", "--lease-end", "2030-01-01T00:00:00Z"]])
def test_the_lease_is_exactly_one_of_end_or_hours(isolated, lease):
    result = invoke([*CREATE, "--region", "eu-west:10", *lease], isolated)
    assert result.exit_code == 2
    assert "exactly one of --lease-end or --lease-hours" in result.output


def test_a_lease_end_must_be_iso_8601_and_after_the_start(isolated):
    result = invoke([*CREATE, "--region", "eu-west:10", "--lease-end", "next tuesday"], isolated)
    assert result.exit_code == 2 and "not an ISO 8601 time" in result.output
    result = invoke([*CREATE, "--region", "eu-west:10", "--lease-start", "2030-01-02T00:00:00Z",
                     "--lease-end", "2030-01-01T00:00:00Z"], isolated)
    assert result.exit_code == 2 and "must come after --lease-start" in result.output


def test_a_region_may_be_named_once(isolated):
    result = invoke([*CREATE, "--region", "eu-west:10", "--region", "eu-west:20",
                     "--lease-hours", "1"], isolated)
    assert result.exit_code == 2 and "only once" in result.output


def test_updates_without_changes_are_refused(isolated):
    assert invoke(["regions", "update", "eu-west"], isolated).exit_code == 2
    assert invoke(["hosts", "update", "eu-west", "h1"], isolated).exit_code == 2


def test_an_unreachable_api_says_how_to_start_the_stack(isolated):
    result = invoke(["vcdn", "list"], isolated, token="cdn_x_y")
    assert result.exit_code == 1
    assert "unreachable" in result.stderr and "cdnaas up" in result.stderr


def test_create_token_saves_a_working_settings_file(isolated, tmp_path):
    assert invoke(["db", "upgrade"], isolated).exit_code == 0
    result = invoke(["admin", "create-token", "--save"], isolated)
    assert result.exit_code == 0, result.output
    secret = result.stdout.strip()
    assert secret.startswith("cdn_")
    settings_file = tmp_path / "config.yaml"
    settings = yaml.safe_load(settings_file.read_text())
    assert settings == {"token": secret, "api_url": isolated["CDNAAS_API_URL"]}
    assert stat.S_IMODE(settings_file.stat().st_mode) == 0o600
    # the same tenant cannot be asked for with another role
    result = invoke(["admin", "create-token", "--role", "tenant"], isolated)
    assert result.exit_code == 1
    assert "exists with role operator" in result.stderr and "field: role" in result.stderr


def test_create_token_without_migrations_says_what_to_run(isolated):
    result = invoke(["admin", "create-token"], isolated)
    assert result.exit_code == 1 and "cdnaas db upgrade" in result.stderr


# -- the stack machinery ----------------------------------------------------------------------

def test_a_service_that_crashes_on_start_is_reported_with_its_log(tmp_path):
    env = {**stacks.free_port_env(tmp_path), "CDNAAS_DATABASE_URL": None,
           "CDNAAS_LOG_LEVEL": "NO-SUCH-LEVEL"}
    stack = stacks.Stack(env=env, services=("sidr",))
    with pytest.raises(stacks.StackError, match=r"(?s)sidr exited.*NO-SUCH-LEVEL"):
        stack.start(timeout=20)
    assert not stack.pid_file.exists()
    assert stack.processes == {}


def test_a_taken_port_is_refused_before_anything_starts(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {**stacks.free_port_env(tmp_path), "CDNAAS_SIDR_URL": f"http://127.0.0.1:{port}",
               "CDNAAS_SIDR_BIND": f"127.0.0.1:{port}"}
        with pytest.raises(stacks.StackError, match="already listens"):
            stacks.Stack(env=env, services=("sidr",)).start()


def test_failed_migrations_stop_the_start(tmp_path):
    env = {**stacks.free_port_env(tmp_path),
           "CDNAAS_DATABASE_URL": f"postgresql+psycopg://nobody@127.0.0.1:{_free_port()}/none"}
    with pytest.raises(stacks.StackError, match="migrations failed"):
        stacks.Stack(env=env, services=("sidr",)).start()


def test_a_detached_stack_is_stopped_through_its_pid_file(tmp_path):
    env = {**stacks.free_port_env(tmp_path), "CDNAAS_DATABASE_URL": None}
    stack = stacks.Stack(env=env, services=("sidr",))
    stack.start(timeout=30, detach=True)
    pid = stack.processes["sidr"].pid
    assert stacks.running_pids(tmp_path) == {"sidr": pid}
    assert (tmp_path / "logs" / "sidr.log").exists()
    assert stacks.stop_recorded(tmp_path) == ["sidr"]  # what `cdnaas down` does
    stack.processes["sidr"].wait(5)
    assert not stacks.healthy(stack.urls["sidr"])
    assert not stack.pid_file.exists()


# -- end to end -------------------------------------------------------------------------------

@pytest.fixture(params=["embedded", "postgresql"])
def stack_database(request):
    """None (one SQLite file per service, as `cdnaas up`), or a fresh PostgreSQL database."""
    if request.param == "embedded":
        yield None
    else:
        from tests.support import postgres  # pylint: disable=import-outside-toplevel
        admin = request.getfixturevalue("postgres_admin_url")
        with postgres.fresh_database(admin) as url:
            yield url


def test_the_cli_drives_a_vcdn_through_its_life(stack_database, tmp_path):
    with running_stack(stack_database, tmp_path) as stack:
        env, operator = stack.env, stack.operator_token

        stored = invoke_json(["template", "register", str(TEMPLATE)], env, operator)
        assert (stored["flavor"], stored["version"]) == ("static", 1)
        again = invoke(["template", "register", str(TEMPLATE)], env, operator)
        assert again.exit_code == 1 and "version" in again.stderr

        for name, prefix, default in (("eu-west", "10.1.0.0/16", ["--default"]),
                                      ("us-east", "10.2.0.0/16", [])):
            region = invoke_json(["regions", "create", name, "--prefix", prefix, "--zone", "az-1",
                                  *default], env, operator)
            assert region["name"] == name
            for host in ("h1", "h2"):
                created = invoke_json(["hosts", "create", name, f"{name}-{host}", "--vcpus", "16",
                                       "--ram-mb", "65536"], env, operator)
                assert created["vcpus"] == 16
        assert [r["name"] for r in invoke_json(["regions", "list"], env, operator)] == \
            ["eu-west", "us-east"]
        assert len(invoke_json(["hosts", "list", "eu-west"], env, operator)) == 2
        assert "static" in [f["name"] for f in invoke_json(["flavors"], env, operator)]

        invoke_json(["tenant", "create", "acme"], env, operator)
        tenant_token = invoke_json(["token", "create", "acme", "--description", "ci"],
                                   env, operator)["token"]
        assert "acme" in [t["name"] for t in invoke_json(["tenant", "list"], env, operator)]

        # tables for people, errors with the server's message and field
        table = invoke(["regions", "list"], env, operator)
        assert table.exit_code == 0 and "eu-west" in table.stdout
        missing = invoke(["regions", "show", "nowhere"], env, operator)
        assert missing.exit_code == 1 and "nowhere" in missing.stderr
        missing = invoke(["--json", "regions", "show", "nowhere"], env, operator)
        assert missing.exit_code == 1 and json.loads(missing.stdout)["error"]["code"] == 404
        invalid = invoke(["regions", "create", "ap-south", "--prefix", "not-a-prefix"], env, operator)
        assert invalid.exit_code == 1 and "field: client_prefixes" in invalid.stderr
        forbidden = invoke(["regions", "create", "ap-south", "--prefix", "10.3.0.0/16"],
                           env, tenant_token)
        assert forbidden.exit_code == 1 and "operator" in forbidden.stderr
        invalid = invoke(["regions", "create", "ap-south", "--prefix", "10.3.0.0/16"],
                         env, "cdn_not_a_token")
        assert invalid.exit_code == 1 and "unknown or revoked" in invalid.stderr

        quoted = invoke_json(["vcdn", "quote", *CREATE[2:], "--region", "eu-west:1000:4.0",
                              "--region", "us-east:500", "--lease-hours", "24"], env, tenant_token)
        assert quoted["vcpus"] == 7 and quoted["price"]["amount"] > 0  # 2x(2 caches + LB) + DNS
        assert invoke(["vcdn", "quote", *CREATE[2:], "--region", "eu-west:1000"], env,
                      tenant_token).exit_code == 2  # no lease: a usage error
        # the quote as a table, for every shipped flavor (qoe-video's figures are floats)
        invoke_json(["template", "register", str(QOE_TEMPLATE)], env, operator)
        for flavor, mos in (("static", "-"), ("qoe-video", "4.")):
            shown = invoke(["vcdn", "quote", "--name", "news", "--flavor", flavor, "--origin",
                            "http://o.example", "--region", "eu-west:1000:4.0",
                            "--lease-hours", "24"], env, tenant_token)
            assert shown.exit_code == 0, shown.stderr
            row = next(line for line in shown.stdout.splitlines() if "eu-west" in line)
            assert "1000" in row and mos in row, shown.stdout
        created = invoke_json([*CREATE, "--region", "eu-west:1000:4.0", "--region", "us-east:500",
                               "--min-mos", "3.8", "--lease-hours", "24", "--wait"],
                              env, tenant_token)
        assert created["operation"]["state"] == "COMPLETED", created["operation"]
        vcdn = created["vcdn"]
        assert vcdn["state"] == "ACTIVE" and vcdn["tenant"] == "acme"
        assert {r["name"] for r in vcdn["regions"]} == {"eu-west", "us-east"}
        assert vcdn["entry_point"]["hostname"]

        assert [v["id"] for v in invoke_json(["vcdn", "list"], env, tenant_token)] == [vcdn["id"]]
        shown = invoke(["vcdn", "show", vcdn["id"]], env, tenant_token)
        assert shown.exit_code == 0 and "ACTIVE" in shown.stdout
        operation_id = created["operation"]["id"]
        assert invoke_json(["op", "show", operation_id], env, tenant_token)["state"] == "COMPLETED"
        watched = invoke(["op", "watch", operation_id], env, tenant_token)
        assert watched.exit_code == 0 and "COMPLETED" in watched.stdout

        updated = invoke_json(["vcdn", "update", vcdn["id"], "--region", "us-east:800:p95=250",
                               "--wait"], env, tenant_token)
        assert updated["operation"]["state"] == "COMPLETED", updated["operation"]
        us_east = next(r for r in updated["vcdn"]["regions"] if r["name"] == "us-east")
        assert us_east["demand"] == 800
        assert us_east["quality"] == {"response_time": {"percentile": 95, "max_ms": 250}}
        assert len(invoke_json(["vcdn", "operations", vcdn["id"]], env, tenant_token)) == 2

        deleted = invoke_json(["vcdn", "delete", vcdn["id"], "--wait"], env, tenant_token)
        assert deleted["operation"]["state"] == "COMPLETED", deleted["operation"]
        assert deleted["operation"]["type"] == "TERMINATE"
        assert deleted["vcdn"]["state"] == "DELETED"


def test_a_failed_deployment_exits_non_zero(tmp_path):
    extra = {"CDNAAS_TEST_NOOP_FAIL_HOSTS": "eu-west-h1"}
    with running_stack(None, tmp_path, extra_env=extra) as stack:
        env, operator = stack.env, stack.operator_token
        assert invoke(["template", "register", str(TEMPLATE)], env, operator).exit_code == 0
        invoke_json(["regions", "create", "eu-west", "--prefix", "10.1.0.0/16"], env, operator)
        invoke_json(["hosts", "create", "eu-west", "eu-west-h1", "--vcpus", "8", "--ram-mb", "8192"],
                    env, operator)
        failed = invoke(["--json", *CREATE, "--region", "eu-west:100:4", "--lease-hours", "1",
                         "--wait"], env, operator)
        assert failed.exit_code == 1, failed.output
        operation = json.loads(failed.stdout)["operation"]
        assert operation["state"] in ("FAILED", "ROLLED_BACK")
        watched = invoke(["op", "watch", operation["id"]], env, operator)
        assert watched.exit_code == 1 and operation["state"] in watched.stdout


def _cdnaas(*args, env, timeout=90):
    return subprocess.run(stacks.cli_command(*args), env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture
def up_env(tmp_path):
    """Environment of a `cdnaas up` on free ports with the embedded default."""
    overlay = {**stacks.free_port_env(tmp_path / "state"), "CDNAAS_DATABASE_URL": None,
               "CDNAAS_VIM_DRIVER": "noop", "CDNAAS_IM_INTERVAL": "0.5", "CDNAAS_TOKEN": None,
               "CDNAAS_CONFIG": str(tmp_path / "config.yaml"), "HOME": str(tmp_path / "home")}
    env = stacks.child_environment(overlay)
    yield env
    stacks.stop_recorded(env["CDNAAS_STATE_DIR"], timeout=5)  # whatever a failed test left


def _recorded_pids(env):
    record = stacks.read_pid_file(env["CDNAAS_STATE_DIR"])
    return [entry["pid"] for entry in record["services"].values()]


def _gone(pids, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(stacks._alive(pid) for pid in pids):  # pylint: disable=protected-access
            return True
        time.sleep(0.1)
    return False


def test_up_detach_status_and_down(up_env):
    started = _cdnaas("up", "--detach", env=up_env)
    assert started.returncode == 0, started.stderr
    pids = _recorded_pids(up_env)
    assert len(pids) == 5
    status = _cdnaas("--json", "status", env=up_env)
    assert status.returncode == 0, status.stdout + status.stderr
    report = json.loads(status.stdout)
    assert all(entry["answers"] for entry in report.values())
    assert sorted(entry["pid"] for entry in report.values()) == sorted(pids)
    again = _cdnaas("up", "--detach", env=up_env)
    assert again.returncode == 1 and "already running" in again.stderr

    stopped = _cdnaas("down", env=up_env)
    assert stopped.returncode == 0, stopped.stderr
    assert _gone(pids)
    assert _cdnaas("status", env=up_env).returncode == 1
    assert "no stack is running" in _cdnaas("down", env=up_env).stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_up_in_the_foreground_stops_every_service_on_a_signal(up_env, signum):
    """Also when started with SIGINT ignored, as a script's background job is."""
    with subprocess.Popen(stacks.cli_command("up"), env=up_env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) \
            as up_process:
        deadline = time.monotonic() + 60
        while _cdnaas("status", env=up_env, timeout=30).returncode != 0:
            assert up_process.poll() is None, up_process.stderr.read()
            assert time.monotonic() < deadline, "the stack did not come up"
            time.sleep(0.3)
        pids = _recorded_pids(up_env)
        up_process.send_signal(signum)
        try:
            _, err = up_process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            up_process.kill()  # never leave the suite waiting on it
            raise
    assert up_process.returncode == 0, err
    assert "stopped" in err
    assert _gone(pids)
    assert not stacks.pid_file(up_env["CDNAAS_STATE_DIR"]).exists()


def test_down_from_another_shell_ends_a_foreground_up(up_env):
    with subprocess.Popen(stacks.cli_command("up"), env=up_env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as up_process:
        deadline = time.monotonic() + 60
        while _cdnaas("status", env=up_env, timeout=30).returncode != 0:
            assert up_process.poll() is None and time.monotonic() < deadline
            time.sleep(0.3)
        assert _cdnaas("down", env=up_env).returncode == 0
        _, err = up_process.communicate(timeout=30)
    assert up_process.returncode == 0, err


def test_demo_runs_twice(up_env):
    first = _cdnaas("demo", env=up_env, timeout=240)
    try:
        assert first.returncode == 0, first.stdout + first.stderr
        assert "is ACTIVE" in first.stdout
        assert "Entry point" in first.stdout
        settings = yaml.safe_load(Path(up_env["CDNAAS_CONFIG"]).read_text())
        assert settings["token"].startswith("cdn_")

        second = _cdnaas("--json", "demo", env=up_env, timeout=240)
        assert second.returncode == 0, second.stdout + second.stderr
        assert "reusing the running stack" in second.stderr
        assert "exists already" in second.stderr
        result = json.loads(second.stdout)
        assert result["vcdn"]["state"] == "ACTIVE"
        vcdns = invoke_json(["vcdn", "list"], up_env, result["tenant_token"])
        assert [v["state"] for v in vcdns if v["state"] != "DELETED"] == ["ACTIVE"]
    finally:
        _cdnaas("down", env=up_env)
    assert not os.path.exists(stacks.pid_file(up_env["CDNAAS_STATE_DIR"]))
