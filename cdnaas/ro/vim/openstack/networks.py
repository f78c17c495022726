"""Each region's Neutron network, subnet and security groups (or the operator's network),
as a deploy or an update makes them, a removal deletes them and a restore makes again
what an interrupted update had deleted. Functions of :class:`.context.OpenStackContext`
steps (:mod:`.flows`)."""
import ipaddress

from cdnaas.common import config
from cdnaas.ro.vim import steps
from cdnaas.ro.vim.base import VimError, no_progress
from cdnaas.ro.vim.openstack import balancers
from cdnaas.ro.vim.openstack import cloud as oscloud
from cdnaas.ro.vim.openstack import plan
from cdnaas.ro.vim.openstack.lookup import SERVER_ROLES, words
from cdnaas.vnf import endpoints


def create_networks(ctx, cidrs, regions=None, progress=None):
    """Per region of ``regions`` (default: all of the SIG's): network, subnet and security
    groups (or the operator's network), recorded in ``ctx.record``, each undone by
    ``ctx.undo``."""
    sig, record, undo = ctx.sig, ctx.record, ctx.undo
    progress = ctx.progress if progress is None else progress
    operator_network = config.setting("CDNAAS_OS_NETWORK")
    tags = plan.tags(sig.vcdn_id)
    regions = sig.regions if regions is None else regions
    progress(steps.CREATE_NETWORKS, 0, len(regions))
    for done, region in enumerate(regions, 1):
        conn = ctx.conn(region.vim_region)
        info = {"vim_region": region.vim_region, "zone": region.zone,
                "cidr": cidrs[region.name], "security_groups": {}}
        record["regions"][region.name] = info
        name = plan.resource_name(sig.vcdn_id, region.name)
        if operator_network:
            network = conn.network.find_network(operator_network, ignore_missing=False)
            subnet = next(s for s in conn.network.subnets(network_id=network.id)
                          if s.ip_version == 4)
            info.update(network_id=network.id, subnet_id=subnet.id, cidr=subnet.cidr,
                        operator_network=True)
        else:
            # Neutron takes tags at creation for ports only: the others get them next
            network = conn.network.create_network(name=name,
                                                  description=f"CDNaaS vCDN {sig.vcdn_id}")
            undo.push(f"network {name}", delete_network, conn, network.id)
            conn.network.set_tags(network, tags)
            subnet = conn.network.create_subnet(
                name=name, network_id=network.id, ip_version=4, cidr=cidrs[region.name],
                gateway_ip=str(ipaddress.ip_network(cidrs[region.name])[1]))
            undo.push(f"subnet {name}", delete_subnet, conn, subnet.id)
            conn.network.set_tags(subnet, tags)
            info.update(network_id=network.id, subnet_id=subnet.id)
        roles = {v.role for v in sig.vnfs_in(region.name)} & set(SERVER_ROLES)
        if sig.vnfs_in(role="shield"):  # its leg here, where the region's caches fetch
            roles.add("shield")
        for role in sorted(roles):
            info["security_groups"][role] = security_group(ctx, conn, region.name, role,
                                                           info["cidr"])
        progress(steps.CREATE_NETWORKS, done, len(regions))


def security_group(ctx, conn, region, role, cidr):
    """A security group opening only what ``role`` serves: 80/tcp (cache, shield) and,
    to the record's management prefixes only, their management port; 53 (DNS)."""
    sig = ctx.sig
    name = plan.resource_name(sig.vcdn_id, f"{region}-{role}")
    group = conn.network.create_security_group(
        name=name, description=f"CDNaaS vCDN {sig.vcdn_id}: {role} VNFs of {region}")
    ctx.undo.push(f"security group {name}", oscloud.gone, conn.network.delete_security_group,
                  group.id)
    conn.network.set_tags(group, plan.tags(sig.vcdn_id))
    if role in ("cache", "shield"):  # from the region's subnet: balancer to caches,
        #                              caches to the shield's leg
        rules = [("tcp", plan.HTTP_PORT, cidr)]
        rules += [("tcp", endpoints.MANAGEMENT_PORT, prefix)
                  for prefix in ctx.record.get("management_cidrs", [])]
    else:  # from anywhere: the region's clients
        rules = [("udp", 53, "0.0.0.0/0"), ("tcp", 53, "0.0.0.0/0")]
    conn.network.create_security_group_rules([
        {"security_group_id": group.id, "direction": "ingress",
         "ethertype": "IPv6" if ":" in prefix else "IPv4",
         "protocol": protocol, "port_range_min": port, "port_range_max": port,
         "remote_ip_prefix": prefix} for protocol, port, prefix in rules])
    return group.id


