"""VNF configs: the tests that start no process (the unit tier); the others, and what the
module covers, are in tests/system/test_vnf_rendering.py."""
import os
import re
import shutil

import jinja2
import pytest

from cdnaas.common.sig import Origin
from cdnaas.vnf import balancer, endpoints, geodns, sizing, templates, tools
from cdnaas.vnf.cache import cache_config
from cdnaas.vnf.fields import ConfigError

HOSTNAME = "vcdn-1.cdn.example.net"


def cache_values(prefix_dir, /, **overrides):
    values = {"name": "north-cache-1", "workers": 2, "listen_address": "127.0.0.1",
              "listen_port": 8088, "origin": Origin("http", "origin.example.com", 8080),
              "origin_address": "192.0.2.10", "prefix_dir": str(prefix_dir),
              "management_sources": ["192.0.2.1"]}
    return {**values, **overrides}


def lb_values(prefix_dir, /, **overrides):
    values = {"name": "north-lb", "workers": 1, "listen_address": "127.0.0.1",
              "listen_port": 8000, "members": [("north-cache-1", "127.0.0.1", 8081),
                                               ("north-cache-2", "127.0.0.1", 8082)],
              "prefix_dir": str(prefix_dir), "management_sources": ["192.0.2.1"]}
    return {**values, **overrides}


def dns_values(prefix_dir, /, **overrides):
    values = {"name": "dns-1", "hostname": HOSTNAME, "answer_address": "10.1.0.1",
              "listen_addresses": ["127.0.0.1"], "port": 5353, "prefix_dir": str(prefix_dir)}
    return {**values, **overrides}


def steering_values(**overrides):
    values = {"table": "cdnaas-geo", "default_port": 5301,
              "rules": [("10.1.0.0/16", 5301), ("10.2.0.0/16", 5302), ("fd00:2::/64", 5302)]}
    return {**values, **overrides}


# --- rendering and validation (no tools needed) --------------------------------------------

@pytest.fixture
def rendered(monkeypatch):
    """Calls of templates.render, as (template, values), while still rendering."""
    calls = []
    real = templates.render

    def spy(template_name, **values):
        calls.append((template_name, values))
        return real(template_name, **values)

    monkeypatch.setattr(templates, "render", spy)
    return calls


def all_template_values(rendered, tmp_path):
    """Every template with a full set of values, as the config functions pass them."""
    cache_config(**cache_values(tmp_path, origin=Origin("https", "o.example", 443),
                                          user="root"))
    balancer.lb_config(**lb_values(tmp_path, user="root", tls={
        "port": 8443, "certificate": f"{tmp_path}/c.crt", "key": f"{tmp_path}/c.key"},
        # a policy that reads every value: plain HTTP redirected, ACME let through
        service={"https_policy": {"http": "redirect"}, "acme_thumbprint": "A" * 43}))
    geodns.dns_config(**dns_values(tmp_path))
    geodns.steering_rules(**steering_values())
    return list(rendered)


def test_every_template_needs_every_value(rendered, tmp_path):
    calls = all_template_values(rendered, tmp_path)
    assert sorted(name for name, _ in calls) == sorted(
        [templates.CACHE_TEMPLATE, templates.LB_TEMPLATE, templates.DNS_TEMPLATE,
         templates.STEERING_TEMPLATE])
    for template, values in calls:
        for missing in values:
            partial = {k: v for k, v in values.items() if k != missing}
            with pytest.raises(jinja2.UndefinedError):
                templates.render(template, **partial)


