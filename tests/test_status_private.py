"""Status pages of caches and balancers answer the RO side only, never viewers: the
OpenStack side (the management CIDR setting, the caches' user-data and security
group). The templates are checked in ``tests/test_vnf_rendering.py`` (rendering, ``nginx
-t``, 404 on public listeners and 403 to others on loopback) and the local driver in
``tests/test_local_driver.py`` (a viewer in a region, RO's metrics).
"""
import base64
import uuid

import pytest
import yaml

from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro.vim.base import DeploymentFailed
from cdnaas.ro.vim.openstack import plan, userdata
from cdnaas.ro.vim.openstack.driver import OpenStackDriver
from cdnaas.vnf import endpoints
from tests.openstack.fixtures import ORIGIN
from tests.support.sigs import sample_sig


def make_sig(caches, vcdn_id=None):
    document = sample_sig(vcdn_id or f"status-{uuid.uuid4().hex[:8]}", caches)
    document["origin"] = dict(ORIGIN)
    return ServiceInstanceGraph.from_dict(document)


def nginx_of(user_data):
    files = {f["path"]: f["content"] for f in yaml.safe_load(user_data)["write_files"]}
    return files[f"{userdata.CONF_DIR}/nginx.conf"]


def management_block(nginx):
    return nginx[nginx.index(f":{endpoints.MANAGEMENT_PORT} reuseport;"):]


def test_management_cidrs_are_read_at_call_time_and_checked(monkeypatch):
    monkeypatch.delenv("CDNAAS_OS_MANAGEMENT_CIDR", raising=False)
    assert plan.management_cidrs() == []
    monkeypatch.setenv("CDNAAS_OS_MANAGEMENT_CIDR", " 10.20.0.7/24, fd00:9::/64 ,")
    assert plan.management_cidrs() == ["10.20.0.0/24", "fd00:9::/64"]
    for bad in ["0.0.0.0/0", "::/0", "10.0.0.0/8; allow all", "fe80::%eth0/64", "any"]:
        monkeypatch.setenv("CDNAAS_OS_MANAGEMENT_CIDR", bad)
        with pytest.raises(DeploymentFailed, match="CDNAAS_OS_MANAGEMENT_CIDR"):
            plan.management_cidrs()


def test_cache_user_data_allows_the_management_side_only():
    sig = make_sig({"north": 1})
    cache = sig.vnfs_in(role="cache")[0]
    alone = nginx_of(userdata.cache(sig, cache, "10.200.0.10", "192.0.2.80"))
    assert "location = /nginx_status {\n            return 404;" in alone
    assert alone.count("stub_status;") == 1
    # without a management CIDR, only the VNF itself reads its status page
    assert "allow 10.200.0.10;\n        deny all;" in management_block(alone)
    opened = nginx_of(userdata.cache(sig, cache, "10.200.0.10", "192.0.2.80",
                                     ["192.0.2.0/24", "fd00:9::/64"]))
    assert "allow 192.0.2.0/24;\n        allow fd00:9::/64;\n        deny all;" in \
        management_block(opened)
    assert "allow 10.200.0.10;" not in opened


@pytest.fixture
def driver(openstack_env):
    driver = OpenStackDriver()
    driver.check_prerequisites()
    return driver


def test_openstack_opens_the_management_port_to_the_management_cidr_only(
        driver, admin_conn, monkeypatch):
    monkeypatch.setenv("CDNAAS_OS_MANAGEMENT_CIDR", "192.0.2.0/24")
    sig = make_sig({"north": 1})
    deployment = driver.deploy(sig)
    try:
        info = deployment.resources["regions"]["north"]
        group = info["security_groups"]["cache"]
        rules = {(r.protocol, r.port_range_min, r.port_range_max, r.remote_ip_prefix)
                 for r in admin_conn.network.security_group_rules(security_group_id=group,
                                                                  direction="ingress")}
        assert rules == {("tcp", 80, 80, info["cidr"]),
                         ("tcp", endpoints.MANAGEMENT_PORT, endpoints.MANAGEMENT_PORT,
                          "192.0.2.0/24")}
        server = admin_conn.compute.get_server(
            deployment.resources["servers"]["north-cache-1"]["server_id"])
        nginx = nginx_of(base64.b64decode(server.user_data).decode())
        assert "allow 192.0.2.0/24;\n        deny all;" in management_block(nginx)
        # caches added later allow what the security group opened at deploy time
        monkeypatch.setenv("CDNAAS_OS_MANAGEMENT_CIDR", "198.51.100.0/24")
        grown = driver.update(deployment, make_sig({"north": 2}, sig.vcdn_id))
        deployment = grown
        added = admin_conn.compute.get_server(
            grown.resources["servers"]["north-cache-2"]["server_id"])
        assert "allow 192.0.2.0/24;\n        deny all;" in management_block(
            nginx_of(base64.b64decode(added.user_data).decode()))
    finally:
        driver.terminate(deployment)


def test_openstack_refuses_a_bad_management_cidr_before_creating_anything(driver, monkeypatch):
    monkeypatch.setenv("CDNAAS_OS_MANAGEMENT_CIDR", "0.0.0.0/0")
    calls = dict(driver.cloud.calls)
    with pytest.raises(DeploymentFailed, match="CDNAAS_OS_MANAGEMENT_CIDR '0.0.0.0/0'"):
        driver.deploy(make_sig({"north": 1}))
    assert not {k: v for k, v in driver.cloud.calls.items()
                if k[1] in ("POST", "PUT") and v != calls.get(k)}

