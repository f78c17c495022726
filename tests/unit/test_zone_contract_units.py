"""The same contract against every installed zone publisher, so none drifts.

Each publisher ``<name>`` is tested through a fixture ``zone_server_<name>`` returning a
:class:`tests.support.zones.ZoneServer` (the publisher with its settings in force, and
where its zone is served); a publisher without one, or whose fixture skips (its
service cannot run here), is skipped. Where a zone is served, what the publisher says
it published is asked of the authoritative server itself, and while a delegation
changes a query loop checks that the name never stops being delegated.

These are the module's tests that start no process (the unit tier); the others are in
tests/system/test_zone_contract.py."""

import pytest

from cdnaas.ro.zones.base import NameServer, ZoneRefused


@pytest.mark.parametrize("host, addresses", [
    ("dns 0", ("198.18.2.3",)), ("ns.evil", ("198.18.2.3",)), ("dns-0", ()),
    ("dns-0", "198.18.2.3"), ("dns-0", ("198.18.2.300",)), ("dns-0", ("host.example",))])
def test_bad_name_servers_are_refused(host, addresses):
    with pytest.raises(ZoneRefused):
        NameServer(host, addresses)