def test_cache_config_says_what_the_design_asks(tmp_path):
    text = cache_config(**cache_values(tmp_path, workers=3, daemon=False))
    for line in ["daemon off;", "worker_processes 3;", f"pid {tmp_path}/nginx.pid;",
                 f"error_log {tmp_path}/logs/error.log warn;",
                 f"client_body_temp_path {tmp_path}/temp;", f"scgi_temp_path {tmp_path}/temp;",
                 "worker_connections 25600;", "worker_rlimit_nofile 42452;",
                 "open_file_cache max=4096 inactive=60s;",
                 (f"proxy_cache_path {tmp_path}/cache levels=1:2 keys_zone=north-cache-1:16m "
                  "max_size=1024m inactive=60m use_temp_path=off;"),
                 "server 192.0.2.10:8080;", "keepalive 32;", "listen 127.0.0.1:8088 backlog=30000 reuseport;",
                 "proxy_pass http://origin;", "proxy_set_header Host origin.example.com:8080;",
                 'proxy_cache_key "$uri$is_args$args$cdnaas_slice_range";', "proxy_cache_lock on;",
                 "slice 1m;", "proxy_set_header Range $cdnaas_slice_range;",
                 "map $http_range $cdnaas_slice_range {", "volatile;", "default $slice_range;",
                 "proxy_cache_valid 200 206 301 302 10m;",
                 "add_header X-Cache-Status $upstream_cache_status always;",
                 "add_header X-Served-By north-cache-1 always;", "stub_status;",
                 f"listen 127.0.0.1:{endpoints.MANAGEMENT_PORT} reuseport;"]:
        assert line in text
    assert "user " not in text
    assert "proxy_ignore_headers" not in text
    assert "proxy_ssl" not in text


def test_cache_config_ipv6_and_https(tmp_path):
    text = cache_config(**cache_values(
        tmp_path, listen_address="fd00::1", origin=Origin("https", "2001:db8::7", 443),
        origin_address="2001:db8::7"))
    assert "listen [fd00::1]:8088 backlog=20000 reuseport;" in text
    assert f"listen [fd00::1]:{endpoints.MANAGEMENT_PORT} reuseport;" in text
    assert "server [2001:db8::7]:443;" in text
    assert "proxy_set_header Host [2001:db8::7];" in text
    assert "proxy_pass https://origin;" in text and "proxy_ssl_server_name on;" in text


def test_limits_follow_the_planned_connections_and_vcpus():
    # one worker of one vCPU planned for the paper's 10,000 connections
    one = sizing.nginx_limits(10_000, 1)
    assert (one.workers, one.connections, one.backlog) == (1, 25600, 10_000)
    assert one.connections >= 2 * 10_000 and one.files >= one.connections + 10_000
    # twice the viewers on twice the workers: the same per worker
    assert sizing.nginx_limits(20_000, 2).connections == one.connections
    assert sizing.nginx_limits(40_000, 1).connections >= 80_000
    assert sizing.nginx_limits(100, 1).connections == 1024  # never below nginx's default
    assert sizing.nginx_limits(10**6, 1).backlog == 65535   # the kernel's largest
    # a balancer's pool: a kept-alive connection per client connection of its worker
    assert sizing.nginx_limits(10_000, 1, members=4).keepalive == 12_500
    assert sizing.nginx_limits(100, 1, members=16).keepalive == 512


def test_a_host_that_caps_open_files_gets_more_workers_not_fewer_connections():
    # a cache: one worker still holds its 10,000 planned viewers within 20,000 files
    cache = sizing.nginx_limits(10_000, 1, max_files=20_000)
    assert (cache.workers, cache.files) == (1, 20_000)
    assert cache.connections >= 10_000 * 1.25
    # a balancer holds a second connection per viewer: two workers share the plan
    lb = sizing.nginx_limits(10_000, 1, max_files=20_000, proxied=True)
    assert lb.workers == 2 and lb.files <= 20_000
    assert lb.connections >= 2 * 10_000 * 1.25 / lb.workers
    assert sizing.nginx_limits(10_000, 1, max_files=1 << 20, proxied=True).workers == 1
    with pytest.raises(ConfigError, match="max_files"):
        sizing.nginx_limits(10_000, 1, max_files=10)


def test_planned_connections_from_the_sig():
    from cdnaas.common.sig import ServiceInstanceGraph
    from tests.support.sigs import sample_sig
    document = sample_sig("plan-1", {"north": 4, "south": 1})  # caches of 2 vCPUs
    document["regions"][0]["demand"] = 100_000
    sig = ServiceInstanceGraph.from_dict(document)
    vnf = {v.name: v for v in sig.vnfs}
    # balancer: every viewer of the region; cache: twice its vCPU share of them
    assert sizing.planned_connections(sig, vnf["north-lb"]) == 100_000
    assert sizing.planned_connections(sig, vnf["north-cache-1"]) == 50_000
    # never below 10,000 per vCPU (south's demand is 5,000)
    assert sizing.planned_connections(sig, vnf["south-cache-1"]) == 20_000
    assert sizing.planned_connections(sig, vnf["south-lb"]) == 10_000


