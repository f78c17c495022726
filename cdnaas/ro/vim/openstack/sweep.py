"""Removing by tag: every resource the ``openstack`` driver makes carries ``cdnaas``,
``cdnaas-owner:<owner>`` and ``cdnaas-vcdn:<id>``, so a failed deploy, a terminate, a
restore and the stray cleanup find what to delete without a record (or beyond it).
What is gone already is success."""
from cdnaas.ro.vim import steps
from cdnaas.ro.vim.openstack import balancers, networks, plan, rebuild, shield, translate
from cdnaas.ro.vim.openstack import cloud as oscloud
from cdnaas.ro.vim.openstack.servers import port_ids


def sweep(ctx, vim_regions, vcdn_tag, record=None, keep=frozenset(), servers=True):
    """Remove every resource tagged ``vcdn_tag`` (and of this owner) but the ids in
    ``keep``, plus the ids of ``record``: balancers and servers, then ports, security
    groups, subnets, networks (with ``servers`` False: no tagged server or port)."""
    tags = f"{plan.owner_tag()},{vcdn_tag}"
    record = record or {}
    for vim_region in vim_regions:
        conn = ctx.conn(vim_region)
        infos = [i for i in record.get("regions", {}).values()
                 if i.get("vim_region") == vim_region]
        lb_ids = {lb.id for lb in conn.load_balancer.load_balancers(tags=tags)} - keep
        lb_ids |= {i["lb_id"] for i in infos if i.get("lb_id")}
        server_ids = {s.id for s in conn.compute.servers(tags=tags, details=False)} - keep \
            if servers else set()
        server_ids |= {e["server_id"] for e in record.get("servers", {}).values()
                       if record["regions"].get(e["region"], {}).get("vim_region")
                       == vim_region}
        for lb_id in lb_ids:
            balancers.delete_load_balancer(conn, lb_id, wait=False)
        ctx.parallel(lambda sid, conn=conn: oscloud.gone(conn.compute.delete_server, sid),
                     sorted(server_ids))
        oscloud.servers_gone(conn, server_ids, oscloud.timeout("delete"))
        for lb_id in lb_ids:
            oscloud.load_balancer_gone(conn, lb_id, oscloud.timeout("delete"))
        found_ports = {p.id for p in conn.network.ports(tags=tags)} - keep \
            if servers else set()
        found_ports |= {p for e in record.get("servers", {}).values() for p in port_ids(e)
                        if record["regions"].get(e["region"], {}).get("vim_region")
                        == vim_region}
        for port_id in found_ports:
            oscloud.gone(conn.network.delete_port, port_id)
        for group in list(conn.network.security_groups(tags=tags)):
            if group.id not in keep:
                oscloud.gone(conn.network.delete_security_group, group.id)
        for info in infos:
            for group_id in info.get("security_groups", {}).values():
                oscloud.gone(conn.network.delete_security_group, group_id)
        network_ids = {n.id for n in conn.network.networks(tags=tags)} - keep
        network_ids |= {i["network_id"] for i in infos
                        if i.get("network_id") and not i.get("operator_network")}
        for network_id in network_ids:
            networks.delete_network(conn, network_id)


def vim_regions_of(sig):
    """The OpenStack regions of ``sig``'s regions."""
    return sorted({r.vim_region for r in sig.regions}, key=str)


def remove_unrecorded(ctx):
    """Delete the balancers, security groups and networks carrying the vCDN's tag that
    the record does not name (a region an interrupted update was adding), in every
    OpenStack region of the cloud and of the record."""
    record = ctx.record
    recorded = set()
    for info in record["regions"].values():
        recorded.update(info.get(k) for k in ("lb_id", "network_id"))
        recorded.update(info.get("security_groups", {}).values())
    vim_regions = {i.get("vim_region") for i in record["regions"].values()}
    sweep(ctx, sorted(vim_regions | set(ctx.cloud.regions()), key=str),
          plan.vcdn_tag(ctx.deployment_id), keep=recorded, servers=False)


def remove_added(ctx):
    """In each OpenStack region of the record and the cloud: the servers, then the ports,
    that carry the vCDN's tag but are not in the record are deleted (what an interrupted
    update was adding; a port on a recorded server, an origin shield's leg, detached
    first). Recorded servers that are gone leave the record.

    :returns: ``(missing, rebuilt)``: the names of the recorded servers that are gone,
        and of those an update rebuilt with other user-data (:func:`.rebuild.rebuilt_since`).
    """
    record = ctx.record
    tags = f"{plan.owner_tag()},{plan.vcdn_tag(ctx.deployment_id)}"
    vim_regions = sorted({i.get("vim_region") for i in record["regions"].values()}
                         | set(ctx.cloud.regions()), key=str)
    missing, rebuilt = [], []
    ctx.progress(steps.REMOVE_ADDED, 0, len(vim_regions))
    for done, vim_region in enumerate(vim_regions, 1):
        conn = ctx.conn(vim_region)
        recorded = {name: e for name, e in record["servers"].items()
                    if record["regions"][e["region"]].get("vim_region") == vim_region}
        existing = {s.id: s for s in conn.compute.servers(tags=tags)}
        # any region's record: two names of one OpenStack region list the same servers
        strays = sorted(set(existing) - {e["server_id"] for e in record["servers"].values()})
        ctx.parallel(lambda sid, conn=conn: oscloud.gone(conn.compute.delete_server, sid),
                     strays)
        oscloud.servers_gone(conn, strays, oscloud.timeout("delete"))
        gone = sorted(n for n, e in recorded.items() if e["server_id"] not in existing)
        for name in gone:
            record["servers"].pop(name)
        ports = {p for e in record["servers"].values() for p in port_ids(e)}
        server_ids = {e["server_id"] for e in record["servers"].values()}
        prefix = plan.resource_name(ctx.deployment_id, "")
        for port in list(conn.network.ports(tags=tags)):  # ours only, never Octavia's VIP
            if port.id not in ports and (port.name or "").startswith(prefix):
                if port.device_id in server_ids:  # a shield's leg the update was adding
                    shield.detach(conn, port.device_id, port.id)
                oscloud.gone(conn.network.delete_port, port.id)
        missing += gone
        rebuilt += [n for n, e in record["servers"].items() if n in recorded and
                    rebuild.rebuilt_since(existing[e["server_id"]].metadata, e)]
        ctx.progress(steps.REMOVE_ADDED, done, len(vim_regions))
    return missing, rebuilt


def strays(cloud, known_ids):
    """``{vCDN tag value: its OpenStack regions}`` of this owner's resources whose vCDN is
    not one of ``known_ids``."""
    known = {plan.vcdn_tag(i) for i in known_ids}
    owner_tag = plan.owner_tag()
    found = {}
    for vim_region in cloud.regions():
        conn = cloud.conn(vim_region)
        listings = (conn.compute.servers(tags=owner_tag),
                    conn.load_balancer.load_balancers(tags=owner_tag),
                    conn.network.networks(tags=owner_tag),
                    conn.network.ports(tags=owner_tag),
                    conn.network.security_groups(tags=owner_tag))
        for listing in listings:
            for resource in listing:
                value = plan.vcdn_from_tags(translate.tags_of(resource))
                if value is not None and f"cdnaas-vcdn:{value}" not in known:
                    found.setdefault(value, set()).add(vim_region)
    return found
