"""Traffic of an ``openstack`` vCDN from its caches' usage logs (Octavia's balancers keep
none RO can read), its caches run here as their servers would (``tests/openstack/
caches_here.py``): each request once, with the bytes the viewer received and the viewer's
address Octavia adds, across the rotation the cache's own timer makes.

Its tests that start no process are in tests/unit/test_openstack_traffic_units.py (the unit
tier)."""
import os
import subprocess
import time

import pytest

from cdnaas.ro import traffic
from cdnaas.ro.vim.openstack import rebuild, userdata
from tests.openstack.caches_here import CachesHere, cache_files
from tests.openstack.fixtures import ORIGIN
from tests.system.test_openstack_driver import nothing_left
from tests.unit.test_openstack_driver_units import make_sig

# the caches run here (tests/openstack/caches_here.py)
pytestmark = pytest.mark.usefixtures("caches_here_env")


def read_all(driver, deployment, positions):
    """``(records by cache, positions after)`` of one read, every line parsed."""
    chunks = driver.read_logs(deployment, positions)
    found = {}
    for chunk in chunks:
        records, skipped = traffic.parse(chunk.data)
        assert skipped == 0 and not chunk.lost and not chunk.more, chunk
        found[chunk.name] = records
    return found, {c.name: c.position for c in chunks}


def eventually_read(driver, deployment, positions, wanted):
    """Read until each cache logged the records ``wanted`` says (``{cache: number}``;
    nginx writes its log every 2 s)."""
    for _attempt in range(40):
        found, after = read_all(driver, deployment, positions)
        if {name: len(records) for name, records in found.items()} == wanted:
            return found, after
        time.sleep(0.25)
    raise AssertionError(f"the caches logged {found}, not {wanted} records each")


def rotate(caches, cache, limit):
    """Run the cache's rotation unit as its timer would (the unit's script and
    environment from its user-data, the prefix moved as the cache's was)."""
    server = caches.admin_conn.compute.get_server(
        caches.deployment.resources["servers"][cache.name]["server_id"])
    files = cache_files(server)
    unit = files["/etc/systemd/system/cdnaas-usage-rotate.service"]
    environment = dict(item.split("=", 1) for line in unit.splitlines()
                       if line.startswith("Environment=") for item in line[12:].split())
    prefix = str(caches.prefixes[cache.name])
    environment = {k: v.replace(userdata.PREFIX, prefix) for k, v in environment.items()}
    script = caches.prefixes[cache.name] / "rotate-usage.sh"
    script.write_text(files[unit.split("ExecStart=/bin/sh ", 1)[1].strip()])
    subprocess.run(["sh", str(script)], check=True, env={**os.environ, **environment,
                                                         "LIMIT": str(limit)})


def test_usage_comes_from_the_caches_logs_with_the_viewers_and_their_bytes(
        driver, admin_conn):
    sig = make_sig({"north": 1, "south": 1})
    deployment = driver.deploy(sig)
    try:
        listeners = [admin_conn.load_balancer.get_listener(item["id"]) for info in
                     deployment.resources["regions"].values() for item in
                     admin_conn.load_balancer.get_load_balancer(info["lb_id"]).listeners]
        assert {str(l.insert_headers) for l in listeners} == {str({"X-Forwarded-For": "true"})}
        with CachesHere(admin_conn, deployment, (ORIGIN["host"], ORIGIN["port"])) as caches:
            start = {c.name: None for c in caches.caches}
            received = {}
            for index, cache in enumerate(caches.caches):
                viewer = f"10.{index + 1}.0.77"
                received[cache.name] = [caches.fetch(cache, path, viewer) for path in
                                        ("/objects/small", "/objects/small", "/nothing")]
            found, positions = eventually_read(driver, deployment, start, dict.fromkeys(start, 3))
            for index, cache in enumerate(caches.caches):  # (logged as each one ends)
                records = found[cache.name]
                assert sorted((r.status, r.bytes_sent) for r in records) == \
                    sorted(received[cache.name])
                assert sorted((r.uri, r.cache_status) for r in records) == [
                    ("/nothing", "MISS"), ("/objects/small", "HIT"), ("/objects/small", "MISS")]
                assert {r.client for r in records} == {f"10.{index + 1}.0.77"}

            # the cache's timer rotates its log past its size: the reader goes on
            north = caches.caches[0]
            rotate(caches, north, limit=10 << 20)  # below the size: nothing moves
            assert not (caches.prefixes[north.name] / "logs" / "usage.log.1").exists()
            rotate(caches, north, limit=0)
            assert (caches.prefixes[north.name] / "logs" / "usage.log.1").stat().st_size > 0
            more = caches.fetch(north, "/objects/small", "10.1.0.78")
            found, _after = eventually_read(driver, deployment, positions,
                                            {north.name: 1, caches.caches[1].name: 0})
            assert [(r.status, r.bytes_sent, r.client) for r in found[north.name]] == [
                (more[0], more[1], "10.1.0.78")]
    finally:
        driver.terminate(deployment)
    assert nothing_left(admin_conn, sig.vcdn_id) == {}


def test_the_health_of_a_cache_is_what_its_guest_says(driver, admin_conn, monkeypatch):
    """Where RO reaches the caches' management port, a cache whose server is ACTIVE is
    whole only when its guest answers there with the generation of the config its
    user-data wrote: another generation is a lasting fault, no answer one that may pass
    (none while its guest boots); elsewhere Nova's status is all RO sees."""
    monkeypatch.setenv("CDNAAS_OS_GUEST_BOOT_SECONDS", "0")
    sig = make_sig({"north": 2})
    deployment = driver.deploy(sig)

    def health(name):
        return next(h for h in driver.health(deployment) if h.name == name)
    try:
        with CachesHere(admin_conn, deployment, (ORIGIN["host"], ORIGIN["port"])) as caches:
            first, second = caches.caches
            wanted = deployment.resources["servers"][first.name][rebuild.GENERATION_KEY]
            assert wanted and health(first.name).healthy
            assert health(first.name).detail == f"server ACTIVE; runs generation {wanted}"
            prefix = caches.prefixes[first.name]  # another config loaded than the one written
            conf = prefix / "nginx.conf"
            conf.write_text(conf.read_text().replace(wanted, "0" * 16))
            subprocess.run(["ip", "netns", "exec", caches.namespace, "nginx", "-p",
                            f"{prefix}/", "-c", str(conf), "-s", "reload"], check=True)
            for _attempt in range(50):  # until the old workers end
                found = health(first.name)
                if not found.healthy:
                    break
                time.sleep(0.1)
            assert found.lasting and found.detail == (
                f"server ACTIVE; runs configuration generation {'0' * 16}, its user-data "
                f"wrote {wanted}")
            process = caches.processes[caches.caches.index(second)]
            process.terminate()
            process.wait(10)
            found = health(second.name)
            assert not found.healthy and not found.lasting
            assert found.detail == "server ACTIVE; no answer on its management port"
            monkeypatch.setenv("CDNAAS_OS_GUEST_BOOT_SECONDS", "3600")
            assert health(second.name).healthy  # its server was launched a moment ago
            monkeypatch.delenv("CDNAAS_OS_MANAGEMENT_CIDR")
            assert [h.detail for h in driver.health(deployment) if h.role == "cache"] == \
                ["server ACTIVE", "server ACTIVE"]
    finally:
        driver.terminate(deployment)