def test_host_limits_read_back_from_the_rendered_config(tmp_path):
    text = cache_config(**cache_values(tmp_path, workers=1,
                                                 planned_connections=40_000))
    limits = sizing.nginx_limits(40_000, 1)
    assert f"worker_rlimit_nofile {limits.files};" in text
    assert f"worker_connections {limits.connections};" in text
    assert sizing.host_limits(text) == {"nofile": limits.files, "somaxconn": 40_000}
    lb = balancer.lb_config(**lb_values(tmp_path, planned_connections=40_000))
    assert f"keepalive {limits.keepalive};" in lb and "proxy_connect_timeout 3s;" in lb
    assert sizing.host_limits(lb)["somaxconn"] == 40_000


def test_lb_config_hashes_uris_over_members(tmp_path):
    text = balancer.lb_config(**lb_values(tmp_path, members=[("c-1", "127.0.0.1", 8081),
                                                              ("c-2", "fd00::2", 80)]))
    assert "hash $uri$is_args$args consistent;" in text
    assert "server 127.0.0.1:8081 max_fails=1 fail_timeout=5s;  # c-1" in text
    assert "server [fd00::2]:80 max_fails=1 fail_timeout=5s;  # c-2" in text
    assert "proxy_next_upstream error timeout http_502 http_503 http_504;" in text


def servers(text):
    """The ``server { ... }`` blocks of an nginx config's http block, by their first listen."""
    blocks, depth, current = {}, 0, None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped == "server {" and current is None:
            current, depth = [], 0
        if current is not None:
            current.append(stripped)
            depth += stripped.count("{") - stripped.count("}")
            if depth == 0:
                listen = next(x for x in current if x.startswith("listen "))
                blocks[listen.split()[1].rstrip(";")] = "\n".join(current)
                current = None
    return blocks


@pytest.mark.parametrize("function,values", [(cache_config, cache_values),
                                             (balancer.lb_config, lb_values)])
def test_status_page_is_on_the_management_listener_only(tmp_path, function, values):
    text = function(**values(tmp_path, management_sources=["198.18.4.1", "10.9.0.0/16",
                                                           "fd00:9::/64", "2001:db8::1/128"]))
    assert text.count("stub_status;") == 1
    public_port = values(tmp_path)["listen_port"]
    blocks = servers(text)
    assert set(blocks) == {f"127.0.0.1:{public_port}", f"127.0.0.1:{endpoints.MANAGEMENT_PORT}"}
    public = blocks[f"127.0.0.1:{public_port}"]
    management = blocks[f"127.0.0.1:{endpoints.MANAGEMENT_PORT}"]
    assert "location = /nginx_status {\nreturn 404;\n}" in public
    assert "stub_status" not in public and "allow" not in public
    assert ("allow 198.18.4.1;\nallow 10.9.0.0/16;\nallow fd00:9::/64;\nallow 2001:db8::1;\n"
            "deny all;") in management
    assert "location = /nginx_status {\nstub_status;\n}" in management
    # a cache's management listener proxies only to its own public listener (prefetches)
    assert set(re.findall(r"proxy_pass (\S+);", management)) <= {f"http://127.0.0.1:{public_port}"}
    other = function(**values(tmp_path, management_port=9100))
    assert set(servers(other)) == {f"127.0.0.1:{public_port}", "127.0.0.1:9100"}


def test_dns_config_answers_a_or_aaaa(tmp_path):
    v4 = geodns.dns_config(**dns_values(tmp_path, listen_addresses=["10.0.0.1", "fd00::1"]))
    assert f"host-record={HOSTNAME},10.1.0.1" in v4 and "filter-AAAA" in v4
    assert "listen-address=10.0.0.1\nlisten-address=fd00::1\n" in v4
    assert "keep-in-foreground" not in v4 and "user=root" in v4 and "log-queries" not in v4
    v6 = geodns.dns_config(**dns_values(tmp_path, answer_address="FD00:0::5", log_queries=True))
    assert f"host-record={HOSTNAME},fd00::5" in v6 and "filter-A\n" in v6 and "log-queries" in v6


def test_steering_rules_per_family():
    text = geodns.steering_rules(**steering_values(rules=[("10.1.0.7/16", 5301),
                                                             ("fd00:2::1/64", 5302)]))
    assert "ip saddr 10.1.0.0/16 udp dport 53 redirect to :5301" in text
    assert "ip6 saddr fd00:2::/64 tcp dport 53 redirect to :5302" in text
    assert text.rstrip().endswith("tcp dport 53 redirect to :5301\n    }\n}")


