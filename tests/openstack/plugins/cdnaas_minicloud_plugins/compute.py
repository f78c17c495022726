"""``cdnaas-minicloud-nova-compute``: nova-compute with a fake host that survives restarts.

nova loads its virt driver from the ``nova.virt`` package only
(``compute_driver = <module>.<class>`` is imported as ``nova.virt.<module>``),
so this launcher registers :class:`PredictableFakeDriver` there as
``nova.virt.cdnaas_fake`` and runs nova-compute's own ``main``. The compute
node's UUID is derived from its name, as in nova's PredictableNodeUUIDDriver,
but with FakeDriver's large inventory (1000 vCPUs, 800 GB of RAM).
"""
import sys
import types
import uuid


def node_uuid(nodename):
    """The UUID of the fake compute node ``nodename`` (also its ``compute_id`` file)."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, nodename))


def main():
    from nova.cmd import compute  # first: nova patches the standard library here
    from nova.virt import fake

    class PredictableFakeDriver(fake.FakeDriver):
        """FakeDriver whose nodes keep their UUIDs from one process to the next."""

        def get_available_resource(self, nodename):
            resources = super().get_available_resource(nodename)
            resources["uuid"] = node_uuid(nodename)
            return resources

        def get_nodenames_by_uuid(self, refresh=False):
            return {node_uuid(n): n for n in self.get_available_nodes()}

    module = types.ModuleType("nova.virt.cdnaas_fake")
    module.PredictableFakeDriver = PredictableFakeDriver
    sys.modules[module.__name__] = module
    sys.exit(compute.main())
