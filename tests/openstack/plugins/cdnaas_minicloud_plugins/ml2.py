"""An ML2 mechanism driver that binds every port, for a control plane without agents.

The mini cloud runs neutron with ML2 and no L2 agent: no in-tree mechanism
driver would bind a port there, and nova would then refuse to boot servers on
it. This driver binds each port to the first segment offered, with VIF type
``ovs`` and status ACTIVE. It moves no packet; it exists so every API call and
state change of a real deployment can happen.
"""
import logging

from neutron_lib import constants
from neutron_lib.api.definitions import portbindings
from neutron_lib.plugins.ml2 import api

LOG = logging.getLogger(__name__)


class BindAllMechanismDriver(api.MechanismDriver):
    """Binds any port on any host to its first segment (VIF type ovs, ACTIVE)."""

    def initialize(self):
        LOG.info("cdnaas_bindall: binding every port (test mini cloud, no data plane)")

    def bind_port(self, context):
        for segment in context.segments_to_bind:
            context.set_binding(segment[api.ID], portbindings.VIF_TYPE_OVS,
                                {portbindings.CAP_PORT_FILTER: True,
                                 portbindings.OVS_HYBRID_PLUG: False},
                                status=constants.PORT_STATUS_ACTIVE)
            return
