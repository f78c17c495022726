"""The ``openstack`` driver's Nova servers (caches, origin shield, DNS): their ports (one
bulk call per region), their user-data (:mod:`.userdata`), booted in parallel on their
planned hosts as far as Nova lets us ask (:mod:`.placement`) and waited ACTIVE together,
and deleted with their ports. Functions of :class:`.context.OpenStackContext` steps
(:mod:`.flows`)."""
import ipaddress
import logging

from cdnaas.ro.vim import steps
from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.openstack import cloud as oscloud
from cdnaas.ro.vim.openstack import placement, plan, rebuild, shield, userdata

LOG = logging.getLogger(__name__)


def boot(ctx, vnfs, step=steps.BOOT_SERVERS):
    """Create the ports (one bulk call per region; an origin shield's legs in the other
    regions with theirs) and servers (in parallel) of ``vnfs``, each undone by
    ``ctx.undo``; return when every server is ACTIVE. ``ctx.addresses`` takes the ports'
    addresses."""
    if not vnfs:
        return
    sig, record, undo, addresses = ctx.sig, ctx.record, ctx.undo, ctx.addresses
    tags = plan.tags(sig.vcdn_id)
    by_region, wanted = {}, {}
    for vnf in vnfs:
        by_region.setdefault(vnf.region, []).append(vnf)
        wanted.setdefault(vnf.region, []).append((vnf.name, vnf))
        for region, leg in shield.legs(sig, record, vnf):
            wanted.setdefault(region, []).append((leg, vnf))
    ports = {}
    for region, members in wanted.items():  # one bulk call per region
        conn = ctx.region_conn(region)
        info = record["regions"][region]
        created = list(conn.network.create_ports([
            plan.port_spec(sig, key, vnf.role, info, addresses, tags)
            for key, vnf in members]))
        for (key, _vnf), port in zip(members, created):
            undo.push(f"port of {key}", oscloud.gone, conn.network.delete_port, port.id)
            ports[key] = port
            addresses[key] = port.fixed_ips[0]["ip_address"]
        ctx.parallel(lambda p, conn=conn: conn.network.set_tags(p, tags),
                     plan.untagged(created, tags))
    # LIFO: this runs after every server's delete, before the ports' deletes
    server_ids = {}
    undo.push("wait for servers to go", lambda: [
        oscloud.servers_gone(ctx.region_conn(r),
                             [server_ids[v.name] for v in ms if v.name in server_ids],
                             oscloud.timeout("delete"))
        for r, ms in by_region.items()])

    hosts = placement.host_map()

    def create(vnf):
        region = sig.region(vnf.region)
        conn = ctx.conn(region.vim_region)
        name = plan.resource_name(sig.vcdn_id, vnf.name)
        compute_host = placement.compute_host(vnf.host, hosts)
        data = user_data(sig, vnf, addresses, ctx.prepared, record)
        legs = {region: ports[leg].id for region, leg in shield.legs(sig, record, vnf)}
        server, way, refused = create_server(
            ctx, conn, region, compute_host, name=name,
            image_id=ctx.prepared["images"][(region.vim_region, vnf.image)],
            flavor_id=ctx.prepared["flavors"][(region.vim_region, vnf.vcpus, vnf.ram_mb)],
            networks=[{"port": ports[vnf.name].id}] + [{"port": i} for i in legs.values()],
            user_data=rebuild.encoded(data), tags=tags, metadata=metadata(sig, vnf, data))
        undo.push(f"server {name}", oscloud.gone, conn.compute.delete_server, server.id)
        server_ids[vnf.name] = server.id
        record["servers"][vnf.name] = {
            "server_id": server.id, "port_id": ports[vnf.name].id, "region": vnf.region,
            "placement": placement.outcome(vnf.host, compute_host, way, refused, None)}
        rebuild.note(record["servers"][vnf.name], data)
        if legs:
            record["servers"][vnf.name]["legs"] = legs
        return server.id

    ctx.parallel(create, vnfs)
    ctx.progress(step, 0, len(vnfs))
    active = {}

    def wait(region):
        members = by_region[region]

        def report(count):
            active[region] = count
            ctx.progress(step, sum(active.values()), len(vnfs))
        try:
            placed = oscloud.servers_active(
                ctx.region_conn(region), [server_ids[v.name] for v in members],
                plan.vcdn_tag(sig.vcdn_id), oscloud.timeout("boot"), report)
        except VimError as exc:
            asked = sorted({record["servers"][v.name]["placement"]["compute_host"]
                            for v in members if record["servers"][v.name]["placement"]
                            ["way"] != placement.ZONE})
            if not asked or "No valid host" not in str(exc):
                raise
            raise VimError(f"{exc} (servers were asked for their planned hosts "
                           f"{', '.join(asked)}: one disabled, full or outside zone "
                           f"{sig.region(region).zone} fails its server)") from exc
        for vnf in members:  # where Nova put each (None: not shown to this account)
            entry = record["servers"][vnf.name]["placement"]
            entry.update(placement.outcome(entry["planned"], entry["compute_host"],
                                           entry["way"], entry["refused"],
                                           placed.get(server_ids[vnf.name])))
    ctx.parallel(wait, list(by_region))
    moved = {n: p for n, p in placement.differences(record).items()
             if n in {v.name for v in vnfs}}
    if moved:
        LOG.warning("vCDN %s: %d server(s) not known to run on their planned host: %s",
                    sig.vcdn_id, len(moved), ", ".join(
                        f"{n} (planned {p['compute_host']}, {p['way']}, on "
                        f"{p['actual'] or 'a host not shown'})"
                        for n, p in sorted(moved.items())))
    ctx.progress(step, len(vnfs), len(vnfs))


