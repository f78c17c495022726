"""The ``openstack`` host power driver against the real mini OpenStack: a nova-compute
service disabled with the reason, then enabled again (the Ironic path, which the mini cloud
cannot run, is tested against a fake at the SDK edge in tests/service/test_power_actions.py)."""
import pytest

from cdnaas.ro.power.base import HostUnknown
from cdnaas.ro.power.openstack import OpenStackPowerDriver


def test_openstack_disables_and_enables_a_real_nova_compute_service(minicloud, admin_conn,
                                                                    monkeypatch):
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(minicloud))
    monkeypatch.setenv("CDNAAS_POWER_OS_CLOUD", "minicloud-admin")
    driver = OpenStackPowerDriver()
    host = "mc-south-1"
    try:
        off = driver.power_off(host, "cdnaas test: empty")
        [service] = admin_conn.compute.services(binary="nova-compute", host=host)
        assert (service.status, service.disabled_reason) == ("disabled", "cdnaas test: empty")
        assert off.applied and driver.state(host) == "off"
        assert driver.power_off(host).steps == [f"{host} was already off"]  # idempotent
    finally:
        on = driver.power_on(host, "cdnaas test: needed")
    [service] = admin_conn.compute.services(binary="nova-compute", host=host)
    assert service.status == "enabled" and on.state == "on" and driver.state(host) == "on"
    with pytest.raises(HostUnknown):
        driver.state("no-such-compute")
