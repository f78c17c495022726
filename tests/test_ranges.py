"""Byte ranges for video delivery: the slice size a flavor sets (checked strictly), and on
real nginx on loopback (the sample origin, an origin shield, a cache behind it and a
balancer with HTTPS/HTTP/2 in front, as a vCDN with a shield chains them) ranges answered
206 from a MISS and a HIT with the origin's exact bytes over HTTP/1.1 and h2, If-Range,
416, several ranges, a seek into a 1 GiB object that costs the origin one slice, a request
without Range kept whole (not sliced), a purge that removes every slice and the whole
object, the keys log, and byte-range DASH and HLS viewers that play
without a stall. The local-driver end of it (a vCDN's own balancer) is in
``test_a_vcdn_on_the_local_driver_answers_ranges``."""
import contextlib
import copy
import dataclasses
import json
import os
import subprocess

import pytest
import requests
import yaml

from cdnaas.calibration import viewers
from cdnaas.common import errors, slicing
from cdnaas.common.flavor import PlanRequest
from cdnaas.common.ports import free_loopback_ports
from cdnaas.common.sig import Origin
from cdnaas.origin import server as origin_server
from cdnaas.ro.vim import purge
from cdnaas.ro.vim.local import clients
from cdnaas.ro.vim.openstack import userdata
from cdnaas.sidr import checks
from cdnaas.vnf import endpoints, fields, tools
from cdnaas.vnf.balancer import lb_config
from cdnaas.vnf.cache import cache_config
from cdnaas.vnf.options import nginx_slice_size
from tests.support.api import vcdn_body
from tests.support.certs import TestCA
from tests.test_cache_rules import stack  # noqa: F401 (a module's own stack)
from tests.test_openstack_driver import make_sig
from tests.test_origin_shield import STATIC
from tests.test_vnf_rendering import cache_values, need, start_nginx, wait_until

NAME = "ranges.example.com"
SEGMENT = "/video/hd/seg-1.m4s"
LARGE = "/large/1g.bin"
MIB = 1 << 20


# --- the slice size -----------------------------------------------------------------------

@pytest.mark.parametrize("value", ["256k", "65m", "1g", "0m", "01m", "1M", "1 m", "1m;",
                                   "", 1048576, None])
def test_slice_sizes_outside_512k_to_64m_are_refused(value):
    with pytest.raises(errors.BadRequest) as caught:
        slicing.slice_bytes(value)
    assert caught.value.field == "slice_size"
    with pytest.raises(fields.ConfigError, match="slice_size"):
        nginx_slice_size(value if value is not None else "")


@pytest.mark.parametrize("value,size", [("512k", 512 << 10), ("1m", MIB), ("64m", 64 * MIB)])
def test_slice_sizes_render_and_pass_nginx(tmp_path, value, size):
    need("nginx")
    assert slicing.slice_bytes(value) == size
    port, management = free_loopback_ports(2)
    text = cache_config(**cache_values(
        tmp_path, listen_address="127.0.0.1", listen_port=port, management_port=management,
        management_sources=["127.0.0.1"], service={"slice_size": value}))
    assert f"slice {value};" in text and f'"s":"{value}"' in text
    tools.check_nginx(text, str(tmp_path))


def test_the_flavor_sets_the_slice_size_sidr_checks_it_and_the_sig_carries_it():
    template = copy.deepcopy(STATIC)
    template["slice_size"] = "128k"
    assert checks.config_problems(template, None) == [{
        "field": "slice_size", "problem": "slice_size '128k' is not a size like 512k, 1m or "
                                          "64m (k or m, from 512k to 64m)"}]
    template["slice_size"] = "4m"
    request = PlanRequest(vcdn_id="v", hostname="h", origin=Origin("http", "o", 80),
                          regions=[], default_region="r", template=template)
    assert request.graph([]).service == {"slice_size": "4m"}
    assert PlanRequest(vcdn_id="v", hostname="h", origin=Origin("http", "o", 80), regions=[],
                       default_region="r", template=STATIC).graph([]).service == {}


# --- real nginx on loopback: origin <- shield <- cache <- balancer (HTTPS, h2) -------------