def operator_addresses(record, addresses):
    """On an operator's network Neutron picks the addresses: forget RO's."""
    if not any(i.get("operator_network") for i in record["regions"].values()):
        return addresses
    return {name: None for name in addresses}


def add_regions(ctx, regions, cidrs):
    """Network, subnet, security groups and balancer of each of ``regions`` (new to the
    record), as deploy makes them, each undone by ``ctx.undo``; their balancers' ids
    into ``ctx.lbs`` (provisioning)."""
    if regions:
        create_networks(ctx, cidrs, regions)
        ctx.lbs.update(balancers.create_balancers(ctx, regions))


def open_roles(ctx, vnfs, regions):
    """The security group of each role of ``vnfs`` (to boot) that a region of
    ``regions`` has none for yet: a DNS server moving into a region that stays."""
    for vnf in vnfs:
        info = ctx.record["regions"][vnf.region]
        if vnf.region in regions and vnf.role not in info["security_groups"]:
            info["security_groups"][vnf.role] = security_group(
                ctx, ctx.conn(info["vim_region"]), vnf.region, vnf.role, info["cidr"])


def remove_regions(ctx, infos):
    """Delete the balancer (its listeners and pools with it), security groups and
    network (not the operator's) of each region recorded as ``infos`` (region -> its
    record), their servers gone already; side by side. Nothing undoes this.

    :raises Exception: a delete failed (the update records what is left).
    """
    def remove(region):
        info = infos[region]
        conn = ctx.conn(info.get("vim_region"))
        if info.get("lb_id"):
            balancers.delete_load_balancer(conn, info["lb_id"])
        for group_id in info.get("security_groups", {}).values():
            oscloud.gone(conn.network.delete_security_group, group_id)
        if info.get("network_id") and not info.get("operator_network"):
            delete_network(conn, info["network_id"])
    ctx.parallel(remove, sorted(infos), steps.REMOVE_REGIONS)


def repair_regions(ctx):
    """Make again what an interrupted update had deleted of a recorded region (it was
    removing it): its network and subnet at the recorded prefix, its security groups,
    its balancer at the recorded VIP with the SIG's listeners; the record takes the new
    ids (the servers are booted again by the restore). What this makes is deleted
    should a step fail (run :func:`~cdnaas.ro.vim.pipeline.isolated`).

    :raises VimError: a step failed.
    """
    sig, record = ctx.sig, ctx.record
    ctx.lbs = {}
    try:
        for region in sig.regions:
            info = record["regions"][region.name]
            conn = ctx.conn(info.get("vim_region"))
            if not info.get("operator_network") and \
                    oscloud.found(conn.network.find_network, info["network_id"]) is None:
                create_networks(ctx, {region.name: info["cidr"]}, [region], no_progress)
                info = record["regions"][region.name]
            for role, group_id in list(info["security_groups"].items()):
                if oscloud.found(conn.network.find_security_group, group_id) is None:
                    info["security_groups"][role] = security_group(ctx, conn, region.name,
                                                                   role, info["cidr"])
            if not info.get("lb_id") or balancers.balancer_gone(conn, info["lb_id"]):
                for key in ("lb_id", "pool_id", "tls_pool_id", "tls_listener_id"):
                    info.pop(key, None)
                ctx.lbs.update(balancers.create_balancers(ctx, [region]))
        balancers.register_members(ctx, regions=sorted(ctx.lbs), step=steps.RESTORE_REGIONS)
    except Exception as exc:
        raise VimError(f"{words(exc)}; could not make the removed regions again") from exc


def delete_subnet(conn, subnet_id):
    oscloud.retry_conflicts(lambda: oscloud.gone(conn.network.delete_subnet, subnet_id),
                            f"deleting subnet {subnet_id}", oscloud.timeout("delete"))


def delete_network(conn, network_id):
    oscloud.retry_conflicts(lambda: oscloud.gone(conn.network.delete_network, network_id),
                            f"deleting network {network_id}", oscloud.timeout("delete"))
