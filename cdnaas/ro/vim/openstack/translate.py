"""openstacksdk objects in, our dataclasses out: nothing of openstacksdk leaves the driver."""
from cdnaas.ro.vim.base import VnfHealth, VnfInstance


def flavor_tuple(flavor):
    """``(id, name, vcpus, ram_mb, disk_gb)`` of an openstacksdk flavor (for :func:`plan.pick_flavor`)."""
    return (flavor.id, flavor.name, flavor.vcpus, flavor.ram, flavor.disk or 0)


def vnf_instance(vnf, resource_id, address):
    """Our record of ``vnf`` (a SIG VNF) built as ``resource_id`` (server or load balancer)."""
    return VnfInstance(name=vnf.name, role=vnf.role, region=vnf.region, host=vnf.host,
                       address=address, resource_id=resource_id, vcpus=vnf.vcpus)


def server_health(instance, server):
    """Health of a cache or DNS VNF from its nova server (None: the server is gone)."""
    if server is None:
        return VnfHealth(instance.name, instance.role, instance.region, False, "server is gone")
    healthy = server.status == "ACTIVE"
    detail = f"server {server.status}"
    if server.status == "ERROR" and server.fault:
        detail += f": {server.fault.get('message', '')}"
    return VnfHealth(instance.name, instance.role, instance.region, healthy, detail)


def load_balancer_health(instance, lb):
    """Health of a region's balancer from its Octavia load balancer (None: gone).

    Provisioning status decides: without a health manager (as in the test cloud)
    the operating status stays OFFLINE, so it is reported, not judged.
    """
    if lb is None:
        return VnfHealth(instance.name, instance.role, instance.region, False,
                         "load balancer is gone")
    return VnfHealth(instance.name, instance.role, instance.region,
                     lb.provisioning_status == "ACTIVE",
                     f"load balancer {lb.provisioning_status}, operating {lb.operating_status}")


def tags_of(resource):
    return list(getattr(resource, "tags", None) or [])
