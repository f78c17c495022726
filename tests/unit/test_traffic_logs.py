"""Usage logs in process: the balancer log parser against hostile lines, per-minute
figures, cursors, the noop driver's modelled logs, usage windows, rows and prices."""
import datetime as dt
import json

import pytest

from cdnaas.common import errors, windows
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.im import usage
from cdnaas.ro import traffic
from cdnaas.ro.vim.base import LogPosition
from cdnaas.ro.vim.logfiles import HEAD_BYTES, fingerprint
from cdnaas.ro.vim.noop import CHUNK_BYTES, HEADER_BYTES, MISS_EVERY, NoopDriver
from cdnaas.so import pricing
from tests.support.sigs import sample_sig

GOOD = {"t": 1767225600.123, "s": "200", "b": 445712, "bb": 445440, "rt": 0.004, "c": "HIT",
        "m": "GET", "u": "/video/hd/seg-1.m4s", "a": "10.1.0.10"}


def line(**changes):
    return json.dumps({**GOOD, **changes}).encode()


def test_a_line_as_nginx_writes_it_is_a_record():
    record = traffic.parse_line(
        b'{"t":1767225600.123,"s":"206","b":1300,"bb":1000,"rt":0.000,"c":"",'
        b'"m":"GET","u":"/a?q=\\"x\\"\\\\\\u0001","a":"10.1.0.10"}')
    assert record == traffic.Record(time=1767225600.123, status=206, bytes_sent=1300,
                                    body_bytes_sent=1000, request_time=0.0, cache_status="",
                                    method="GET", uri='/a?q="x"\\\x01', client="10.1.0.10")
    assert record.export("eu-west") == {
        "time": "2026-01-01T00:00:00.123Z", "region": "eu-west", "status": 206,
        "bytes_sent": 1300, "body_bytes_sent": 1000, "request_time": 0.0, "cache_status": None,
        "method": "GET", "uri": '/a?q="x"\\\x01', "client": "10.1.0.10", "host": None,
        "sni": None, "protocol": None, "tls_version": None, "user_agent": None, "referer": None}


def test_a_line_with_the_requests_names_and_client_exports_them():
    """(a line of a log written before these keys were, above, still parses)"""
    record = traffic.parse_line(line(
        h="cdn.shop.example", sni="cdn.shop.example", p="HTTP/2.0", tls="TLSv1.3",
        ua='Mozilla/5.0 \\"quoted\\"', r="https://shop.example/page?x=1"))
    exported = record.export("eu-west")
    assert {k: exported[k] for k in ("host", "sni", "protocol", "tls_version", "user_agent",
                                     "referer")} == {
        "host": "cdn.shop.example", "sni": "cdn.shop.example", "protocol": "HTTP/2.0",
        "tls_version": "TLSv1.3", "user_agent": 'Mozilla/5.0 \\"quoted\\"',
        "referer": "https://shop.example/page?x=1"}
    plain = traffic.parse_line(line(h="cdn.shop.example", sni="", p="HTTP/1.1", tls="",
                                    ua="", r="")).export("eu-west")
    assert plain["sni"] is None and plain["tls_version"] is None and plain["user_agent"] is None


@pytest.mark.parametrize("hostile", [
    line()[:-10],                                       # cut
    b"",                                                # nothing
    b"\x00" * 50,                                       # NUL bytes
    b"not json at all; {",                              # garbage
    b"[1, 2, 3]",                                       # JSON, not an object
    line(s=200),                                        # status as a number
    line(s="2000"), line(s="20x"), line(s="009\n"),     # not three digits
    line(b=-1), line(bb=10 ** 7), line(b="12"),         # negative, body above total, a string
    line(t=True), line(t=-1.0), line(t=1e12),           # a bool, before 1970, after 9000
    line(rt=1e9),                                       # an absurd request time
    line(c=None), line(u=["/x"]), line(a={"x": 1}),     # wrong types
    line(extra="field"),                                # a key it never writes
    line(ua=1), line(h=None), line(tls=["TLSv1.3"]),    # names that are not texts
    json.dumps({k: v for k, v in GOOD.items() if k != "a"}).encode(),  # a key missing
    line()[:-1] + b',"s":"500"}',                       # a key twice (an injected value)
    b'{"t":1,"s":"200","b":1,"bb":1,"rt":0,"c":"","m":"GET","u":"' + b"x" * (70 << 10)
    + b'","a":"1"}',                                    # huge
    b"[" * 100_000 + b"]" * 100_000,                    # deeply nested
])
def test_hostile_lines_are_skipped_never_trusted_in_part(hostile):
    assert traffic.parse_line(hostile) is None
    records, skipped = traffic.parse(hostile + b"\n" + line() + b"\n")
    assert len(records) == 1 and skipped == (1 if hostile.strip() else 0)


