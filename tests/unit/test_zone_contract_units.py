"""The same contract against every installed zone publisher, so none drifts: the tests that
start no process (the unit tier); the others, and what the module covers, are in
tests/system/test_zone_contract.py."""

import pytest

from cdnaas.ro.zones.base import NameServer, ZoneRefused


@pytest.mark.parametrize("host, addresses", [
    ("dns 0", ("198.18.2.3",)), ("ns.evil", ("198.18.2.3",)), ("dns-0", ()),
    ("dns-0", "198.18.2.3"), ("dns-0", ("198.18.2.300",)), ("dns-0", ("host.example",))])
def test_bad_name_servers_are_refused(host, addresses):
    with pytest.raises(ZoneRefused):
        NameServer(host, addresses)
