"""The ``system`` tier: root, network namespaces, real nginx and dnsmasq (the local
driver), the VNF image and the mini OpenStack."""
from tests.support.tiers import marking

pytest_collection_modifyitems = marking(__file__, "system")