def test_invalid_utf8_in_a_uri_still_counts_with_a_replacement_character():
    record = traffic.parse_line(line(u="/x").replace(b'"/x"', b'"/\xff\xfe"'))
    assert record.uri == "/\ufffd\ufffd" and record.bytes_sent == GOOD["b"]
    exported = json.loads(traffic.ndjson_line(record.export("r")))
    assert exported["uri"] == "/\ufffd\ufffd"


def test_minutes_sum_bytes_hits_misses_and_status_classes():
    records = [traffic.parse_line(text) for text in (
        line(t=60.5, c="MISS"), line(t=61.0), line(t=119.999, s="404", b=200, bb=100, c=""),
        line(t=120.0, s="502", c="STALE"), line(t=121.0, s="101", c="BYPASS"))]
    assert traffic.minutes(records) == [
        {"minute": "1970-01-01T00:01:00Z", "requests": 3, "bytes_out": 2 * GOOD["b"] + 200,
         "hits": 1, "misses": 1, "status": {"2xx": 2, "3xx": 0, "4xx": 1, "5xx": 0}},
        {"minute": "1970-01-01T00:02:00Z", "requests": 2, "bytes_out": 2 * GOOD["b"],
         "hits": 1, "misses": 1, "status": {"2xx": 0, "3xx": 0, "4xx": 0, "5xx": 1}}]


def test_a_cursor_round_trips_and_a_forged_one_is_refused_naming_the_field():
    positions = {"eu-west-lb": LogPosition(log="ab" * 16, offset=123),
                 "us-east-lb": LogPosition(log="", offset=0)}
    assert traffic.decode_cursor(traffic.encode_cursor(positions)) == positions
    assert traffic.decode_cursor(None) == traffic.decode_cursor("") == {}
    forged = [
        "not base64!", "x" * 9000, traffic.encode_cursor(positions) + "\n",
        *(traffic.encode_cursor({}).replace("e30", text) for text in ("W10", "bnVsbA")),
        *(_cursor(document) for document in (
            {"Bad Name": ["", 0]}, {"lb": ["", -1]}, {"lb": ["", True]}, {"lb": ["x;y", 0]},
            {"lb": ["", 0, 1]}, {"lb": {"log": "", "offset": 0}}, {"lb": ["", 2 ** 70]}))]
    for cursor in forged:
        with pytest.raises(errors.BadRequest) as refused:
            traffic.decode_cursor(cursor)
        assert refused.value.field == "cursor", cursor


def _cursor(document):
    import base64  # pylint: disable=import-outside-toplevel
    return base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")


def test_a_file_is_named_by_its_first_line():
    assert fingerprint(b"") == fingerprint(b"half a line") == ""
    assert fingerprint(b"a\nb\n") == fingerprint(b"a\nc") != fingerprint(b"b\na\n")
    assert fingerprint(b"x" * HEAD_BYTES) != ""  # a first line longer than the head


# -- the noop driver's modelled logs ------------------------------------------------------------

def test_the_noop_logs_hold_one_record_per_modelled_request_read_once_each():
    now = [1_000_000.0]
    driver = NoopDriver(load=lambda _id: {"north": 300, "south": 30}, clock=lambda: now[0])
    deployment = driver.deploy(ServiceInstanceGraph.from_dict(
        sample_sig("noop-logs", {"north": 2, "south": 1})))
    first = traffic.read(driver, deployment, None)
    now[0] += 90
    second = traffic.read(driver, deployment, first["cursor"])
    metrics = {m.name: m.requests for m in driver.metrics(deployment)}  # the same counters
    now[0] += 30
    third = traffic.read(driver, deployment, second["cursor"])
    again = traffic.read(driver, deployment, first["cursor"])  # a lost answer, asked again
    for answer in (second, third, again):
        assert [r["region"] for r in answer["regions"]] == ["north", "south"]
        assert not any(r["lost"] or r["skipped"] for r in answer["regions"])

    def requests(answer, region):
        return sum(m["requests"] for r in answer["regions"] if r["region"] == region
                   for m in r["minutes"])
    assert requests(second, "north") == metrics["north-lb"] == 300 // 2 * 90
    assert requests(third, "north") + requests(second, "north") == requests(again, "north")
    minute = second["regions"][0]["minutes"][0]
    assert minute["bytes_out"] == minute["requests"] * (CHUNK_BYTES + HEADER_BYTES)
    assert abs(minute["misses"] - minute["requests"] / MISS_EVERY) <= 1
    assert minute["hits"] + minute["misses"] == minute["requests"]
    exported = b"".join(traffic.export(driver, deployment, 0, 1e11, 10 ** 6)).splitlines()
    assert len(exported) == requests(again, "north") + requests(again, "south")
    assert len(b"".join(traffic.export(driver, deployment, 0, 1e11, 5)).splitlines()) == 5
    driver.terminate(deployment)


