"""Two DNS VNFs on OpenStack, against the mini cloud (``tests/openstack/``): each its own
server at its own address (``.3``, ``.5``), both in the entry point; the DNS servers run
here as their user-data says (``tests/openstack/dns_here.py``: the mini cloud's servers
boot no guest), and an update rebuilds them one at a time, the second only once the
first answers again, so the vCDN's name always has a server that answers."""
import dataclasses
import ipaddress
import threading
import time

import pytest

from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro.vim import dnsprobe
from cdnaas.vnf import subnet
from tests.openstack.dns_here import DnsHere
from tests.system.test_openstack_driver import OTHER_NAME, nothing_left
from tests.unit.test_openstack_driver_units import make_sig

# RO reaches the vCDN's networks (the caches run here): it waits for the DNS servers' answers
pytestmark = pytest.mark.usefixtures("caches_here_env")

GUEST_BOOT_SECONDS = 6  # a rebuilt server's guest answers this long after Nova was asked


def two_dns(caches):
    document = make_sig(caches).to_dict()
    document["vnfs"].append({**next(v for v in document["vnfs"] if v["role"] == "dns"),
                             "name": "dns-2"})
    return ServiceInstanceGraph.from_dict(document)


def test_two_dns_servers_are_rebuilt_one_at_a_time_the_second_once_the_first_answers(
        driver, admin_conn, monkeypatch):
    from openstack.compute.v2 import _proxy
    sig = two_dns({"north": 1, "south": 1})
    deployment = driver.deploy(sig)
    try:
        north = ipaddress.ip_network(deployment.resources["regions"]["north"]["cidr"])
        assert deployment.entry_point.dns_servers == [str(north[h]) for h in
                                                      subnet.DNS_HOSTS[:2]]  # .3, .5
        address = {v.name: v.address for v in deployment.vnfs if v.role == "dns"}
        servers = {deployment.resources["servers"][n]["server_id"]: n for n in address}
        vip = deployment.region_endpoints["north"]  # this machine is a client of no region
        with DnsHere(admin_conn, deployment) as here:
            assert {n: dnsprobe.resolves(a, sig.hostname) for n, a in address.items()} == \
                {"dns-1": [vip], "dns-2": [vip]}
            rebuilt, real = [], _proxy.Proxy.rebuild_server
            timers = []

            def rebuild_server(proxy, server, image, **attrs):  # the guest goes down, and
                name = servers[server]                           # boots with the new name
                rebuilt.append((name, time.monotonic(), {
                    n: dnsprobe.resolves(a, OTHER_NAME) for n, a in address.items()}))
                here.stop(name)
                answer = real(proxy, server, image, **attrs)
                timers.append(threading.Timer(GUEST_BOOT_SECONDS, here.start, [name]))
                timers[-1].start()
                return answer
            monkeypatch.setattr(_proxy.Proxy, "rebuild_server", rebuild_server)
            renamed = dataclasses.replace(sig, service={**sig.service,
                                                        "hostnames": [OTHER_NAME]})
            reports = []
            updated = driver.update(deployment, renamed, lambda *r: reports.append(r),
                                    previous=sig)
            for timer in timers:
                timer.join()
            assert [name for name, _at, _answers in rebuilt] == ["dns-1", "dns-2"]
            (_first, first_at, before), (_second, second_at, during) = rebuilt
            assert before == {"dns-1": [], "dns-2": []}  # the new name: nobody knew it
            assert during == {"dns-1": [vip], "dns-2": []}, "dns-1 answered, rebuilt"
            assert second_at - first_at >= GUEST_BOOT_SECONDS
            assert [r for r in reports if r[0] == "rebuild DNS"] == [
                ("rebuild DNS", 0, 2), ("rebuild DNS", 1, 2), ("rebuild DNS", 2, 2)]
            assert {n: dnsprobe.resolves(a, OTHER_NAME) for n, a in address.items()} == \
                {"dns-1": [vip], "dns-2": [vip]}
        deployment = updated
    finally:
        driver.terminate(deployment)
    assert nothing_left(admin_conn, sig.vcdn_id) == {}
