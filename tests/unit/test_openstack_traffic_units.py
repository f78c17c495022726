"""Traffic of an ``openstack`` vCDN from its caches' usage logs (Octavia's balancers keep none
RO can read), its caches run here as their servers would (``tests/openstack/
caches_here.py``): the tests that start no process (the unit tier); the others, and what the
module covers, are in tests/system/test_openstack_traffic.py."""

import yaml

from cdnaas.ro.vim.openstack import userdata
from cdnaas.vnf import endpoints
from tests.unit.test_openstack_driver_units import make_sig


def test_a_cache_rotates_its_usage_log_every_minute_past_its_size():
    """The user-data's timer and unit: every minute, the script with the log, its size
    and nginx's pid file in the image's prefix."""
    sig = make_sig({"north": 1})
    vnf = sig.vnfs_in("north", "cache")[0]
    document = yaml.safe_load(userdata.cache(sig, vnf, "10.200.1.10", "192.0.2.10"))
    files = {f["path"]: f["content"] for f in document["write_files"]}
    assert "OnUnitActiveSec=1min" in files["/etc/systemd/system/cdnaas-usage-rotate.timer"]
    unit = files["/etc/systemd/system/cdnaas-usage-rotate.service"]
    assert (f"Environment=LOG={userdata.PREFIX}/logs/usage.log "
            f"LIMIT={userdata.USAGE_ROTATE_BYTES} PID={userdata.PREFIX}/nginx.pid") in unit
    assert ["systemctl", "enable", "--now", "cdnaas-cache.service",
            "cdnaas-usage-rotate.timer"] in document["runcmd"]
    nginx = files[f"{userdata.CONF_DIR}/nginx.conf"]
    assert f"location = {endpoints.USAGE_LOG_PATH} {{" in nginx
    assert f"alias {userdata.PREFIX}/logs/usage.log;" in nginx
