"""Fill the mini cloud with what the tests expect; run by ``minicloud.py`` with its venv's Python.

``MINICLOUD_STAGE=catalog`` (keystone only is up): service project and users,
catalog, the ``cdnaas`` project and user (roles ``member``, ``load-balancer_member`` and
``creator``: Barbican's shipped policy lets that role store secrets and containers, and
their creator set the ACLs Octavia's service user reads them with).
``MINICLOUD_STAGE=resources`` (every API is up):
compute hosts mapped into the cell, one host aggregate per availability zone,
flavors, unlimited quotas for ``cdnaas`` and ``admin``, placeholder VNF images. Idempotent:
what exists is kept. One openstacksdk connection instead of ``openstack`` CLI
calls (about 3 s each).
"""
import os
import subprocess
import sys
import time
from pathlib import Path

import openstack
import openstack.exceptions

sys.path.insert(0, str(Path(__file__).resolve().parent))
import configs

#: (name, vCPUs, RAM MiB, disk GiB): what the tests' VNFs fit into
FLAVORS = (("m1.small", 1, 512, 1), ("m1.medium", 2, 1024, 2), ("m1.large", 4, 4096, 4),
           ("m1.xlarge", 8, 8192, 8))
#: placeholder images (the fake virt driver never reads them); the real one: images/vnf/
IMAGES = ("cdnaas-vnf", "cdnaas-cache", "cdnaas-dns")


def admin():
    return openstack.connect(
        auth_url=configs.url("keystone") + "/v3", username="admin", password=configs.PASSWORD,
        project_name="admin", user_domain_name="Default", project_domain_name="Default",
        region_name=configs.REGION, identity_api_version="3")


def _ensure(find, create):
    """``find()``, else ``create()``; a 409 (a retried POST, a second run) means it exists."""
    found = find()
    if found is not None:
        return found
    try:
        return create()
    except openstack.exceptions.ConflictException:
        return find()


def _role(conn, name):
    return _ensure(lambda: conn.identity.find_role(name),
                   lambda: conn.identity.create_role(name=name))


def _project(conn, name):
    return _ensure(lambda: conn.identity.find_project(name, domain_id="default"),
                   lambda: conn.identity.create_project(name=name, domain_id="default"))


def _user(conn, name, project, roles):
    user = _ensure(lambda: conn.identity.find_user(name, domain_id="default"),
                   lambda: conn.identity.create_user(
                       name=name, password=configs.PASSWORD, domain_id="default",
                       default_project_id=project.id))
    for role in roles:
        conn.identity.assign_project_role_to_user(project, user, _role(conn, role))
    return user


def catalog(conn):
    service_project = _project(conn, "service")
    for user, kind, name, path in configs.SERVICES:
        _user(conn, user, service_project, ["admin", "service"])
        service = _ensure(lambda name=name: conn.identity.find_service(name),
                          lambda name=name, kind=kind: conn.identity.create_service(
                              name=name, type=kind, is_enabled=True))
        have = {e.interface for e in conn.identity.endpoints(service_id=service.id)}
        for interface in ("public", "internal"):
            if interface not in have:
                conn.identity.create_endpoint(service_id=service.id, interface=interface,
                                              url=configs.url(user) + path,
                                              region_id=configs.REGION)
    _user(conn, "cdnaas", _project(conn, "cdnaas"), ["member", "reader", "load-balancer_member",
                                                      "creator"])


def resources(conn):
    hosts = dict(configs.COMPUTE_HOSTS)
    deadline = time.monotonic() + 120
    while {s.host for s in conn.compute.services(binary="nova-compute")
           if s.state == "up"} < set(hosts):
        if time.monotonic() > deadline:
            raise SystemExit("the nova-compute services did not come up within 120 s")
        time.sleep(1)
    subprocess.run([os.environ["MINICLOUD_NOVA_MANAGE"], "--config-file",
                    os.environ["MINICLOUD_NOVA_CONF"], "cell_v2", "discover_hosts"],
                   check=True, capture_output=True)
    aggregates = {a.name: a for a in conn.compute.aggregates()}
    for host, zone in configs.COMPUTE_HOSTS:
        if zone not in aggregates:  # a zone's second host finds the aggregate made for its first
            aggregates[zone] = conn.compute.create_aggregate(name=zone, availability_zone=zone)
        aggregate = aggregates[zone]
        if host not in (aggregate.hosts or []):
            conn.compute.add_host_to_aggregate(aggregate, host)
    have = {f.name for f in conn.compute.flavors(is_public=None)}
    for name, vcpus, ram, disk in FLAVORS:
        if name not in have:
            conn.compute.create_flavor(name=name, vcpus=vcpus, ram=ram, disk=disk, is_public=True)
    for name in ("cdnaas", "admin"):  # tests deploy as admin too (Nova shows hosts to admins)
        project = conn.identity.find_project(name, domain_id="default")
        conn.set_compute_quotas(project.id, instances=-1, cores=-1, ram=-1)
        conn.set_network_quotas(project.id, network=-1, subnet=-1, port=-1, security_group=-1,
                                security_group_rule=-1)
    images = set()
    for image in conn.image.images():
        if image.status == "active":
            images.add(image.name)
        elif image.name in IMAGES:  # an upload cut short
            conn.image.delete_image(image)
    for name in IMAGES:
        if name not in images:
            conn.image.create_image(name=name, data=b"placeholder: see images/vnf/\n" * 64,
                                    disk_format="raw", container_format="bare",
                                    visibility="public", tags=["cdnaas-placeholder"])
    # wait until each zone's host can take servers (placement has its inventory)
    deadline = time.monotonic() + 120
    while len([p for p in conn.placement.resource_providers()
               if p.name in hosts]) < len(hosts):
        if time.monotonic() > deadline:
            raise SystemExit("the compute hosts did not appear in placement within 120 s")
        time.sleep(1)


if __name__ == "__main__":
    {"catalog": catalog, "resources": resources}[os.environ["MINICLOUD_STAGE"]](admin())
