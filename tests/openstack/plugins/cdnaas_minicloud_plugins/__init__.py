"""Test-only plugins of the CDNaaS mini cloud (``tests/openstack/minicloud.py``).

Installed into the mini cloud's own virtualenv, never into the project's:

- ``ml2``: a neutron ML2 mechanism driver that binds every port (no agents here);
- ``compute``: starts nova-compute with a fake virt driver whose compute node
  keeps its UUID across restarts (nova's FakeDriver draws a new one per process,
  and nova then refuses to start again on the same host);
- ``octavia_network``: octavia's noop network driver, failing a balancer's VIP
  deallocation (so its deletion) when a test asks, to see what a failed delete flow leaves.
"""
