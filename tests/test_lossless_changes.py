"""Reconfigurations under load lose no viewer request (local driver, real nginx, root only).

Viewers of a client namespace of the region hold kept-alive connections to its balancer
(:class:`benchmarks.keepalive_viewers.Load`, a few hundred requests/s for a bounded time)
while the driver reloads every cache of a 2-cache region (a rotation of the signing keys:
the caches' config and then the balancers' change) or takes the region from 3 caches to 2
and back, or mends in place a balancer or its region's only cache whose master was killed, or
restores a deployment whose cache replacement RO did not finish. Every request must be
answered 200; a request a viewer sends again on a new connection because the balancer
closed its idle one (as browsers do) is counted apart.
"""
import dataclasses
import os
import signal
import threading
import time

import pytest

from benchmarks.keepalive_viewers import Load
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.delivery import access
from cdnaas.planning import resizing
from cdnaas.ro.vim.local import cgroups, clients, netns, network, processes
from cdnaas.ro.vim.local.driver import LocalDriver
from cdnaas.vnf import generation
from tests.test_local_driver import make_sig, state_dir  # noqa: F401 (this module's owner)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")

VIEWERS = 200
INTERVAL = 1.0  # s between a viewer's requests: VIEWERS / INTERVAL requests/s
PATHS = [f"/objects/chunk-low?n={n}" for n in range(40)]  # 73 KB, spread over the caches
SECRETS = {"a": "secret-a-" + "a" * 32, "b": "secret-b-" + "b" * 32}


def signed(*key_ids):
    """The vCDN's access control: signed URLs on ``/video/`` (which the viewers never ask
    for) with the keys ``key_ids``; a new key changes every cache's config."""
    return access.check({"signed_urls": {"paths": ["/video/"], "keys": [
        {"id": k, "secret": SECRETS[k]} for k in key_ids]}})


def under_load(deployment, sig, change):
    """Run ``change()`` while the viewers of ``sig``'s north region fetch through its
    balancer (from 2 s before to 2 s after); return the load and what ``change`` returned."""
    with clients.client(sig.vcdn_id, "north", "10.1.0.30") as host:
        load = Load(host.namespace, deployment.region_endpoints["north"], sig.hostname, PATHS,
                    VIEWERS, INTERVAL, seconds=180)
        thread = threading.Thread(target=load.run)
        thread.start()
        try:
            time.sleep(2)
            result = change()
            time.sleep(2)
        finally:
            load.stop()
            thread.join()
    print(f"\n{sum(load.outcomes.values())} requests: {dict(load.outcomes)}; "
          f"sent again on a new connection: {load.reconnects}")
    return load, result


def test_a_rolling_reload_of_every_cache_loses_no_request(origin, state_dir):  # noqa: F811
    driver = LocalDriver()
    sig = dataclasses.replace(make_sig(origin, {"north": 2, "south": 1}),
                              service={"access": signed("a")})
    deployment = driver.deploy(sig)
    try:
        rotated = dataclasses.replace(sig, service={"access": signed("a", "b")})
        steps = []
        load, deployment = under_load(deployment, sig, lambda: driver.update(
            deployment, rotated, lambda *step: steps.append(step), previous=sig))
        assert ("reconfigure caches", 3, 3) in steps  # every cache reloaded
        assert load.outcomes[200] >= VIEWERS * 4, dict(load.outcomes)
        assert load.lost == 0, dict(load.outcomes)
    finally:
        driver.terminate(deployment)


def test_scale_in_and_out_lose_no_request(origin, state_dir, monkeypatch):  # noqa: F811
    monkeypatch.setenv("CDNAAS_LOCAL_DRAIN_SECONDS", "10")
    driver = LocalDriver()
    sig = make_sig(origin, {"north": 3, "south": 1})
    deployment = driver.deploy(sig)
    try:
        for caches in (2, 3):
            load, deployment = under_load(deployment, sig, lambda caches=caches: driver.update(
                deployment, make_sig(origin, {"north": caches, "south": 1}, sig.vcdn_id)))
            names = {v.name for v in deployment.vnfs if v.role == "cache" and v.region == "north"}
            assert names == {f"north-cache-{k + 1}" for k in range(caches)}
            assert load.outcomes[200] >= VIEWERS * 4, dict(load.outcomes)
            assert load.lost == 0, (caches, dict(load.outcomes))
    finally:
        driver.terminate(deployment)



def test_a_balancer_whose_master_died_is_mended_losing_no_request(origin, state_dir):  # noqa: F811
    driver = LocalDriver()
    sig = make_sig(origin, {"north": 1, "south": 1})
    deployment = driver.deploy(sig)
    try:
        [pid_file] = state_dir.glob(f"local/*/{sig.vcdn_id}/north-lb/nginx.pid")
        master = processes.pid_in(pid_file)
        tree = [master, *cgroups.children(master)]

        def kill_and_restore():
            os.kill(master, signal.SIGKILL)  # its workers serve on alone
            time.sleep(1)
            return driver.restore(deployment, sig)
        load, _deployment = under_load(deployment, sig, kill_and_restore)
        assert load.outcomes[200] >= VIEWERS * 4, dict(load.outcomes)
        assert load.lost == 0, dict(load.outcomes)
        assert not any(processes.running(pid) for pid in tree)  # the orphans ended
        assert processes.pid_in(pid_file) != master
        namespace = network.namespace_name(deployment.resources["owner"], sig.vcdn_id, "north-lb")
        with netns.entered(namespace):  # what the old listeners queued moved to the new ones
            assert open("/proc/sys/net/ipv4/tcp_migrate_req", encoding="ascii").read() == "1\n"
        assert all(h.healthy for h in driver.health(deployment)), driver.health(deployment)
    finally:
        driver.terminate(deployment)