def create_server(ctx, conn, region, compute_host, **attrs):
    """Create a server on ``compute_host`` in ``region``'s zone, asking Nova the first
    way its policy allows (:mod:`.placement`).

    :returns: ``(server, way, {refused way: why})``.
    :raises openstack.exceptions.SDKException: the creation failed otherwise.
    """
    key = (ctx.cloud.name, region.vim_region)
    with ctx.placement_refused.asking(key):
        created = _create_placed(ctx, conn, region, compute_host, attrs)
        ctx.placement_refused.settle(key)
        return created


def _create_placed(ctx, conn, region, compute_host, attrs):
    """:func:`create_server`'s ways, each refusal remembered (``attrs``: the server's)."""
    from openstack import exceptions, utils
    refusals = ctx.placement_refused
    key = (ctx.cloud.name, region.vim_region)
    refused = refusals.get(key)
    supported = False
    if compute_host and placement.HOST not in refused:
        supported = utils.supports_microversion(conn.compute, placement.HOST_MICROVERSION)
        if not supported:
            why = f"compute API below {placement.HOST_MICROVERSION} here"
            refusals.add(key, placement.HOST, why)
            refused[placement.HOST] = why
    while True:
        way, extra = placement.ways(region.zone, compute_host, refused, supported)[0]
        try:
            return conn.compute.create_server(**attrs, **extra), way, refused
        except exceptions.HttpException as exc:
            kind = placement.refusal(way, exc)
            if kind is None:
                raise
            why = f"{exc.status_code} {getattr(exc, 'details', None) or exc}"
            refused[way] = why
            if kind == "host":  # forcing a host Nova does not know fails the server
                refused[placement.FORCED] = "not tried: Nova has no such compute host"
            else:
                refusals.add(key, way, why)
                LOG.warning("cloud %s (region %s) refuses placing servers by %s: %s; "
                            "trying the next way (docs/operator-openstack.md)", ctx.cloud.name,
                            region.vim_region or "default", way, why)


def user_data(sig, vnf, addresses, prepared, record):
    """``vnf``'s user-data: an origin shield fetches from the origin and listens on its
    legs too (:func:`.shield.listened`, in address order); a cache fetches from the
    shield's address on its region's network (plain HTTP, the origin's name as Host)
    where the vCDN has one, else from the origin."""
    management = record.get("management_cidrs", [])
    if vnf.role == "shield":
        legs = [addresses[leg] for leg in shield.listened(sig, record, vnf)]
        return userdata.cache(sig, vnf, addresses[vnf.name], prepared["origin_address"],
                              management,
                              also_listen=sorted(legs, key=ipaddress.ip_address),
                              secondary_address=prepared["secondary_address"])
    if vnf.role == "cache":
        shield_at = shield.fetched_from(sig, record, addresses, vnf.region)
        subnet = record["regions"].get(vnf.region, {}).get("cidr")
        balancers = [subnet] if subnet else []  # the balancer's (Octavia's) subnet
        if shield_at is None:
            return userdata.cache(sig, vnf, addresses[vnf.name],
                                  prepared["origin_address"], management,
                                  secondary_address=prepared["secondary_address"],
                                  balancers=balancers)
        return userdata.cache(sig, vnf, addresses[vnf.name], shield_at, management,
                              behind_shield=True, balancers=balancers)
    balancers = {r.name: addresses[sig.vnfs_in(r.name, "load_balancer")[0].name]
                 for r in sig.regions}
    return userdata.dns(sig, vnf, addresses[vnf.name], balancers)


def metadata(sig, vnf, data):
    """Nova metadata of ``vnf``'s server booted or rebuilt with user-data ``data``."""
    return {"cdnaas_vcdn": sig.vcdn_id[:255], "cdnaas_vnf": vnf.name, "cdnaas_role": vnf.role,
            rebuild.METADATA_KEY: rebuild.digest(data)}


def remove_servers(ctx, infos, entries, step=steps.REMOVE_CACHES):
    """Delete the servers, then the ports, of ``entries`` (VNF name -> its server
    record, out of the record and their pools already; ``infos``: region -> record):
    all asked at once, then waited for in each OpenStack region."""
    if not entries:
        return
    by_region = {}
    for entry in entries.values():
        by_region.setdefault(infos[entry["region"]].get("vim_region"), []).append(entry)
    ctx.progress(step, 0, len(entries))

    def remove(vim_region):
        conn = ctx.conn(vim_region)
        server_ids = [e["server_id"] for e in by_region[vim_region]]
        for server_id in server_ids:
            oscloud.gone(conn.compute.delete_server, server_id)
        oscloud.servers_gone(conn, server_ids, oscloud.timeout("delete"))
        for entry in by_region[vim_region]:
            for port_id in port_ids(entry):
                oscloud.gone(conn.network.delete_port, port_id)
    ctx.parallel(remove, sorted(by_region, key=str))
    ctx.progress(step, len(entries), len(entries))


def port_ids(entry):
    """The ports of a server's record ``entry``: its own, then its legs'."""
    return [entry["port_id"], *entry.get("legs", {}).values()]
