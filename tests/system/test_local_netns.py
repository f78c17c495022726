"""Entering a network namespace from one thread (the local driver's way of
starting VNF tools without nsenter): only that thread moves, and it comes back;
deleting namespaces stops what still runs in them.

Its tests that start no process are in tests/unit/test_local_netns_units.py (the unit tier)."""
import concurrent.futures
import os
import subprocess
import time
import uuid

import pytest

from cdnaas.ro.vim.local import clients, loadgen, netns, network
from cdnaas.ro.vim.local.system import run

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


@pytest.fixture
def namespace():
    name = f"cdnt_{uuid.uuid4().hex[:8]}"
    run(["ip", "netns", "add", name])
    try:
        run(["ip", "-n", name, "link", "add", "probe0", "type", "veth", "peer", "name", "probe1"])
        yield name
    finally:
        run(["ip", "netns", "del", name], check=False)


def own_namespace():
    return os.readlink("/proc/thread-self/ns/net")


def links_seen():
    return {line.split()[0].split("@")[0] for line in run(["ip", "-br", "link"]).splitlines()}


def test_processes_started_inside_belong_to_the_namespace_and_the_thread_comes_back(namespace):
    home = own_namespace()

    def inside():
        with netns.entered(namespace):
            seen, there = links_seen(), own_namespace()
        return seen, there, own_namespace()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        seen, there, after = pool.submit(inside).result()
    assert seen == {"lo", "probe0", "probe1"}
    assert there != home and after == home
    assert own_namespace() == home and "probe0" not in links_seen()


def test_an_error_inside_still_brings_the_thread_back(namespace):
    home = own_namespace()
    with pytest.raises(ZeroDivisionError):
        with netns.entered(namespace):
            assert own_namespace() != home
            1 / 0  # noqa: B018
    assert own_namespace() == home


def test_run_in_a_namespace_runs_the_command_there(namespace):
    assert "probe0" in run(["ip", "-br", "link"], namespace=namespace)
    assert "probe0" not in run(["ip", "-br", "link"])


def test_deleting_namespaces_kills_what_runs_in_them_and_spares_the_rest(namespace):
    with netns.entered(namespace):
        inside = subprocess.Popen(["sleep", "60"])
    outside = subprocess.Popen(["sleep", "60"])
    try:
        network.delete_namespaces([namespace, "cdnt_gone_already"])
        deadline = time.monotonic() + 5
        while inside.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert inside.returncode == -9 and outside.poll() is None
        assert namespace not in network.list_namespaces()
    finally:
        for process in (inside, outside):
            process.kill()
            process.wait()


def test_a_namespace_made_again_while_its_old_self_is_still_freed_gets_its_veths():
    """A deployment undone and deployed again under the same id: the old namespace's
    veths outlive ``netns del`` while anything holds it (here an open handle, as a process
    that is still exiting does), and the new one's ``link add`` must not fail on them."""
    name = f"cdnt_{uuid.uuid4().hex[:8]}"
    bridge = f"cdntb{uuid.uuid4().hex[:8]}"
    run(["ip", "link", "add", bridge, "type", "bridge"])
    links = [(bridge, "198.18.254.10/24", [])]
    try:
        before = links_seen()
        network.create_namespaces([(name, links)])
        [veth] = links_seen() - before
        with open(f"{network.NETNS_DIR}/{name}", encoding="ascii"):
            network.delete_namespaces([name])
            assert veth in links_seen()  # the old namespace's veth is still here
            network.create_namespaces([(name, links)])  # was: RTNETLINK "File exists"
        inside = run(["ip", "-br", "-n", name, "link"])
        assert "eth0" in inside
    finally:
        network.delete_namespaces([name])
        run(["ip", "link", "del", bridge], check=False)


def test_a_generator_that_cannot_reach_its_vnf_says_where_it_stood_and_its_route(namespace):
    """A failed load run names the generator's place and its route to the VNF (the kernel's
    own answer), so "Network is unreachable" says which network the generator was on."""
    host = clients.Client(namespace, "198.18.254.254")
    said = loadgen._path(host, "198.18.253.10", "cbtest", "198.18.254.0/24")  # pylint: disable=protected-access
    assert said == ("generator 198.18.254.254 on bridge cbtest (198.18.254.0/24); its route "
                    "to 198.18.253.10: no route")
    run(["ip", "-n", namespace, "link", "set", "probe0", "up"])
    run(["ip", "-n", namespace, "route", "add", "198.18.253.0/24", "dev", "probe0"])
    said = loadgen._path(host, "198.18.253.10", "cbtest", "198.18.254.0/24")  # pylint: disable=protected-access
    assert "its route to 198.18.253.10: 198.18.253.10 dev probe0" in said
