"""openstacksdk objects in, our dataclasses out: nothing of openstacksdk leaves the driver."""
import time

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
    gone or in ERROR does not mend by itself (``lasting``); inside the guest, systemd
    restarts a daemon whose master dies, its leftover workers killed with it."""
    if server is None:
        return VnfHealth(instance.name, instance.role, instance.region, False, "server is gone",
                         lasting=True)
    healthy = server.status == "ACTIVE"
    detail = f"server {server.status}"
    if server.status == "ERROR" and server.fault:
        detail += f": {server.fault.get('message', '')}"
    return VnfHealth(instance.name, instance.role, instance.region, healthy, detail,
                     lasting=server.status == "ERROR")


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