def kill_master(state_dir, sig, name):
    """SIGKILL the nginx master of ``sig``'s VNF ``name`` (its workers serve on alone);
    return its pid file and the master with its workers."""
    [pid_file] = state_dir.glob(f"local/*/{sig.vcdn_id}/{name}/nginx.pid")
    master = processes.pid_in(pid_file)
    tree = [master, *cgroups.children(master)]
    os.kill(master, signal.SIGKILL)
    return pid_file, tree


def test_a_regions_only_cache_whose_master_died_is_mended_losing_no_request(
        origin, state_dir):  # noqa: F811
    driver = LocalDriver()
    sig = make_sig(origin, {"north": 1, "south": 1})
    deployment = driver.deploy(sig)
    try:
        killed = {}

        def kill_and_restore():
            killed["pid_file"], killed["tree"] = kill_master(state_dir, sig, "north-cache-1")
            time.sleep(1)
            return driver.restore(deployment, sig)
        load, restored = under_load(deployment, sig, kill_and_restore)
        assert load.outcomes[200] >= VIEWERS * 4, dict(load.outcomes)
        assert load.lost == 0, dict(load.outcomes)
        assert restored == deployment  # the same cache, at its address
        assert not any(processes.running(pid) for pid in killed["tree"])
        assert processes.pid_in(killed["pid_file"]) != killed["tree"][0]
        assert all(h.healthy for h in driver.health(deployment)), driver.health(deployment)
    finally:
        driver.terminate(deployment)


def test_a_cache_running_another_generation_is_reloaded_losing_no_request(
        origin, state_dir):  # noqa: F811
    """RO wrote a cache's config but its reload never happened (RO killed between): the
    repair reloads it, though the config written is already the one it wants."""
    driver = LocalDriver()
    sig = make_sig(origin, {"north": 1, "south": 1})
    deployment = driver.deploy(sig)
    try:
        [prefix] = state_dir.glob(f"local/*/{sig.vcdn_id}/north-cache-1")
        conf = prefix / "nginx.conf"
        written = conf.read_text()
        conf.write_text(written.replace(generation.generation_of(written), "0" * 16))
        namespace = network.namespace_name(deployment.resources["owner"], sig.vcdn_id,
                                           "north-cache-1")
        processes.reload_nginx(namespace, str(prefix), str(conf),
                               f"{deployment.resources['owner']}_{sig.vcdn_id}_north-cache-1",
                               settle=True)
        conf.write_text(written)
        [cache] = [h for h in driver.health(deployment) if h.name == "north-cache-1"]
        assert not cache.healthy and cache.lasting, cache
        master = processes.pid_in(prefix / "nginx.pid")
        load, restored = under_load(deployment, sig, lambda: driver.restore(deployment, sig))
        assert load.outcomes[200] >= VIEWERS * 4, dict(load.outcomes)
        assert load.lost == 0, dict(load.outcomes)
        assert processes.pid_in(prefix / "nginx.pid") == master  # reloaded, not rebuilt
        assert all(h.healthy for h in driver.health(restored)), driver.health(restored)
    finally:
        driver.terminate(deployment)


class Interrupted(BaseException):
    """RO killed: what it was doing stops there, nothing undone."""


def test_an_interrupted_cache_replacement_is_undone_losing_no_request(
        origin, state_dir):  # noqa: F811
    """The Instance Manager's heal of a region's only cache, whose master was killed: SO
    replaces it by a new cache, and RO is killed once the balancer names only the new one,
    before the old one drained. RO's restart restores the recorded deployment: the old
    cache mended in place and back in the balancer before the new one goes."""
    driver = LocalDriver()
    sig = make_sig(origin, {"north": 1, "south": 1})
    deployment = driver.deploy(sig)
    try:
        healed = ServiceInstanceGraph.from_dict(sig.to_dict())
        assert resizing.replace(healed, "north-cache-1").name == "north-cache-2"
        kill_master(state_dir, sig, "north-cache-1")

        def stop_before_drain(step, done, total):
            if step == "drain and stop caches":
                raise Interrupted(step)
        with pytest.raises(Interrupted):
            driver.update(deployment, healed, stop_before_drain, previous=sig)
        assert driver.vnf_names(deployment) == {v.name for v in deployment.vnfs} \
            | {"north-cache-2"}
        load, restored = under_load(deployment, sig, lambda: driver.restore(deployment, sig))
        assert load.outcomes[200] >= VIEWERS * 4, dict(load.outcomes)
        assert load.lost == 0, dict(load.outcomes)
        assert driver.vnf_names(restored) == {v.name for v in deployment.vnfs}
        assert all(h.healthy for h in driver.health(restored)), driver.health(restored)
    finally:
        driver.terminate(deployment)