class Chain:
    """The sample origin, an origin shield, a cache fetching from it and a balancer with
    HTTPS in front of the cache, on loopback (stopped by the ``with``)."""

    def __init__(self, stack, tmp_path):
        self.origin, thread = origin_server.serve_in_thread("127.0.0.1", 0)
        stack.callback(thread.join, 5)
        stack.callback(self.origin.server_close)
        stack.callback(self.origin.shutdown)
        self.management = {}
        upstream = ("127.0.0.1", self.origin.server_address[1])
        for role in ("shield", "cache"):
            port, self.management[role] = free_loopback_ports(2)
            text = cache_config(
                name=f"loop-{role}", workers=1, listen_address="127.0.0.1", listen_port=port,
                origin=Origin("http", "origin.example.com", upstream[1]),
                origin_address=upstream[0], prefix_dir=str(tmp_path / role), daemon=False,
                management_sources=["127.0.0.1"], management_port=self.management[role],
                user="root", shield=role == "shield")
            stack.enter_context(start_nginx(text, tmp_path / role, self.management[role]))
            upstream = ("127.0.0.1", port)
        self.cache_prefix = tmp_path / "cache"
        issued = TestCA()
        self.cafile = tmp_path / "ca.pem"
        self.cafile.write_text(issued.root_pem)
        certificate = issued.issue([NAME])
        (tmp_path / "chain.pem").write_text(certificate.chain_pem)
        (tmp_path / "key.pem").write_text(certificate.key_pem)
        self.port, self.https_port, self.management["lb"] = free_loopback_ports(3)
        text = lb_config(
            name="loop-lb", workers=1, listen_address="127.0.0.1", listen_port=self.port,
            members=[("loop-cache", *upstream)], prefix_dir=str(tmp_path / "lb"),
            daemon=False, user="root", management_sources=["127.0.0.1"],
            management_port=self.management["lb"], server_names=[NAME],
            tls={"port": self.https_port, "certificate": str(tmp_path / "chain.pem"),
                 "key": str(tmp_path / "key.pem")})
        stack.enter_context(start_nginx(text, tmp_path / "lb", self.management["lb"]))

    def get(self, path, **headers):
        """An HTTP/1.1 GET through the balancer."""
        return requests.get(f"http://127.0.0.1:{self.port}{path}", headers=headers, timeout=30)

    def h2(self, path, *options):
        """``(HTTP version, status, headers, body)`` of an HTTPS GET through the balancer
        with HTTP/2 (curl, verifying the certificate), ``options`` added."""
        out = subprocess.run(
            ["curl", "-s", "--http2", "--cacert", str(self.cafile), "--max-time", "20",
             "--resolve", f"{NAME}:{self.https_port}:127.0.0.1", "-D", "-", "-o", "-",
             *options, f"https://{NAME}:{self.https_port}{path}"],
            capture_output=True, timeout=30, check=True).stdout
        head, _, body = out.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip()
                   for k, _, v in (line.partition(":") for line in lines[1:])}
        return lines[0].split()[0], int(lines[0].split()[1]), headers, body

    def origin_bytes(self, path):
        return self.origin.bytes_served().get(path, 0)

    def purge(self, paths, prefixes=()):
        """Purge as RO does on a shielded vCDN: the shield first, then the cache."""
        return [purge.invalidate("127.0.0.1", paths, list(prefixes), self.management[role])
                for role in ("shield", "cache")]


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    need("nginx", "curl", root=True)
    with contextlib.ExitStack() as stack:
        yield Chain(stack, tmp_path_factory.mktemp("ranges"))


def expected(path, first, last):
    return origin_server.object_range(path, first, last + 1)


def test_a_range_is_206_from_a_miss_and_a_hit_with_the_origins_bytes(chain):
    size = origin_server.QUALITIES["hd"]
    statuses = []
    for _ in range(2):
        answer = chain.get(SEGMENT, Range="bytes=1000-1099")
        assert answer.status_code == 206
        assert answer.headers["Content-Range"] == f"bytes 1000-1099/{size}"
        assert answer.content == expected(SEGMENT, 1000, 1099)
        statuses.append(answer.headers["X-Cache-Status"])
    assert statuses == ["MISS", "HIT"]
    # the whole object (a slice, 445,440 < 1 MiB) once from the origin, through the shield
    assert chain.origin_bytes(SEGMENT) == size
    # a request without Range is not sliced: it keeps the object whole under the rules'
    # key alone, a MISS once (the slice is kept apart), then a HIT
    for status in ("MISS", "HIT"):
        whole = chain.get(SEGMENT)
        assert (whole.status_code, whole.headers["X-Cache-Status"]) == (200, status)
        assert whole.headers["Accept-Ranges"] == "bytes"
        assert whole.content == origin_server.object_bytes(SEGMENT, size)
    assert chain.origin_bytes(SEGMENT) == 2 * size
    suffix = chain.get(SEGMENT, Range="bytes=-100")
    assert (suffix.status_code, suffix.content) == (206, expected(SEGMENT, size - 100, size - 1))


