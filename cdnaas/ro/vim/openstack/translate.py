"""openstacksdk objects in, our dataclasses out: nothing of openstacksdk leaves the driver."""
import time

from cdnaas.common import timeutil
from cdnaas.ro.vim.base import VnfHealth, VnfInstance, VnfMetrics


def flavor_tuple(flavor):
    """``(id, name, vcpus, ram_mb, disk_gb)`` of an openstacksdk flavor (for :func:`plan.pick_flavor`)."""
    return (flavor.id, flavor.name, flavor.vcpus, flavor.ram, flavor.disk or 0)


def vnf_instance(vnf, resource_id, address):
    """Our record of ``vnf`` (a SIG VNF) built as ``resource_id`` (server or load balancer)."""
    return VnfInstance(name=vnf.name, role=vnf.role, region=vnf.region, host=vnf.host,
                       address=address, resource_id=resource_id, vcpus=vnf.vcpus)


def server_health(instance, server):
    """Health of a cache or DNS VNF from its nova server (None: the server is gone). A server
    gone or in ERROR does not mend by itself (``lasting``)."""
    if server is None:
        return VnfHealth(instance.name, instance.role, instance.region, False, "server is gone",
                         lasting=True)
    healthy = server.status == "ACTIVE"
    detail = f"server {server.status}"
    if server.status == "ERROR" and server.fault:
        detail += f": {server.fault.get('message', '')}"
    return VnfHealth(instance.name, instance.role, instance.region, healthy, detail,
                     lasting=server.status == "ERROR")


def guest_health(instance, server, running, wanted, boot_seconds):
    """Health of the cache or origin shield ``instance``, whose ``server`` is ACTIVE, from
    what its guest's management listener says: ``running``, the generation of the config
    its nginx workers run ("" none, None: no answer), against ``wanted``, the one its
    user-data wrote (None: not recorded, not compared). Another generation is a lasting
    fault (a config the guest never loaded does not load by itself); no answer is one
    that may pass, except within ``boot_seconds`` of the server's launch (or rebuild),
    while its guest boots."""
    def health(healthy, detail, lasting=False):
        return VnfHealth(instance.name, instance.role, instance.region, healthy,
                         f"server ACTIVE; {detail}", lasting=lasting)
    if running is None:
        launched = getattr(server, "launched_at", None)
        if launched and \
                (timeutil.utcnow() - timeutil.parse(launched)).total_seconds() < boot_seconds:
            return health(True, "its guest boots (no answer on its management port yet)")
        return health(False, "no answer on its management port")
    if wanted is not None and running != wanted:
        return health(False, f"runs configuration generation {running or 'none'}, its "
                             f"user-data wrote {wanted}", lasting=True)
    return health(True, f"runs generation {running or 'none'}")


def load_balancer_health(instance, lb):
    """Health of a region's balancer from its Octavia load balancer (None: gone).

    Provisioning status decides: without a health manager (as in the test cloud)
    the operating status stays OFFLINE, so it is reported, not judged.
    """
    if lb is None:
        return VnfHealth(instance.name, instance.role, instance.region, False,
                         "load balancer is gone", lasting=True)
    return VnfHealth(instance.name, instance.role, instance.region,
                     lb.provisioning_status == "ACTIVE",
                     f"load balancer {lb.provisioning_status}, operating {lb.operating_status}",
                     lasting=lb.provisioning_status == "ERROR")


def load_balancer_metrics(instance, stats):
    """Figures of a region's balancer from its Octavia statistics (None: not told)."""
    return VnfMetrics(name=instance.name, role=instance.role, region=instance.region,
                      host=instance.host, vcpus=instance.vcpus, read_at=time.time(),
                      active_connections=None if stats is None else stats.active_connections)


def server_metrics(instance, diagnostics):
    """Figures of a cache or DNS VNF from its Nova diagnostics (None: not shown).

    The CPU time is the sum over the server's vCPUs (``cpu_details[].time``,
    nanoseconds, Nova API 2.48 and later); a hypervisor that does not report it
    leaves it None.
    """
    times = [cpu.get("time") for cpu in (getattr(diagnostics, "cpu_details", None) or [])]
    known = [t for t in times if t is not None]
    return VnfMetrics(name=instance.name, role=instance.role, region=instance.region,
                      host=instance.host, vcpus=instance.vcpus, read_at=time.time(),
                      cpu_seconds=sum(known) / 1e9 if known else None)


def tags_of(resource):
    return list(getattr(resource, "tags", None) or [])
