"""Status pages of caches and balancers answer the RO side only, never viewers: the tests that
start no process (the unit tier); the others, and what the module covers, are in
tests/system/test_status_private.py."""
import pytest
import yaml

from cdnaas.ro.vim.base import DeploymentFailed
from cdnaas.ro.vim.openstack import plan, userdata
from cdnaas.vnf import endpoints
from tests.unit.test_openstack_driver_units import make_sig


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