def test_ranges_over_https_and_http2(chain):
    path = "/video/hd/seg-2.m4s"
    seen = []
    for _ in range(2):
        version, status, headers, body = chain.h2(path, "-r", "0-99")
        assert (version, status) == ("HTTP/2", 206)
        assert headers["content-range"] == f"bytes 0-99/{origin_server.QUALITIES['hd']}"
        assert body == expected(path, 0, 99)
        seen.append(headers["x-cache-status"])
    assert seen == ["MISS", "HIT"]
    tag = origin_server.etag(path, origin_server.QUALITIES["hd"])
    assert chain.h2(path, "-r", "5-9", "-H", f"If-Range: {tag}")[1] == 206
    assert chain.h2(path, "-r", "5-9", "-H", 'If-Range: "other"')[1] == 200


def test_if_range_gives_the_range_on_a_strong_match_and_the_whole_object_otherwise(chain):
    path = "/video/hd/seg-3.m4s"
    size = origin_server.QUALITIES["hd"]
    tag = origin_server.etag(path, size)
    matched = chain.get(path, Range="bytes=10-19", **{"If-Range": tag})
    assert (matched.status_code, matched.content) == (206, expected(path, 10, 19))
    assert matched.headers["ETag"] == tag
    for other in ('"0123456789abcdef-6cc00"', f"W/{tag}", "Mon, 01 Jan 2024 00:00:00 GMT"):
        whole = chain.get(path, Range="bytes=10-19", **{"If-Range": other})
        assert whole.status_code == 200 and len(whole.content) == size, other
    dated = chain.get(path, Range="bytes=10-19", **{"If-Range": origin_server.LAST_MODIFIED})
    assert dated.status_code == 206


def test_an_unsatisfiable_range_is_416_with_the_size(chain):
    size = origin_server.QUALITIES["hd"]
    for _ in range(2):  # a MISS, then from the cache
        answer = chain.get("/video/hd/seg-4.m4s", Range=f"bytes={size}-")
        assert answer.status_code == 416
        assert answer.headers["Content-Range"] == f"bytes */{size}"


def test_several_ranges_get_the_whole_object(chain):
    """nginx's slice module answers one range per request (``r->single_range``): a request
    of several ranges gets the whole object, 200, from a MISS and a HIT alike, as RFC 9110
    allows (docs/byte-ranges.md)."""
    path, size = "/video/low/seg-1.m4s", origin_server.QUALITIES["low"]
    for status in ("MISS", "HIT"):
        answer = chain.get(path, Range="bytes=0-9,100-109")
        assert (answer.status_code, answer.headers["X-Cache-Status"]) == (200, status)
        assert answer.content == origin_server.object_bytes(path, size)
        assert "Content-Range" not in answer.headers


def test_a_seek_into_a_1_gib_object_costs_the_origin_one_slice(chain):
    first, last = 700 * MIB + 12345, 700 * MIB + 12345 + 99_999
    answer = chain.get(LARGE, Range=f"bytes={first}-{last}")
    assert answer.status_code == 206
    assert answer.headers["Content-Range"] == f"bytes {first}-{last}/{1 << 30}"
    assert answer.content == expected(LARGE, first, last)
    assert chain.origin_bytes(LARGE) == MIB  # one slice, through the shield and the cache
    # a range across a slice boundary: the next slice only
    across = chain.get(LARGE, Range=f"bytes={701 * MIB - 10}-{701 * MIB + 9}")
    assert across.content == expected(LARGE, 701 * MIB - 10, 701 * MIB + 9)
    assert chain.origin_bytes(LARGE) == 2 * MIB


