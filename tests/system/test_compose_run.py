"""docker-compose.yml run for real (issue 27, part 6): PostgreSQL, one migration, two
replicas of every service on the noop driver, on the private Docker engine of
scripts/dockerd with the images of scripts/compose-images (nothing pulled).

A vCDN is leased through the published API; one replica of every service is killed
(``docker kill``) inside its operation: the replicas doing its work (SO's claim, RO's
deployment), the API replica of the first published port, a SIDR replica and the IM
leader. The customer keeps being answered on the other port, the survivors take the work
over and end the operation, and a new vCDN is leased through them alone. ``down -v``
leaves no container, network or volume of the project.
"""
import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests
import yaml

from cdnaas.common import config
from cdnaas.so import states
from tests.support.api import Api, populate, vcdn_body

pytestmark = [pytest.mark.xdist_group("compose")]

REPO = Path(__file__).resolve().parents[2]
IMAGE_REPO = "/opt/cdnaas"  # where images/Dockerfile puts the source tree
DOCKER = "/usr/bin/docker"  # Debian's client (docker.io), the engine's own API version
PROJECT = f"cdnaas-compose-test-{os.getpid()}"
STEP_DELAY = 3  # seconds the noop driver takes per VNF: the kills land inside an operation
LEASE = 3  # seconds a replica's claim lasts: takeovers come quickly
SERVICES = ("api", "so", "sidr", "ro", "im")


def run(*argv, env=None, timeout=900):
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stdout}\n{done.stderr}"
    return done.stdout


def free_port_pair():
    """Two consecutive free TCP ports (one per API replica)."""
    while True:
        with socket.socket() as probe:
            probe.bind(("", 0))
            first = probe.getsockname()[1]
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("", first))
                b.bind(("", first + 1))
            return first
        except OSError:
            continue


@pytest.fixture(scope="module")
def engine():
    """The environment reaching the private engine, started for this module unless it ran,
    with the images built (quick when they are up to date)."""
    was_running = subprocess.run([REPO / "scripts/dockerd", "status"]).returncode == 0
    host = run(REPO / "scripts/dockerd", "start").strip()
    env = {**os.environ, "DOCKER_HOST": host.partition("=")[2]}
    try:
        run(REPO / "scripts/compose-images", env=env, timeout=1800)
        yield env
    finally:
        if not was_running:
            run(REPO / "scripts/dockerd", "stop")


class Deployment:
    """The compose project: its commands, containers and API."""

    def __init__(self, env, override):
        self.env, self.override = env, override

    def compose(self, *args, timeout=600):
        return run("docker-compose", "--project-name", PROJECT, "--project-directory", str(REPO),
                   "-f", str(REPO / "docker-compose.yml"), "-f", str(self.override), *args,
                   env=self.env, timeout=timeout)

    def docker(self, *args):
        return run(DOCKER, *args, env=self.env)

    def ours(self, kind):
        """Ids of the project's containers, networks or volumes (``kind``)."""
        listing = {"container": ("ps", "-aq"), "network": ("network", "ls", "-q"),
                   "volume": ("volume", "ls", "-q")}[kind]
        return self.docker(*listing, "--filter",
                           f"label=com.docker.compose.project={PROJECT}").split()

    def containers(self, service):
        """The inspected containers of ``service`` (running or not), by replica number."""
        ids = self.docker("ps", "-aq", "--filter", f"label=com.docker.compose.project={PROJECT}",
                          "--filter", f"label=com.docker.compose.service={service}").split()
        found = json.loads(self.docker("inspect", *ids)) if ids else []
        return sorted(found, key=lambda c: int(c["Config"]["Labels"][
            "com.docker.compose.container-number"]))

    def im_leader(self, timeout=60):
        """The IM replica that leads the reconcile passes, once one does (a loaded machine
        may take a few of its lease periods to elect one)."""
        deadline = time.monotonic() + timeout
        while not (leaders := [c for c in self.containers("im")
                               if "now leads im-reconcile" in self.logs(c)]):
            assert time.monotonic() < deadline, "no IM replica leads the reconcile passes"
            time.sleep(0.5)
        (leader,) = leaders
        return leader

    def logs(self, container):
        done = subprocess.run([DOCKER, "logs", container["Id"]], env=self.env,
                              capture_output=True, text=True)
        return done.stdout + done.stderr

    def sql(self, query):
        """One value of ``query`` run by psql inside the database's container."""
        (postgres,) = self.containers("postgres")
        return self.docker("exec", postgres["Id"], "psql", "-U", "cdnaas", "-d", "cdnaas",
                           "-At", "-c", query).strip()

    def claimant(self, service, rows, row_id):
        """The container of ``service`` whose replica claims ``row_id`` of ``rows``."""
        claimed = self.sql(f"SELECT claimed_by FROM {rows} WHERE id = '{row_id}'")
        host = claimed.partition(":")[0]
        (container,) = [c for c in self.containers(service) if c["Config"]["Hostname"] == host]
        return container


def healthy(deployment):
    return all(c["State"].get("Health", {}).get("Status") == "healthy"
               for svc in SERVICES for c in deployment.containers(svc))


