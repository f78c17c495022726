"""``cdnaas_faults_noop``: octavia's noop network driver, whose VIP deallocation fails on request.

A test asks for a fault of its own balancer in the file
``$CDNAAS_MINICLOUD_FAULTS/deallocate_vip/<load balancer id>``
(``minicloud.Cloud.fault_vip_deallocation``):

- a count: the delete flow's DeallocateVIP task raises that many times (the count goes
  down, the file goes at 0); octavia reverts the flow and leaves the balancer in ERROR, as
  it does when a real network driver fails;
- ``hold``: the task waits while the file says so (at most :data:`HOLD_SECONDS`), then
  does what the file says next; the balancer stays in PENDING_DELETE meanwhile, as behind
  a stuck worker.

No other balancer is touched.
"""
import os
import time

from octavia.network import base
from octavia.network.drivers.noop_driver.driver import NoopNetworkDriver

HOLD_SECONDS = 300


class FaultsOnRequestNoopDriver(NoopNetworkDriver):
    """:class:`NoopNetworkDriver` failing the VIP deallocations a test asked to fail."""

    def deallocate_vip(self, vip):
        if _fault_asked(vip.load_balancer_id):
            raise base.DeallocateVIPException(
                f"mini cloud: the VIP of {vip.load_balancer_id} fails to go, as asked")
        super().deallocate_vip(vip)


def _fault_asked(lb_id):
    """Whether a test asked this deallocation of ``lb_id``'s VIP to fail (one fewer left),
    once what it asked to hold is let go."""
    faults = os.environ.get("CDNAAS_MINICLOUD_FAULTS")
    if not faults:
        return False
    path = os.path.join(faults, "deallocate_vip", lb_id)
    deadline = time.monotonic() + HOLD_SECONDS
    while (asked := _read(path)) == "hold" and time.monotonic() < deadline:
        time.sleep(0.2)
    if asked is None or asked == "hold":
        return False
    left = int(asked) - 1
    if left:
        with open(path + ".left", "w", encoding="ascii") as fault:
            fault.write(str(left))
        os.replace(path + ".left", path)
    else:
        os.unlink(path)
    return True


def _read(path):
    try:
        with open(path, encoding="ascii") as fault:
            return fault.read()
    except FileNotFoundError:
        return None