def test_a_purge_removes_every_slice_and_the_object_is_fetched_again(chain):
    path = "/large/100m.bin"
    size = 100 * MIB
    for _ in range(2):
        for first in (0, 50 * MIB + 7):
            assert chain.get(path, Range=f"bytes={first}-{first + 9}").status_code == 206
    assert chain.origin_bytes(path) == 2 * MIB
    # the keys log: each request's first slice fetched (a request's later slices are
    # subrequests), with what a purge needs to name every slice; the HITs none
    lines = [json.loads(line) for line in
             (chain.cache_prefix / "logs" / "keys.log").read_text().splitlines()]
    assert [line for line in lines if line["u"] == path] == [
        {"u": path, "a": "", "s": "1m", "c": f"bytes {first}-{first + MIB - 1}/{size}"}
        for first in (0, 50 * MIB)]
    assert chain.purge([path]) == [(1, 1), (1, 1)]
    for first in (0, 50 * MIB + 7):
        again = chain.get(path, Range=f"bytes={first}-{first + 9}")
        assert again.headers["X-Cache-Status"] == "MISS"
        assert again.content == expected(path, first, first + 9)
    assert chain.origin_bytes(path) == 4 * MIB
    # a prefix purge too, and a path never fetched is not cached (404 from each)
    assert chain.purge(["/large/2m.bin"], ["/large/100"]) == [(2, 1), (2, 1)]
    assert chain.get(path, Range="bytes=0-9").headers["X-Cache-Status"] == "MISS"


def test_a_purge_removes_the_object_kept_whole_and_its_slices(chain):
    """An object fetched whole (no Range) and by a range is kept twice: under the rules'
    key and as a slice; a purge removes both, and each is fetched again."""
    path, size = "/large/3m.bin", 3 * MIB
    for status in ("MISS", "HIT"):
        whole = chain.get(path)
        assert (whole.status_code, whole.headers["X-Cache-Status"]) == (200, status)
        assert whole.content == origin_server.object_bytes(path, size)
        part = chain.get(path, Range=f"bytes={2 * MIB + 5}-{2 * MIB + 14}")
        assert (part.status_code, part.headers["X-Cache-Status"]) == (206, status)
        assert part.content == expected(path, 2 * MIB + 5, 2 * MIB + 14)
    assert chain.origin_bytes(path) == size + MIB  # whole once, one slice once
    lines = [json.loads(line) for line in
             (chain.cache_prefix / "logs" / "keys.log").read_text().splitlines()]
    assert [line["c"] for line in lines if line["u"] == path] == [
        "", f"bytes {2 * MIB}-{3 * MIB - 1}/{size}"]
    assert chain.purge([path]) == [(1, 1), (1, 1)]
    assert chain.get(path).headers["X-Cache-Status"] == "MISS"
    assert chain.get(path, Range="bytes=0-9").headers["X-Cache-Status"] == "MISS"
    assert chain.origin_bytes(path) == 2 * size + 2 * MIB


def test_the_usage_log_has_one_line_per_viewer_request_with_its_bytes(tmp_path):
    """A cache that logs usage (behind Octavia): a whole object is one line, a range
    served from several slices one line with the range's bytes."""
    need("nginx", root=True)
    with contextlib.ExitStack() as stack:
        origin, thread = origin_server.serve_in_thread("127.0.0.1", 0)
        stack.callback(thread.join, 5)
        stack.callback(origin.server_close)
        stack.callback(origin.shutdown)
        port, management = free_loopback_ports(2)
        text = cache_config(
            name="usage-cache", workers=1, listen_address="127.0.0.1", listen_port=port,
            origin=Origin("http", "origin.example.com", origin.server_address[1]),
            origin_address="127.0.0.1", prefix_dir=str(tmp_path), daemon=False,
            management_sources=["127.0.0.1"], management_port=management, user="root",
            usage_log=True, service={"slice_size": "512k"})
        stack.enter_context(start_nginx(text, tmp_path, management))
        url = f"http://127.0.0.1:{port}/large/2m.bin"
        assert len(requests.get(url, timeout=30).content) == 2 * MIB  # whole
        for _ in range(2):  # 3 slices: a MISS, then a HIT
            assert requests.get(url, headers={"Range": "bytes=500000-1100000"},
                                timeout=30).status_code == 206
        log = f"http://127.0.0.1:{management}{endpoints.USAGE_LOG_PATH}"
        # written 2 s late at most (buffered)
        text = wait_until(lambda: requests.get(log, timeout=5).text.count("\n") >= 3 and
                          requests.get(log, timeout=5).text, "three usage lines")
    lines = [json.loads(line) for line in text.splitlines()]
    assert [(line["s"], line["bb"], line["c"]) for line in lines] == [
        ("200", 2 * MIB, "MISS"), ("206", 600001, "MISS"), ("206", 600001, "HIT")]
    keys = (tmp_path / "logs" / "keys.log").read_text().splitlines()
    assert [json.loads(line)["c"] for line in keys] == ["", f"bytes 0-{(512 << 10) - 1}/{2 * MIB}"]


