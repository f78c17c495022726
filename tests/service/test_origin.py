"""The sample origin: objects of the paper's sizes, the manifest, headers, counters, load.

Its tests that start no process are in tests/unit/test_origin_units.py (the unit tier)."""
import concurrent.futures
import http.client
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest
import requests

from cdnaas.origin import server as origin

KB = 1024
MPD = "{urn:mpeg:dash:schema:mpd:2011}"


@pytest.fixture
def base():
    """URL of a sample origin on a free loopback port, stopped after the test."""
    srv, thread = origin.serve_in_thread("127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)


@pytest.mark.parametrize("path,size", [
    ("/objects/small", 43), ("/objects/chunk-low", 73 * KB), ("/objects/chunk-hd", 435 * KB),
    ("/video/hd/seg-1.m4s", 435 * KB), ("/video/low/seg-300.m4s", 73 * KB),
])
def test_objects_have_the_papers_sizes_and_are_cacheable(base, path, size):
    first = requests.get(base + path, timeout=5)
    second = requests.get(base + path, timeout=5)
    assert first.status_code == 200
    assert len(first.content) == size == int(first.headers["Content-Length"])
    assert first.content == second.content == origin.object_bytes(path, size)
    assert first.headers["Cache-Control"] == "public, max-age=3600"


def test_manifest_lists_every_segment_of_both_qualities(base):
    answer = requests.get(base + "/video/manifest.mpd", timeout=5)
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "application/dash+xml"
    mpd = ET.fromstring(answer.content)
    assert mpd.find(f"{MPD}BaseURL").text == "/video/"
    representations = mpd.findall(f".//{MPD}Representation")
    assert [r.get("id") for r in representations] == ["hd", "low"]
    for representation in representations:
        quality = representation.get("id")
        segments = representation.find(f"{MPD}SegmentList")
        assert segments.get("duration") == "2"
        media = [s.get("media") for s in segments.findall(f"{MPD}SegmentURL")]
        assert media == [f"{quality}/seg-{n}.m4s" for n in range(1, origin.SEGMENTS + 1)]
    last = requests.get(f"{base}/video/low/seg-{origin.SEGMENTS}.m4s", timeout=5)
    assert last.status_code == 200


@pytest.mark.parametrize("path", ["/video/hd/seg-0.m4s", f"/video/hd/seg-{origin.SEGMENTS + 1}.m4s",
                                  "/video/4k/seg-1.m4s", "/objects/other", "/nocache/", "/"])
def test_unknown_paths_are_404(base, path):
    answer = requests.get(base + path, timeout=5)
    assert answer.status_code == 404
    assert answer.headers["Cache-Control"] == "no-store"


def test_nocache_objects_say_no_store(base):
    answer = requests.get(base + "/nocache/anything", timeout=5)
    assert answer.status_code == 200
    assert answer.headers["Cache-Control"] == "no-store"
    assert len(answer.content) == 43


def test_head_sends_headers_without_body(base):
    answer = requests.head(base + "/objects/chunk-low", timeout=5)
    assert answer.status_code == 200
    assert answer.headers["Content-Length"] == str(73 * KB)
    assert answer.content == b""


def test_fetches_are_counted_per_path_and_reset(base):
    with requests.Session() as session:  # one kept-alive connection for all requests
        for _ in range(3):
            session.get(base + "/objects/small", timeout=5)
        session.get(base + "/objects/missing", timeout=5)
        assert session.get(base + "/_stats", timeout=5).json() == {
            "/objects/small": 3, "/objects/missing": 1}
        assert session.post(base + "/_stats/reset", timeout=5).status_code == 204
        assert session.get(base + "/_stats", timeout=5).json() == {}


def test_keeps_connections_alive(base):
    connection = http.client.HTTPConnection(base.removeprefix("http://"), timeout=5)
    try:
        sockets = []
        for _ in range(2):
            connection.request("GET", "/objects/chunk-low")
            answer = connection.getresponse()
            answer.read()
            assert answer.status == 200 and not answer.will_close
            sockets.append(connection.sock)
        assert sockets[0] is sockets[1]
    finally:
        connection.close()


def test_200_concurrent_connections(base):
    def fetch(_):
        return requests.get(base + "/objects/chunk-low", timeout=20).content

    with concurrent.futures.ThreadPoolExecutor(max_workers=200) as pool:
        bodies = list(pool.map(fetch, range(200), timeout=60))
    expected = origin.object_bytes("/objects/chunk-low", 73 * KB)
    assert all(body == expected for body in bodies)
    assert requests.get(base + "/_stats", timeout=5).json() == {"/objects/chunk-low": 200}


def test_command_line_entry_serves():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "cdnaas.origin.server",
                                "--host", "127.0.0.1", "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                answer = requests.get(f"http://127.0.0.1:{port}/objects/small", timeout=1)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline, "origin did not answer within 10 s"
                assert process.poll() is None, "origin exited"
                time.sleep(0.05)
        assert answer.status_code == 200 and len(answer.content) == 43
    finally:
        process.terminate()
        process.wait(timeout=10)
