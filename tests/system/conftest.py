"""The ``system`` tier: root, network namespaces, real nginx and dnsmasq (the local
driver), the VNF image and the mini OpenStack; and the ``driver`` of its OpenStack
modules."""
import pytest

from tests.support.tiers import marking

pytest_collection_modifyitems = marking(__file__, "system")


@pytest.fixture
def driver(openstack_env):
    """The ``openstack`` VIM driver on the mini cloud (this test's owner:
    ``openstack_env``), its prerequisites checked: the ``driver`` of the tests of
    ``test_openstack_*.py`` and ``test_status_private.py``. A module whose vCDNs' caches
    run here asks for ``caches_here_env`` too (its ``pytestmark``); a module of another
    driver defines its own ``driver``."""
    from cdnaas.ro.vim.openstack.driver import OpenStackDriver
    driver = OpenStackDriver()
    driver.check_prerequisites()
    return driver