#: Characters that could end a value and start a directive (or a comment) in some config.
INJECTIONS = ["x;y", "x}", "x{", "a\nb", "a b", "a\tb", 'a"b', "a'b", "a$b", "a#b", "a\\b",
              "a=b", "a/b/../c", "a\n", "a\r", "a\x00"]


def _bad_calls(tmp_path):
    """(description, config function, values) for values that must never be rendered."""
    calls = []
    for bad in INJECTIONS:
        calls += [
            (f"cache name {bad!r}", cache_config, cache_values(tmp_path, name=bad)),
            (f"origin host {bad!r}", cache_config,
             cache_values(tmp_path, origin=Origin("http", f"origin{bad}.com", 8080))),
            (f"prefix_dir {bad!r}", cache_config,
             cache_values(tmp_path, prefix_dir=f"{tmp_path}/{bad}")),
            (f"lb member {bad!r}", balancer.lb_config,
             lb_values(tmp_path, members=[(bad, "127.0.0.1", 8081)])),
            (f"hostname {bad!r}", geodns.dns_config,
             dns_values(tmp_path, hostname=f"vcdn{bad}.example.net")),
            (f"dns prefix_dir {bad!r}", geodns.dns_config,
             dns_values(tmp_path, prefix_dir=f"{tmp_path}/{bad}")),
            (f"table {bad!r}", geodns.steering_rules, steering_values(table=f"t{bad}")),
        ]
    calls += [
        ("listen address with a zone", cache_config,
         cache_values(tmp_path, listen_address="fe80::1%lo;evil")),
        ("origin address with a zone", cache_config,
         cache_values(tmp_path, origin_address="fe80::1%x}")),
        ("origin host with a trailing newline", cache_config,
         cache_values(tmp_path, origin=Origin("http", "origin.example.com\n", 8080))),
        ("hostname with a trailing newline", geodns.dns_config,
         dns_values(tmp_path, hostname=HOSTNAME + "\n")),
        ("origin address a name", cache_config,
         cache_values(tmp_path, origin_address="origin.example.com")),
        ("origin scheme", cache_config,
         cache_values(tmp_path, origin=Origin("ftp", "origin.example.com", 21))),
        ("origin port 0", cache_config,
         cache_values(tmp_path, origin=Origin("http", "origin.example.com", 0))),
        ("origin port text", cache_config,
         cache_values(tmp_path, origin=Origin("http", "origin.example.com", "80;"))),
        ("origin a dict", cache_config,
         cache_values(tmp_path, origin={"scheme": "http", "host": "o", "port": 80})),
        ("listen port 65536", cache_config, cache_values(tmp_path, listen_port=65536)),
        ("workers 0", cache_config, cache_values(tmp_path, workers=0)),
        ("workers 65", cache_config, cache_values(tmp_path, workers=65)),
        ("workers True", cache_config, cache_values(tmp_path, workers=True)),
        ("daemon text", cache_config, cache_values(tmp_path, daemon="on; user root")),
        ("cache size text", cache_config,
         cache_values(tmp_path, cache_max_size_mb="1g;")),
        ("cache inactive", cache_config,
         cache_values(tmp_path, cache_inactive="60m; x")),
        ("user", cache_config, cache_values(tmp_path, user="root;")),
        ("empty name", cache_config, cache_values(tmp_path, name="")),
        ("name starting with -", cache_config, cache_values(tmp_path, name="-x")),
        ("uppercase name", cache_config, cache_values(tmp_path, name="Cache")),
        ("name of 64", cache_config, cache_values(tmp_path, name="c" * 64)),
        ("relative prefix_dir", cache_config, cache_values(tmp_path, prefix_dir="var")),
        ("prefix_dir with ..", cache_config,
         cache_values(tmp_path, prefix_dir="/var/../etc")),
        ("prefix_dir /", cache_config, cache_values(tmp_path, prefix_dir="/")),
        ("no members", balancer.lb_config, lb_values(tmp_path, members=[])),
        ("member pair", balancer.lb_config, lb_values(tmp_path, members=[("c", "127.0.0.1")])),
        ("member address", balancer.lb_config,
         lb_values(tmp_path, members=[("c", "127.0.0.1:80", 80)])),
        ("member names twice", balancer.lb_config,
         lb_values(tmp_path, members=[("c", "127.0.0.1", 80), ("c", "127.0.0.2", 80)])),
        ("answer address", geodns.dns_config,
         dns_values(tmp_path, answer_address="10.0.0.1\naddress=/#/6.6.6.6")),
        ("no listen addresses", geodns.dns_config, dns_values(tmp_path, listen_addresses=[])),
        ("listen addresses text", geodns.dns_config,
         dns_values(tmp_path, listen_addresses="127.0.0.1")),
        ("ttl", geodns.dns_config, dns_values(tmp_path, ttl=-1)),
        ("hostname label too long", geodns.dns_config,
         dns_values(tmp_path, hostname="a" * 64 + ".example.net")),
        ("hostname uppercase", geodns.dns_config, dns_values(tmp_path, hostname="Vcdn.example")),
        ("steering prefix", geodns.steering_rules,
         steering_values(rules=[("10.1.0.0/16 accept", 5301)])),
        ("steering port", geodns.steering_rules, steering_values(rules=[("10.1.0.0/16", 0)])),
        ("default port", geodns.steering_rules, steering_values(default_port="53")),
        ("table digit first", geodns.steering_rules, steering_values(table="1geo")),
        ("steering prefix with a zone", geodns.steering_rules,
         steering_values(rules=[("fe80::%x}\n}\ntable inet evil {/64", 5301)])),
    ]
    for function, values in ((cache_config, cache_values),
                             (balancer.lb_config, lb_values)):
        port = values(tmp_path)["listen_port"]
        for bad in INJECTIONS + ["10.0.0.1; allow all", "all", "10.0.0.0/33", "fe80::1%eth0",
                                 "fe80::%x}/64", ""]:
            calls.append((f"{function.__name__} management source {bad!r}", function,
                          values(tmp_path, management_sources=[bad])))
        calls += [
            (f"{function.__name__} no management source", function,
             values(tmp_path, management_sources=[])),
            (f"{function.__name__} management sources text", function,
             values(tmp_path, management_sources="10.0.0.1")),
            (f"{function.__name__} management source a number", function,
             values(tmp_path, management_sources=[167772161])),
            (f"{function.__name__} management port the public one", function,
             values(tmp_path, management_port=port)),
            (f"{function.__name__} management port 0", function,
             values(tmp_path, management_port=0)),
            (f"{function.__name__} management port text", function,
             values(tmp_path, management_port="8081;")),
        ]
    return calls