@pytest.fixture(scope="module")
def deployment(engine, tmp_path_factory):
    port = free_port_pair()
    override = tmp_path_factory.mktemp("compose") / "test-override.yml"
    tuning = {"CDNAAS_LEASE_SECONDS": str(LEASE)}
    # RO's noop driver slowed by the tests' fault (tests/support/faults.py): the image holds
    # no test code, so RO's containers get tests/ and start with its sitecustomize
    slowed = {"environment": {**tuning, "CDNAAS_TEST_NOOP_STEP_DELAY": str(STEP_DELAY),
                              "PYTHONPATH": f"{IMAGE_REPO}/tests/support/startup"},
              "volumes": [f"{REPO / 'tests'}:{IMAGE_REPO}/tests:ro"]}
    override.write_text(yaml.safe_dump({"services": {
        svc: slowed if svc == "ro" else {"environment": tuning} for svc in SERVICES}}))
    env = {**engine, "CDNAAS_COMPOSE_API_PORTS": f"{port}-{port + 1}"}
    running = Deployment(env, override)
    try:
        running.compose("up", "-d", "--no-build")
        deadline = time.monotonic() + 600
        while not healthy(running):
            assert time.monotonic() < deadline, running.compose("ps")
            time.sleep(2)
        running.urls = [f"http://127.0.0.1:{p}" for p in (port, port + 1)]
        yield running
    finally:
        running.compose("down", "--volumes", "--remove-orphans", "--timeout", "10")


class Front:
    """The published API as ``populate`` wants it: one of its two ports."""

    def __init__(self, url, operator_token):
        self.urls, self.operator_token = {"api": url}, operator_token


def test_two_healthy_replicas_of_each_service_after_one_migration(deployment):
    for svc in SERVICES:
        replicas = deployment.containers(svc)
        assert len(replicas) == 2, svc
        assert len({c["Config"]["Hostname"] for c in replicas}) == 2, svc
    (migrate,) = deployment.containers("migrate")
    assert migrate["State"]["Status"] == "exited" and migrate["State"]["ExitCode"] == 0
    assert f"migrated {', '.join(config.SERVICES)}" in deployment.logs(migrate)
    assert deployment.sql("SELECT count(*) FROM so_regions") == "0"  # the schema is there
    assert [c["State"]["Status"] for c in deployment.containers("postgres")] == ["running"]
    for url in deployment.urls:  # each API replica on its own published port
        assert requests.get(f"{url}/healthz", timeout=10).status_code == 200


def wait_terminal(api, operation_id, timeout=120):
    """The operation once terminal, asked of ``api`` (every request must be answered)."""
    deadline = time.monotonic() + timeout
    while (found := api.ok("GET", f"/operations/{operation_id}"))["state"] not in \
            states.TERMINAL:
        assert time.monotonic() < deadline, found
        time.sleep(0.2)
    return found


def test_one_replica_of_each_service_killed_inside_an_operation(deployment):
    port = deployment.urls[0].rpartition(":")[2]
    (first_api,) = [c for c in deployment.containers("api")
                    if c["NetworkSettings"]["Ports"]["8700/tcp"][0]["HostPort"] == port]
    leader = deployment.im_leader()
    token = deployment.compose("exec", "-T", "api", "cdnaas", "admin", "create-token").strip()
    front = populate(Front(deployment.urls[1], token))
    vcdn = front.acme.ok("POST", "/vcdns", 202, json=vcdn_body("compose-kill"))
    vcdn_id, operation_id = vcdn["vcdn"]["id"], vcdn["operation"]["id"]
    deadline = time.monotonic() + 60
    while deployment.sql(f"SELECT status FROM ro_deployments WHERE id = '{vcdn_id}'") \
            != "DEPLOYING":
        assert time.monotonic() < deadline, "RO never started the deployment"
        time.sleep(0.2)
    killed = {"api": first_api, "so": deployment.claimant("so", "so_operations", operation_id),
              "sidr": deployment.containers("sidr")[0],
              "ro": deployment.claimant("ro", "ro_deployments", vcdn_id), "im": leader}
    deployment.docker("kill", *(c["Id"] for c in killed.values()))
    survivors = {svc: next(c for c in deployment.containers(svc)
                           if c["Id"] != killed[svc]["Id"]) for svc in SERVICES}

    with pytest.raises(requests.ConnectionError):  # the killed API replica's port is gone
        requests.get(f"{deployment.urls[0]}/healthz", timeout=5)
    ended = wait_terminal(front.acme, operation_id)
    # SO's survivor resumed the operation once the killed one's lease ran out; RO's undid
    # the half-built deployment (as a restarted RO does), so the operation rolled back
    assert f"taking over operation {operation_id}" in deployment.logs(survivors["so"])
    assert f"deployment {vcdn_id}: taking over from" in deployment.logs(survivors["ro"])
    assert ended["state"] in ("COMPLETED", "ROLLED_BACK"), ended
    deadline = time.monotonic() + 60
    while "now leads im-reconcile" not in deployment.logs(survivors["im"]):
        assert time.monotonic() < deadline, "the IM survivor never led"
        time.sleep(0.5)

    # the survivors alone serve a new lease, its template read from the SIDR survivor
    again = front.acme.ok("POST", "/vcdns", 202, json=vcdn_body("compose-after"))
    assert wait_terminal(front.acme, again["operation"]["id"])["state"] == "COMPLETED"
    assert front.acme.ok("GET", f"/vcdns/{again['vcdn']['id']}")["state"] == "ACTIVE"
    for gone in (vcdn_id, again["vcdn"]["id"]):
        if front.acme.ok("GET", f"/vcdns/{gone}")["state"] != "DELETED":
            deleted = front.acme.ok("DELETE", f"/vcdns/{gone}", 202)
            assert wait_terminal(front.acme, deleted["operation"]["id"])["state"] == "COMPLETED"
    for svc in SERVICES:  # nobody brought a killed replica back
        assert survivors[svc]["Id"] in [c["Id"] for c in deployment.containers(svc)
                                        if c["State"]["Running"]]


def test_down_leaves_nothing_of_the_project(deployment):
    deployment.compose("down", "--volumes", "--remove-orphans", "--timeout", "10")
    assert {kind: deployment.ours(kind) for kind in ("container", "network", "volume")} == \
        {"container": [], "network": [], "volume": []}
