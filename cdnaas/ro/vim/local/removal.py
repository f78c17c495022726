"""What of a local deployment goes, and how: a VNF drained of its connections (as the
kernel counts them) before it stops, a region's VNFs and bridge, everything named after
a deployment, and the VNFs of it that run here whatever its record says."""
import ipaddress
import logging
import shutil

from cdnaas.common import config
from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.local import cgroups, clients, netns, network, processes
from cdnaas.ro.vim.local.addressing import HTTP_PORT, HTTPS_PORT
from cdnaas.ro.vim.local.context import group, vnf_root

LOG = logging.getLogger(__name__)


def drain_and_stop(owner, deployment_id, name):
    """Wait (bounded) for the connections to the removed cache or balancer ``name`` to
    end, then stop it."""
    timeout = config.setting("CDNAAS_LOCAL_DRAIN_SECONDS")
    namespace = network.namespace_name(owner, deployment_id, name)
    try:
        processes.wait_until(lambda: not connections(namespace), f"drain of {name}", timeout)
    except VimError:
        LOG.info("%s still had connections after %.0f s; stopping it", name, timeout)
    remove_vnf(owner, deployment_id, name)


def remove_region(owner, deployment_id, region, vnfs):
    """Drain the region's balancer (bounded, as a cache), then remove ``vnfs`` (its
    VNFs that go: not the DNS or the shield, which move) and its bridge. The DNS no
    longer answers its clients by then."""
    for vnf in sorted(vnfs, key=lambda v: v.role != "load_balancer"):  # balancer first
        drain_and_stop(owner, deployment_id, vnf.name)
    network.delete_bridges([network.bridge_name(owner, deployment_id, region)])


def remove_vnf(owner, deployment_id, vnf_name):
    """Remove the VNF ``vnf_name``: its CPU group, namespace and files."""
    cgroups.remove(group(owner, deployment_id, vnf_name))
    network.delete_namespace(network.namespace_name(owner, deployment_id, vnf_name))
    shutil.rmtree(vnf_root(owner, deployment_id) / vnf_name, ignore_errors=True)


def remove_all(owner, deployment_id):
    """Remove everything named after ``deployment_id``; what is gone is fine."""
    cgroups.remove(*[name for name in cgroups.names()
                     if name.startswith(f"{owner}_{deployment_id}_")])
    network.delete_namespaces([
        namespace for namespace in network.list_namespaces()
        if (network.parse_namespace(namespace) or ())[:2] == (owner, deployment_id)])
    clients.remove_clients(deployment_id)
    network.delete_bridges([bridge for bridge, own, dep, _region in network.list_bridges()
                            if (own, dep) == (owner, deployment_id)])
    shutil.rmtree(vnf_root(owner, deployment_id), ignore_errors=True)


def vnf_names(owner, deployment_id):
    """Names of the VNFs of ``deployment_id`` with a namespace, CPU group or files here."""
    names = {parsed[2] for parsed in map(network.parse_namespace, network.list_namespaces())
             if parsed and parsed[:2] == (owner, deployment_id)}
    group_prefix = f"{owner}_{deployment_id}_"
    names |= {g[len(group_prefix):] for g in cgroups.names() if g.startswith(group_prefix)}
    root = vnf_root(owner, deployment_id)
    if root.exists():
        names |= {p.name for p in root.iterdir() if p.is_dir()}
    return names


def serving_strays(owner, deployment):
    """Names of the VNFs of ``deployment`` it does not record that serve at an address
    of a region it records, which none of its VNFs holds."""
    recorded = {v.name for v in deployment.vnfs}
    held = {a for v in deployment.vnfs for a in [v.address, *v.addresses]}
    subnets = [ipaddress.ip_network(info["subnet"])
               for info in deployment.resources["layout"].values()]
    found = []
    for namespace in network.list_namespaces():
        parsed = network.parse_namespace(namespace)
        if not parsed or parsed[:2] != (owner, deployment.deployment_id) \
                or parsed[2] in recorded:
            continue
        legs = list(network.links_of(namespace))
        if len(legs) == 1 and legs[0] not in held \
                and any(ipaddress.ip_address(legs[0]) in subnet for subnet in subnets):
            found.append(parsed[2])
    return sorted(found)


def connections(namespace):
    """How many viewers or balancers are connected to the nginx VNF in ``namespace``, on
    its HTTP or HTTPS port (None: its namespace is gone)."""
    try:
        return netns.established(namespace, (HTTP_PORT, HTTPS_PORT))
    except VimError:
        return None
