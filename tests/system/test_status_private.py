"""Status pages of caches and balancers answer the RO side only, never viewers: the
OpenStack side (the management CIDR setting, the caches' user-data and security
group). The templates are checked in ``tests/system/test_vnf_rendering.py`` (rendering, ``nginx
-t``, 404 on public listeners and 403 to others on loopback) and the local driver in
``tests/system/test_local_driver.py`` (a viewer in a region, RO's metrics).

Its tests that start no process are in tests/unit/test_status_private_units.py (the unit
tier)."""
import base64

import pytest

from cdnaas.ro.vim.base import DeploymentFailed
from cdnaas.vnf import endpoints
from tests.unit.test_openstack_driver_units import make_sig
from tests.unit.test_status_private_units import management_block, nginx_of


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
