"""VNF configs: validation before rendering, the real tools' checks, and real traffic.

The end-to-end tests run the rendered configs on loopback (sample origin, two
cache nginx, one balancer nginx, dnsmasq) and, for the geo-DNS steering, in two
throwaway network namespaces. They need root and the binaries (Debian packages
nginx-light or nginx, dnsmasq-base, nftables, iproute2); without them they are
skipped, saying which is missing.

Its tests that start no process are in tests/unit/test_vnf_rendering_units.py (the unit
tier)."""
import concurrent.futures
import contextlib
import os
import secrets
import socket
import subprocess
import sys
import time

import dns.exception
import dns.message
import dns.query
import dns.rcode
import pytest
import requests

from cdnaas.common.sig import Origin
from cdnaas.origin import server as origin_server
from cdnaas.vnf import balancer, geodns, tools
from cdnaas.vnf.cache import cache_config
from cdnaas.vnf.fields import ConfigError
from tests.unit.test_vnf_rendering_units import (
    HOSTNAME,
    cache_values,
    dns_values,
    lb_values,
    steering_values)

HD = 435 * 1024


def need(*binaries, root=False):
    """Skip unless every binary is installed (and, with ``root``, we are root)."""
    if root and os.geteuid() != 0:
        pytest.skip("needs root")
    for binary in binaries:
        try:
            tools.tool_path(binary)
        except ConfigError as exc:
            pytest.skip(str(exc))


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until(condition, what, timeout=10.0):
    """Poll ``condition()`` until it returns a true value, at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = condition()
        except (OSError, requests.RequestException, dns.exception.DNSException):
            result = None
        if result:
            return result
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        time.sleep(0.05)


@contextlib.contextmanager
def running(argv, what, ready):
    """Run ``argv`` in the foreground until the block ends; wait for ``ready()`` first."""
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        wait_until(lambda: process.poll() is not None or ready(), f"{what} answers")
        assert process.poll() is None, f"{what} exited: {process.stderr.read().decode()}"
        yield process
    finally:
        stop(process)


def stop(process):
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    process.stderr.close()


# --- the real tools accept what we render, and say why they refuse ---------------------------

@pytest.mark.parametrize("variant", [
    {}, {"origin": Origin("https", "origin.example.com", 443), "daemon": False},
    {"listen_address": "::1", "origin_address": "2001:db8::1", "user": "root", "workers": 64,
     "management_sources": ["::1", "fd00::/8", "10.0.0.0/8"], "management_port": 65535},
])
def test_cache_config_passes_nginx(tmp_path, variant):
    need("nginx")
    tools.check_nginx(cache_config(**cache_values(tmp_path, **variant)),
                          str(tmp_path))
    assert (tmp_path / "cache").is_dir() and (tmp_path / "logs").is_dir()


def test_lb_config_passes_nginx(tmp_path):
    need("nginx")
    members = [(f"cache-{n}", f"10.1.0.{n}", 8080) for n in range(1, 17)] + [("v6", "fd00::9", 80)]
    tools.check_nginx(balancer.lb_config(**lb_values(tmp_path, members=members)),
                          str(tmp_path))


def test_check_nginx_reports_nginx_words():
    need("nginx")
    with pytest.raises(ConfigError, match='unknown directive "bogus"'):
        tools.check_nginx("events {}\nhttp { bogus on; }\n")


@pytest.mark.parametrize("variant", [{}, {"answer_address": "fd00::5", "log_queries": True}])
def test_dns_config_passes_dnsmasq(tmp_path, variant):
    need("dnsmasq")
    tools.check_dnsmasq(geodns.dns_config(**dns_values(tmp_path, **variant)))


def test_check_dnsmasq_reports_dnsmasq_words():
    need("dnsmasq")
    with pytest.raises(ConfigError, match="bad option"):
        tools.check_dnsmasq("no-such-option\n")


def test_steering_rules_pass_nft():
    need("nft", root=True)
    tools.check_nft(geodns.steering_rules(**steering_values()))
    tools.check_nft(geodns.steering_rules(**steering_values(rules=[])))


def test_check_nft_reports_nft_words():
    need("nft", root=True)
    with pytest.raises(ConfigError, match="syntax error"):
        tools.check_nft("table inet t { chain c { no such thing } }\n")


# --- nginx on loopback: origin <- two caches <- balancer ------------------------------------

def start_nginx(text, prefix, management_port):
    """Check ``text`` and run nginx on it (config has ``daemon off``) until the block ends."""
    tools.check_nginx(text, str(prefix))
    conf = prefix / "nginx.conf"
    conf.write_text(text)
    return running(["nginx", "-p", f"{prefix}/", "-c", str(conf)], f"nginx in {prefix}",
                   lambda: requests.get(f"http://127.0.0.1:{management_port}/nginx_status",
                                        timeout=1).ok)


class Vcdn:
    """An origin, two caches and a balancer on loopback, all stopped by :meth:`close`.

    Each nginx has its management listener on a port of its own (:attr:`management`),
    open to 127.0.0.1 only (a request from 127.0.0.2 stands for anyone else).
    """

    def __init__(self, tmp_path):
        self.stack = contextlib.ExitStack()
        try:
            self._start(tmp_path)
        except BaseException:
            self.stack.close()
            raise

    def _start(self, tmp_path):
        self.origin, thread = origin_server.serve_in_thread("127.0.0.1", 0)
        self.stack.callback(thread.join, 5)
        self.stack.callback(self.origin.server_close)
        self.stack.callback(self.origin.shutdown)
        self.caches, self.management = {}, {}
        for name in ("cache-a", "cache-b"):
            port, self.management[name] = free_port(), free_port()
            prefix = tmp_path / name
            text = cache_config(
                name=name, workers=2, listen_address="127.0.0.1", listen_port=port,
                origin=Origin("http", "origin.example.com", self.origin.server_address[1]),
                origin_address="127.0.0.1", prefix_dir=str(prefix), daemon=False,
                management_sources=["127.0.0.1"], management_port=self.management[name],
                # pytest's tmp_path is private to root: workers must not drop to nobody.
                user="root")
            self.caches[name] = (port, self.stack.enter_context(
                start_nginx(text, prefix, self.management[name])))
        self.lb_prefix = tmp_path / "lb"
        self.lb_port, self.management["lb"] = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.lb_port}"
        self.stack.enter_context(start_nginx(self.lb_text(list(self.caches)), self.lb_prefix,
                                             self.management["lb"]))

    def lb_text(self, members):
        return balancer.lb_config(
            name="lb", workers=2, listen_address="127.0.0.1", listen_port=self.lb_port,
            members=[(name, "127.0.0.1", self.caches[name][0]) for name in members],
            prefix_dir=str(self.lb_prefix), daemon=False, user="root",
            management_sources=["127.0.0.1"], management_port=self.management["lb"])

    def get(self, path):
        return requests.get(self.url + path, timeout=20, headers={"Host": HOSTNAME})

    def close(self):
        self.stack.close()


@pytest.fixture
def vcdn(tmp_path):
    need("nginx", root=True)
    built = Vcdn(tmp_path)
    try:
        yield built
    finally:
        built.close()


def test_fetch_through_the_balancer_miss_then_hit(vcdn):
    path = "/video/hd/seg-3.m4s"
    first, second = vcdn.get(path), vcdn.get(path)
    assert first.status_code == second.status_code == 200
    assert first.content == second.content == origin_server.object_bytes(path, HD)
    assert (first.headers["X-Cache-Status"], second.headers["X-Cache-Status"]) == ("MISS", "HIT")
    assert first.headers["X-Served-By"] == second.headers["X-Served-By"] in vcdn.caches
    assert first.headers["X-LB"] == "lb"
    assert vcdn.origin.stats() == {path: 1}


def test_200_concurrent_cold_fetches_cost_one_origin_fetch(vcdn):
    path = "/video/hd/seg-42.m4s"
    with concurrent.futures.ThreadPoolExecutor(max_workers=200) as pool:
        answers = list(pool.map(lambda _: vcdn.get(path), range(200), timeout=120))
    assert {a.status_code for a in answers} == {200}
    expected = origin_server.object_bytes(path, HD)
    assert all(a.content == expected for a in answers)
    assert vcdn.origin.stats() == {path: 1}


def test_uris_spread_over_the_caches(vcdn):
    served = {vcdn.get(f"/video/low/seg-{n}.m4s").headers["X-Served-By"] for n in range(1, 41)}
    assert served == set(vcdn.caches)


def test_a_killed_cache_is_routed_around(vcdn):
    paths = [f"/video/low/seg-{n}.m4s" for n in range(1, 41)]
    before = {path: vcdn.get(path).headers["X-Served-By"] for path in paths}
    stop(vcdn.caches["cache-a"][1])
    after = [vcdn.get(path) for path in paths]
    assert [a.status_code for a in after] == [200] * len(paths)
    assert {a.headers["X-Served-By"] for a in after} == {"cache-b"}
    assert "cache-a" in before.values()


def test_no_store_objects_are_not_cached(vcdn):
    answers = [vcdn.get("/nocache/live") for _ in range(3)]
    assert [a.headers["X-Cache-Status"] for a in answers] == ["MISS"] * 3
    assert vcdn.origin.stats() == {"/nocache/live": 3}


def status_from(source, url):
    """HTTP status (text, ``000`` for none) of ``GET url`` sent from the address ``source``."""
    return subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time",
                           "5", "--interface", source, url],
                          capture_output=True, text=True, timeout=10, check=False).stdout


def test_stub_status_answers_the_management_side_only(vcdn):
    need("curl")
    for port in vcdn.management.values():
        status = requests.get(f"http://127.0.0.1:{port}/nginx_status", timeout=5)
        assert status.status_code == 200 and status.text.startswith("Active connections:")
        assert status_from("127.0.0.2", f"http://127.0.0.1:{port}/nginx_status") == "403"
        assert requests.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 404


def test_public_listeners_answer_404_for_the_status_page(vcdn):
    for path in ["/nginx_status", "/nginx_status?x=1", "//nginx_status", "/%6Eginx_status",
                 "/./nginx_status"]:
        answer = vcdn.get(path)  # through the balancer: it answers itself, never forwards
        assert answer.status_code == 404 and "X-LB" not in answer.headers, path
        assert b"Active connections" not in answer.content
    for port, _process in vcdn.caches.values():
        answer = requests.get(f"http://127.0.0.1:{port}/nginx_status", timeout=5)
        assert answer.status_code == 404 and b"Active connections" not in answer.content
    assert vcdn.origin.stats() == {}  # and no cache asked the origin for it


def test_balancer_membership_changes_by_graceful_reload(vcdn):
    conf = vcdn.lb_prefix / "nginx.conf"
    reload = ["nginx", "-p", f"{vcdn.lb_prefix}/", "-c", str(conf), "-s", "reload"]
    paths = [f"/objects/chunk-low?n={n}" for n in range(20)]
    for members in (["cache-b"], list(vcdn.caches)):
        text = vcdn.lb_text(members)
        tools.check_nginx(text, str(vcdn.lb_prefix))
        conf.write_text(text)
        subprocess.run(reload, check=True, capture_output=True, timeout=10)
        wait_until(lambda members=members: {vcdn.get(p).headers["X-Served-By"]
                                            for p in paths} == set(members),
                   f"balancer serves from {members}")


# --- dnsmasq on loopback ------------------------------------------------------------------

def ask(server, port, name, rdtype, tcp=False, timeout=2.0):
    query = dns.message.make_query(name, rdtype)
    send = dns.query.tcp if tcp else dns.query.udp
    return send(query, server, port=port, timeout=timeout)


def addresses(answer):
    return sorted(item.address for rrset in answer.answer for item in rrset)


@pytest.mark.parametrize("answer_address,own_type,other_type", [
    ("10.1.0.1", "A", "AAAA"), ("fd00::5", "AAAA", "A")])
def test_dnsmasq_answers_the_vcdn_hostname_only(tmp_path, answer_address, own_type, other_type):
    need("dnsmasq", root=True)
    port = free_port()
    text = geodns.dns_config(**dns_values(tmp_path, answer_address=answer_address, port=port,
                                             ttl=30))
    tools.check_dnsmasq(text)
    conf = tmp_path / "dnsmasq.conf"
    conf.write_text(text)
    # --keep-in-foreground on the command line only, so the test owns the process.
    with running(["dnsmasq", "--keep-in-foreground", f"--conf-file={conf}"], "dnsmasq",
                 lambda: ask("127.0.0.1", port, HOSTNAME, own_type, timeout=0.2).answer):
        answer = ask("127.0.0.1", port, HOSTNAME, own_type)
        assert addresses(answer) == [answer_address]
        assert answer.answer[0].ttl == 30
        assert addresses(ask("127.0.0.1", port, HOSTNAME, own_type, tcp=True)) == [answer_address]
        other = ask("127.0.0.1", port, HOSTNAME, other_type)
        assert other.rcode() == dns.rcode.NOERROR and other.answer == []
        for name in ["www." + HOSTNAME, "example.com"]:
            refused = ask("127.0.0.1", port, name, own_type)
            assert refused.rcode() == dns.rcode.REFUSED and refused.answer == []
        assert (tmp_path / "dns-1.pid").read_text().strip().isdigit()


# --- geo-DNS steering in throwaway network namespaces -----------------------------------------

def sh(*argv):
    subprocess.run(argv, check=True, capture_output=True, timeout=30)


@pytest.fixture
def namespaces():
    """A DNS namespace (10.0.0.1/8) and a client one (10.1.0.2, 10.2.0.2, 10.9.0.2) on a veth."""
    need("nft", "ip", "dnsmasq", root=True)
    tag = secrets.token_hex(3)
    dns_ns, client_ns = f"cdnaas-test-{tag}-dns", f"cdnaas-test-{tag}-client"
    created = []
    try:
        for ns in (dns_ns, client_ns):
            sh("ip", "netns", "add", ns)
            created.append(ns)
        sh("ip", "-n", dns_ns, "link", "add", "veth0", "type", "veth",
           "peer", "name", "veth1", "netns", client_ns)
        sh("ip", "-n", dns_ns, "addr", "add", "10.0.0.1/8", "dev", "veth0")
        for address in ("10.1.0.2", "10.2.0.2", "10.9.0.2"):
            sh("ip", "-n", client_ns, "addr", "add", f"{address}/8", "dev", "veth1")
        for ns, link in ((dns_ns, "veth0"), (client_ns, "veth1")):
            sh("ip", "-n", ns, "link", "set", link, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        yield dns_ns, client_ns
    finally:
        for ns in created:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30,
                           check=False)


CLIENT = """
import sys, dns.message, dns.query
server, source, name, transport = sys.argv[1:]
query = dns.message.make_query(name, "A")
send = dns.query.tcp if transport == "tcp" else dns.query.udp
answer = send(query, server, port=53, timeout=2, source=source)
print(" ".join(sorted(item.address for rrset in answer.answer for item in rrset)))
"""


def test_dns_steered_by_client_prefix_in_namespaces(namespaces, tmp_path):
    dns_ns, client_ns = namespaces
    region_answers = {5301: "10.1.0.100", 5302: "10.2.0.100"}
    with contextlib.ExitStack() as stack:
        for port, answer in region_answers.items():
            prefix = tmp_path / str(port)
            prefix.mkdir()
            text = geodns.dns_config(**dns_values(prefix, name=f"dns-{port}", port=port,
                                                     answer_address=answer,
                                                     listen_addresses=["10.0.0.1"]))
            tools.check_dnsmasq(text)
            (prefix / "dnsmasq.conf").write_text(text)
            stack.enter_context(running(
                ["ip", "netns", "exec", dns_ns, "dnsmasq", "--keep-in-foreground",
                 f"--conf-file={prefix / 'dnsmasq.conf'}"], f"dnsmasq on port {port}",
                lambda prefix=prefix, port=port: (prefix / f"dns-{port}.pid").exists()))
        rules = geodns.steering_rules(table="cdnaas-geo",
                                         rules=[("10.1.0.0/16", 5301), ("10.2.0.0/16", 5302)],
                                         default_port=5301)
        tools.check_nft(rules)
        (tmp_path / "steering.nft").write_text(rules)
        for _ in range(2):  # applying twice replaces the table
            sh("ip", "netns", "exec", dns_ns, "nft", "-f", str(tmp_path / "steering.nft"))

        def resolve(source, transport):
            return subprocess.run(
                ["ip", "netns", "exec", client_ns, sys.executable, "-c", CLIENT, "10.0.0.1",
                 source, HOSTNAME, transport], capture_output=True, text=True, timeout=30,
                check=False).stdout.strip()

        for source, expected in [("10.1.0.2", "10.1.0.100"), ("10.2.0.2", "10.2.0.100"),
                                 ("10.9.0.2", "10.1.0.100")]:  # unknown prefix: default region
            wait_until(lambda source=source, expected=expected: resolve(source, "udp") == expected,
                       f"{source} resolves to {expected}")
            assert resolve(source, "tcp") == expected
        listed = subprocess.run(["ip", "netns", "exec", dns_ns, "nft", "list", "tables"],
                                capture_output=True, text=True, check=True, timeout=30).stdout
        assert listed.split("\n").count("table inet cdnaas-geo") == 1