def test_values_that_could_inject_are_refused_before_rendering(rendered, tmp_path):
    for description, function, values in _bad_calls(tmp_path):
        with pytest.raises(ConfigError):
            function(**values)
        assert rendered == [], f"{description} reached the template"


def test_refusal_names_the_value(tmp_path):
    with pytest.raises(ConfigError, match=r"origin.host 'evil.com;proxy_pass' is not a DNS name"):
        cache_config(**cache_values(
            tmp_path, origin=Origin("http", "evil.com;proxy_pass", 80)))
    with pytest.raises(ConfigError, match=r"management_sources\[0\] '10.0.0.1; allow all' is "
                                          "not an address prefix"):
        balancer.lb_config(**lb_values(tmp_path, management_sources=["10.0.0.1; allow all"]))
    with pytest.raises(ConfigError, match=r"management_port 8088 is the public listen_port"):
        cache_config(**cache_values(tmp_path, management_port=8088))
    with pytest.raises(ConfigError, match=r"members\[1\].port 0 is not an integer"):
        balancer.lb_config(**lb_values(tmp_path, members=[("a", "127.0.0.1", 1),
                                                           ("b", "127.0.0.1", 0)]))


# --- the real tools accept what we render, and say why they refuse ---------------------------


def test_check_nft_needs_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ConfigError, match="needs root"):
        tools.check_nft(geodns.steering_rules(**steering_values()))


# --- geo-DNS steering in throwaway network namespaces -----------------------------------------


def test_binaries_are_found_in_sbin(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    for tool in ("nginx", "dnsmasq", "nft"):
        if shutil.which(tool, path="/usr/sbin:/sbin"):
            assert tools.tool_path(tool).startswith(("/usr/sbin/", "/sbin/"))
    with pytest.raises(ConfigError, match="no-such-tool is not installed"):
        tools.tool_path("no-such-tool")