@pytest.mark.parametrize("manifest", ["/video/manifest-ranges.mpd", "/video/low/media.m3u8"])
def test_byte_range_dash_and_hls_viewers_play_without_a_stall(chain, manifest):
    ranges = viewers.manifest_ranges(viewers.fetch_manifest("127.0.0.1", chain.port, manifest),
                                     manifest)
    assert len(ranges) == origin_server.SEGMENTS and len({r[0] for r in ranges}) == 1
    report = viewers.Simulation("127.0.0.1", chain.port, None, viewers=4, seconds=8.0,
                                chunk_seconds=1.0, window_seconds=4.0, seed=7,
                                ranges=ranges).run()
    assert report["errors"] == report["non_2xx"] == 0
    assert report["requests"] >= 4 * 6  # every viewer played on
    assert [w[0] for viewer in report["windows"] for w in viewer] == [0] * 8


# --- a vCDN on the local driver --------------------------------------------------------------

@pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")
def test_a_vcdn_on_the_local_driver_answers_ranges(stack, origin):  # noqa: F811
    body = vcdn_body("ranged", origin=f"http://127.0.0.1:{origin.server_address[1]}")
    accepted = stack.acme.ok("POST", "/vcdns", 202, json=body)
    assert stack.acme.wait(accepted["operation"]["id"], 90)["state"] == "COMPLETED"
    vcdn = stack.acme.ok("GET", f"/vcdns/{accepted['vcdn']['id']}")
    balancer = vcdn["regions"][0]["load_balancer"]
    path = "/video/hd/seg-9.m4s"
    try:
        with clients.client(vcdn["id"], "eu-west", "10.1.0.40") as viewer:
            seen = []
            for _ in range(2):
                status, headers, content = viewer.fetch(f"http://{balancer}{path}",
                                                        headers=["Range: bytes=0-99"])
                assert status == 206 and content == expected(path, 0, 99)
                assert headers["content-range"] == f"bytes 0-99/{origin_server.QUALITIES['hd']}"
                seen.append(headers["x-cache-status"])
            assert seen == ["MISS", "HIT"]
            status, headers, _ = viewer.fetch(f"http://{balancer}{path}",
                                              headers=["Range: bytes=999999-"])
            assert status == 416
    finally:
        ended = stack.acme.ok("DELETE", f"/vcdns/{vcdn['id']}", 202)
        assert stack.acme.wait(ended["operation"]["id"], 60)["state"] == "COMPLETED"


# --- OpenStack: the same rendered file in cloud-init ----------------------------------------

def test_the_cloud_init_cache_config_slices_as_the_flavor_says_and_passes_nginx(tmp_path):
    need("nginx", root=True)
    sig = dataclasses.replace(make_sig({"north": 1}), service={"slice_size": "2m"})
    cache = sig.vnfs_in(role="cache")[0]
    address = "127.0.83.17"  # nginx -t binds the listeners: an address nothing else uses
    document = yaml.safe_load(userdata.cache(sig, cache, address, "192.0.2.10"))
    nginx = {f["path"]: f["content"] for f in document["write_files"]}[
        f"{userdata.CONF_DIR}/nginx.conf"]
    for line in ("slice 2m;", "map $http_range $cdnaas_slice_range {",
                 "default $slice_range;", 'proxy_cache_key "$uri$is_args$args$cdnaas_slice_range";',
                 "proxy_set_header Range $cdnaas_slice_range;", '"s":"2m"',
                 'proxy_cache_purge north-cache-1 "$uri$is_args$args$http_x_cdnaas_slice";'):
        assert line in nginx, line
    tools.check_nginx(nginx.replace(userdata.PREFIX, str(tmp_path)), str(tmp_path))
