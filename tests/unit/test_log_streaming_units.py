"""Log streams: the tests that start no process (the unit tier); the others, and what the
module covers, are in tests/system/test_log_streaming.py."""
import base64
import gzip
import dataclasses
import json

import pytest
import yaml

from cdnaas.common import errors
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.delivery import logstreams
from cdnaas.ro.vim import logship
from cdnaas.ro.vim.openstack import userdata
from tests.support.sigs import sample_sig


# --- the option ---------------------------------------------------------------------------

def refused_field(value):
    with pytest.raises(errors.BadRequest) as caught:
        logstreams.check(value, "log_streams")
    return caught.value.field


@pytest.mark.parametrize("value,field", [
    ({"type": "syslog"}, "log_streams"),
    ([{"type": "syslog", "address": "a.example:1"}] * 3, "log_streams"),
    ([{"type": "kafka"}], "log_streams[0].type"),
    ([{"type": "syslog", "address": "collector.example.com"}], "log_streams[0].address"),
    ([{"type": "syslog", "address": "collector.example.com:0"}], "log_streams[0].address"),
    ([{"type": "syslog", "address": "bad_host!:514"}], "log_streams[0].address"),
    ([{"type": "syslog", "address": "a.example\n:514"}], "log_streams[0].address"),
    ([{"type": "syslog", "address": "a.example:514\x00"}], "log_streams[0].address"),
    ([{"type": "syslog", "address": "a.example:514;"}], "log_streams[0].address"),
    ([{"type": "syslog", "address": "a.example:514", "transport": "udp"}],
     "log_streams[0].transport"),
    ([{"type": "syslog", "address": "a.example:514", "ca_certificate": "x"}],
     "log_streams[0].ca_certificate"),
    ([{"type": "syslog", "address": "a.example:6514", "transport": "tls",
       "ca_certificate": "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n"}],
     "log_streams[0].ca_certificate"),
    ([{"type": "syslog", "address": "a.example:514", "url": "https://a.example/"}],
     "log_streams[0].url"),
    ([{"type": "https", "url": "ftp://a.example/"}], "log_streams[0].url"),
    ([{"type": "https", "url": "http://a.example/"}], "log_streams[0].url"),
    ([{"type": "https", "url": "https://u:p@a.example/"}], "log_streams[0].url"),
    ([{"type": "https", "url": "https://a.example/x y"}], "log_streams[0].url"),
    ([{"type": "https", "url": "https://a.example/\r\nHost: x"}], "log_streams[0].url"),
    ([{"type": "https", "url": "https://a.example/", "headers": {"Host": "evil"}}],
     "log_streams[0].headers.'Host'"),
    ([{"type": "https", "url": "https://a.example/", "headers": {"Cookie": "a"}}],
     "log_streams[0].headers.'Cookie'"),
    ([{"type": "https", "url": "https://a.example/",
       "headers": {"Authorization": "a\r\nX-Evil: 1"}}],
     "log_streams[0].headers.'Authorization'"),
    ([{"type": "https", "url": "https://a.example/", "batch_records": 0}],
     "log_streams[0].batch_records"),
    ([{"type": "https", "url": "https://a.example/", "batch_seconds": True}],
     "log_streams[0].batch_seconds"),
    ([{"type": "syslog", "address": "127.0.0.1:514"}], "log_streams[0].address"),  # policy
    ([{"type": "https", "url": "https://169.254.169.254/"}], "log_streams[0].url"),
])
def test_each_refusal_names_its_field(value, field):
    assert refused_field(value) == field


def test_defaults_are_filled_headers_masked_and_checking_is_idempotent():
    stored = logstreams.check([
        {"type": "syslog", "address": "Collector.Example.com:6514", "transport": "tls"},
        {"type": "https", "url": "https://logs.example.com/in?x=1",
         "headers": {"Authorization": "Bearer s3cret"}}], "log_streams")
    assert stored[0] == {"type": "syslog", "address": "collector.example.com:6514",
                         "transport": "tls"}
    assert stored[1]["batch_records"] == 500 and stored[1]["batch_seconds"] == 5
    assert logstreams.check(stored, "service.log_streams") == stored
    assert logstreams.view(stored)[1]["headers"] == {"Authorization": logstreams.MASK}
    assert "s3cret" not in json.dumps(logstreams.view(stored))
    assert logstreams.check([], "log_streams") is None and logstreams.render(None) is None


# --- rendering: nginx (both VNFs that log viewers) and OpenStack's cloud-init -------------

STREAMS = [{"type": "syslog", "address": "203.0.113.9:6514", "transport": "tls"},
           {"type": "https", "url": "https://logs.example.com/in",
            "headers": {"X-Api-Key": "s3cret-key"}}]


def test_an_openstack_cache_runs_the_shipper_as_a_unit_of_its_own(monkeypatch):


    monkeypatch.setenv("CDNAAS_LOG_STREAM_QUEUE_RECORDS", "1234")
    document = sample_sig("os-logs", {"north": 1})
    document["service"] = {"log_streams": logstreams.check(STREAMS, "log_streams")}
    sig = ServiceInstanceGraph.from_dict(document)
    vnf = sig.vnfs_in("north", "cache")[0]
    cloud = yaml.safe_load(userdata.cache(sig, vnf, "10.200.1.10", "192.0.2.10"))
    files = {f["path"]: f for f in cloud["write_files"]}

    def content(path):
        entry = files[path]
        if entry.get("encoding") == "gz+b64":
            return gzip.decompress(base64.b64decode(entry["content"])).decode()
        return entry["content"]
    unit = content("/etc/systemd/system/cdnaas-logship.service")
    assert "LoadCredential=logship.json:/etc/cdnaas/logship.json" in unit
    assert f"ExecStart=/usr/bin/python3 {userdata.LOGSHIP_DIR}/logship.py " \
        "%d/logship.json" in unit
    assert "DynamicUser=yes" in unit and "Restart=always" in unit
    assert "CPUSchedulingPolicy=idle" in unit and "MemoryMax=" in unit
    assert content(f"{userdata.LOGSHIP_DIR}/logship.py") == open(logship.__file__).read()
    assert files["/etc/cdnaas/logship.json"]["permissions"] == "0600"
    config = json.loads(content("/etc/cdnaas/logship.json"))
    assert config["hostname"] == vnf.name and config["queue_records"] == 1234
    assert [(d["type"], d["connect"], d["port"], d["tls"]) for d in config["destinations"]] \
        == [("syslog", "203.0.113.9", 6514, True), ("https", "logs.example.com", 443, True)]
    assert config["destinations"][1]["headers"] == {"X-Api-Key": "s3cret-key"}
    assert ["systemctl", "enable", "--now", "cdnaas-logship.service", "cdnaas-cache.service",
            "cdnaas-usage-rotate.timer"] in cloud["runcmd"]
    nginx = content("/etc/cdnaas/nginx.conf")
    assert f"syslog:server=127.0.0.1:{logstreams.SYSLOG_PORT}" in nginx
    assert "s3cret-key" not in nginx
    # an origin shield logs no viewer: it streams nothing
    as_shield = dataclasses.replace(vnf, role="shield")
    shield = yaml.safe_load(userdata.cache(sig, as_shield, "10.200.1.10", "192.0.2.10"))
    assert "cdnaas-logship" not in json.dumps(shield) and "syslog:" not in json.dumps(shield)
    # without streams, nothing of the shipper
    plain = ServiceInstanceGraph.from_dict({**document, "service": {}})
    assert "logship" not in userdata.cache(plain, vnf, "10.200.1.10", "192.0.2.10")