# -- windows, usage rows and prices -----------------------------------------------------------

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("args, field", [
    ({"from": "yesterday"}, "from"), ({"to": "9999-01-01T00:00:00Z"}, "to"),
    ({"from": "1969-12-31T23:59:59Z"}, "from"), ({"from": "2026-03-01T12:00:00Z"}, "from"),
    ({"from": "2026-03-02T00:00:00Z", "to": "2026-03-01T00:00:00Z"}, "from"),
    ({"from": "2020-01-01T00:00:00Z"}, "from"), ({"to": "2026-03-01T10:00:00\n"}, "to"),
    ({"from": "2026-03-01T10:00:00+99:00"}, "from")])
def test_a_window_is_refused_naming_the_parameter(args, field):
    with pytest.raises(errors.BadRequest) as refused:
        windows.window(args, "from", "to", NOW, lambda end: end - dt.timedelta(hours=1),
                       dt.timedelta(days=366))
    assert refused.value.field == field


def test_a_window_defaults_and_bounds():
    assert windows.window({}, "from", "to", NOW, lambda end: end - dt.timedelta(hours=1),
                          dt.timedelta(days=1)) == (NOW - dt.timedelta(hours=1), NOW)
    assert windows.window({"to": "2026-03-01T00:00:00Z"}, "from", "to", NOW,
                          lambda _end: dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc),
                          dt.timedelta(days=1))[0] == NOW - dt.timedelta(days=1, hours=12)


def test_an_interval_is_split_over_its_minutes():
    start = NOW - dt.timedelta(seconds=95)
    assert usage.split(start, NOW) == [(NOW - dt.timedelta(minutes=2), 35.0),
                                       (NOW - dt.timedelta(minutes=1), 60.0)]
    assert sum(seconds for _m, seconds in usage.split(start, NOW + dt.timedelta(seconds=10))) \
        == 105.0
    assert usage.split(NOW, NOW) == []


@pytest.mark.parametrize("asked, field_ok", [(60, True), (3600, True), (90, False), (30, False)])
def test_a_series_step_is_a_multiple_of_a_minute(asked, field_ok):
    since = NOW - dt.timedelta(hours=1)
    if field_ok:
        assert usage.series_step(asked, since, NOW) == asked
    else:
        with pytest.raises(errors.BadRequest) as refused:
            usage.series_step(asked, since, NOW)
        assert refused.value.field == "step"
    assert usage.series_step(None, NOW - dt.timedelta(days=31), NOW) % 60 == 0
    with pytest.raises(errors.BadRequest):
        usage.series_step(60, NOW - dt.timedelta(days=2), NOW)  # 2880 points


def test_usage_figures_from_summed_rows():
    sums = {"requests": 10, "bytes_out": 2_500_000_000, "hits": 3, "misses": 1,
            "status_2xx": 9, "status_3xx": 0, "status_4xx": 1, "status_5xx": 0,
            "viewer_seconds": 7200.0, "vcpu_seconds": 36000.0, "energy_wh": 1500.0}
    assert usage.figures(sums) == {
        "requests": 10, "bytes_out": 2_500_000_000, "gb": 2.5, "hits": 3, "misses": 1,
        "hit_ratio": 0.75, "status": {"2xx": 9, "3xx": 0, "4xx": 1, "5xx": 0},
        "viewer_hours": 2.0, "vcpu_hours": 10.0, "kwh": 1.5}
    assert usage.figures(dict(sums, hits=0, misses=0))["hit_ratio"] is None


def test_one_pricing_function_prices_quotes_and_usage(tmp_path, monkeypatch):
    table = tmp_path / "prices.yaml"
    table.write_text("currency: EUR\nvcpu_hour: 0.02\nkwh: 0.25\ngb: 0.01\nviewer_hour: 0.001\n"
                     "flavors: {big: {gb: 0.005}}\n")
    monkeypatch.setenv("CDNAAS_PRICE_TABLE", str(table))
    assert pricing.price("static", 100, 4, 1000, 2000) == {
        "amount": 15.0, "currency": "EUR",
        "breakdown": {"compute": 2.0, "energy": 1.0, "traffic": 10.0, "viewers": 2.0,
                      "vcpu_hour": 0.02, "kwh": 0.25, "gb": 0.01, "viewer_hour": 0.001}}
    assert pricing.price("big", 0, 0, 1000)["amount"] == 5.0
    table.write_text("currency: EUR\nvcpu_hour: 0.02\nkwh: 0.25\n")  # an older table
    assert pricing.price("static", 10, 0, 1000, 1000)["amount"] == 0.2
