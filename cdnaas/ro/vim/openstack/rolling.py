"""Rolling rebuilds of a live vCDN's servers with new user-data (:mod:`.rebuild`): which
kept servers change, the stand-in of a cache alone in its region, the origin shield
first (given its legs in new regions, or losing those in removed ones), each region's
caches in waves out of their balancer's pools, the DNS servers one at a time. Functions
of :class:`.context.OpenStackContext` steps (:mod:`.flows`)."""
import ipaddress

from cdnaas.ro.vim import dnsprobe, steps
from cdnaas.ro.vim.base import DeploymentFailed, VimError
from cdnaas.ro.vim.openstack import balancers
from cdnaas.ro.vim.openstack import cloud as oscloud
from cdnaas.ro.vim.openstack import plan, rebuild, servers, shield
from cdnaas.ro.vim.openstack.lookup import prepare, resolve, resolve_secondary, words


def rebuilds(ctx, kept):
    """Those of ``kept`` (cache and DNS VNFs of ``ctx.deployment`` and the SIG) whose
    user-data the SIG changes (:func:`.rebuild.changed`: against the digest recorded at
    boot or rebuild, else the user-data ``ctx.previous`` renders, its origin resolved
    again), each with its new image (the SIG's, looked up as ``ctx.prepared``) and
    user-data. Nothing changes here.

    :raises DeploymentFailed: the previous origin does not resolve, or a region's
        compute API is below :data:`.rebuild.MICROVERSION`.
    """
    if not kept:
        return []
    sig, previous, prepared = ctx.sig, ctx.previous, ctx.prepared
    record = ctx.deployment.resources
    before = {"origin_address": prepared["origin_address"],
              "secondary_address": prepared["secondary_address"]}
    if any(v.role in ("cache", "shield") for v in kept):
        try:
            if previous.origin != sig.origin:
                before["origin_address"] = resolve(previous.origin)
            before["secondary_address"] = resolve_secondary(previous)
        except VimError as exc:
            raise DeploymentFailed(f"{exc} (the previous origin, what a failed update "
                                   "goes back to); nothing was changed") from exc
    earlier = {v.name: v for v in previous.vnfs}
    addresses_before = {**ctx.addresses, **{v.name: v.address for v in ctx.deployment.vnfs}}
    items = [rebuild_of(ctx, vnf, servers.user_data(
        previous, earlier.get(vnf.name, vnf), addresses_before, before, record))
        for vnf in kept]
    changed = rebuild.changed(items, {n: e.get(rebuild.DIGEST_KEY)
                                      for n, e in record["servers"].items()})
    for vim_region in {sig.region(r.vnf.region).vim_region for r in changed}:
        rebuild.check_compute(ctx.conn(vim_region), vim_region)
    return changed


def stand_ins(ctx, items):
    """A stand-in (:func:`.rebuild.stand_in`) for each cache of ``items`` alone in its
    region, given to its item, at the region's lowest spare cache address (put in
    ``ctx.addresses``; Neutron picks it on an operator's network).

    :returns: the stand-ins, to boot with the update's new servers.
    """
    sig, addresses = ctx.sig, ctx.addresses
    found = []
    for item in items:
        region = item.vnf.region
        if item.vnf.role != "cache" or len(sig.vnfs_in(region, "cache")) > 1:
            continue
        item.stand_in = rebuild.stand_in(item.vnf)
        info = ctx.record["regions"][region]
        used = {addresses[v.name] for v in sig.vnfs_in(region)}
        addresses[item.stand_in.name] = None if info.get("operator_network") else \
            plan.spare_address(ipaddress.ip_network(info["cidr"]), used, item.stand_in.name)
        found.append(item.stand_in)
    return found


def rebuild_of(ctx, vnf, previous=None):
    """The :class:`.rebuild.Rebuild` of ``vnf``'s recorded server to the SIG's image and
    user-data (``previous``: what it had, if known)."""
    sig = ctx.sig
    data = servers.user_data(sig, vnf, ctx.addresses, ctx.prepared, ctx.record)
    return rebuild.Rebuild(
        vnf=vnf, server_id=ctx.record["servers"][vnf.name]["server_id"],
        image_id=ctx.prepared["images"][(sig.region(vnf.region).vim_region, vnf.image)],
        user_data=data, previous=data if previous is None else previous)


def reconfigure(ctx, items):
    """Rebuild the servers of ``items`` (:func:`rebuilds`) with their new user-data: the
    origin shield first (:func:`rebuild_shields`; an update rebuilds it before, with its
    new legs: :func:`grow_shields`); then each region's caches in waves
    (:func:`.rebuild.waves`), regions side by side; then the DNS servers one at a time
    (:func:`rebuild_dns`).

    A wave leaves its region's pools (one batch call per pool) while the others
    serve, is rebuilt and waited ACTIVE, and comes back. A region of one cache is
    served by its item's stand-in meanwhile (booted already). Each server's undo
    rebuilds it back (with the user-data Nova shows it had, else the previous SIG's),
    in its pool; each region's then puts ``ctx.deployment``'s members back.
    """
    rebuild_shields(ctx, [r for r in items if r.vnf.role == "shield"])
    caches = [r for r in items if r.vnf.role == "cache"]
    regions = sorted({r.vnf.region for r in caches})
    rebuilt = dict.fromkeys(regions, 0)

    def roll(region):
        def report(count):
            rebuilt[region] = count
            ctx.progress(steps.REBUILD_CACHES, sum(rebuilt.values()), len(caches))
        ctx.undo.push(f"members of {region}", balancers.restore_members, ctx, ctx.deployment,
                      region)
        roll_region(ctx, ctx.deployment.resources["regions"][region],
                    [r for r in caches if r.vnf.region == region], report)
    if caches:
        ctx.progress(steps.REBUILD_CACHES, 0, len(caches))
        ctx.parallel(roll, regions)
    rebuild_dns(ctx, [r for r in items if r.vnf.role == "dns"])


def rebuild_shields(ctx, items):
    """Rebuild the origin shields of ``items`` in place (the caches' misses fail
    meanwhile, their hits serve), each undone by ``ctx.undo``."""
    if items:
        ctx.parallel(lambda item: rebuild_wave(ctx, ctx.region_conn(item.vnf.region), [item]),
                     items, steps.REBUILD_ORIGIN_SHIELD)


def grow_shields(ctx):
    """Give each origin shield of the SIG a leg in each new region (made already:
    :func:`.shield.add_legs`), then rebuild those of ``ctx.rebuilds`` (listening on
    them), before any cache boots or is rebuilt; all undone by ``ctx.undo``."""
    for vnf in ctx.sig.vnfs_in(role="shield"):
        shield.add_legs(ctx.region_conn(vnf.region), ctx.sig, ctx.record, vnf, ctx.addresses,
                        ctx.undo)
    rebuild_shields(ctx, [r for r in ctx.rebuilds if r.vnf.role == "shield"])


def shrink_shields(ctx):
    """Take from each origin shield its legs in the regions that went (``ctx.gone``, their
    caches gone already): out of the record first (what fails is the next update's or
    restore's to delete), the shield rebuilt without them (its new digest recorded),
    then each detached and deleted (:func:`.shield.delete_leg`). Nothing undoes this
    (run :func:`~cdnaas.ro.vim.pipeline.isolated`, never reverted).

    :raises Exception: a step failed (the update records what is left).
    """
    for vnf in ctx.sig.vnfs_in(role="shield"):
        entry = ctx.record["servers"][vnf.name]
        leaving = {r: entry["legs"].pop(r) for r in ctx.gone if r in entry.get("legs", {})}
        if not leaving:
            continue
        if not entry["legs"]:
            del entry["legs"]
        item = rebuild_of(ctx, vnf)
        rebuild.note(entry, item.user_data)
        rebuild_shields(ctx, [item])
        conn = ctx.region_conn(vnf.region)
        for port_id in leaving.values():
            shield.delete_leg(conn, entry["server_id"], port_id)


def rebuild_dns(ctx, items):
    """Rebuild the DNS servers of ``items`` one at a time, so that a vCDN of two DNS
    VNFs always has one answering: where RO reaches the vCDN's networks (management
    prefixes set), a rebuilt server is waited until it answers the vCDN's name (to
    RO's address, as to the default region's clients) before the next is rebuilt,
    ``CDNAAS_OS_DNS_TIMEOUT`` at most; elsewhere ACTIVE is all RO can see.

    :raises VimError: a rebuilt server never answered (the update is undone).
    """
    sig = ctx.sig
    if items:
        ctx.progress(steps.REBUILD_DNS, 0, len(items))
    for done, item in enumerate(items, 1):
        rebuild_wave(ctx, ctx.region_conn(item.vnf.region), [item])
        if done < len(items) and plan.management_cidrs():
            address = ctx.addresses[item.vnf.name]
            oscloud.wait_until(lambda a=address: dnsprobe.resolves(a, sig.hostname),
                               f"DNS server {item.vnf.name} at {address} to answer "
                               f"{sig.hostname} after its rebuild", oscloud.timeout("dns"))
        ctx.progress(steps.REBUILD_DNS, done, len(items))


def roll_region(ctx, info, items, report):
    """Rebuild ``items``, caches of the region recorded as ``info``, wave by wave out of
    its balancer's pools; ``report(number rebuilt)`` after each wave."""
    sig, addresses = ctx.sig, ctx.addresses
    region = items[0].vnf.region
    conn = ctx.conn(info["vim_region"])
    caches = sig.vnfs_in(region, "cache")
    standing_in = [i.stand_in for i in items if i.stand_in is not None]
    done = 0
    for wave in rebuild.waves(items, len(caches)):
        leaving = {r.vnf.name for r in wave}
        serving = len(leaving) < len(caches) or standing_in  # else in place: none would
        if serving:
            balancers.set_members(conn, info, balancers.members(sig, region, info, addresses,
                                                                leaving, standing_in))
        rebuild_wave(ctx, conn, wave)
        if serving:
            balancers.set_members(conn, info, balancers.members(sig, region, info, addresses))
        done += len(wave)
        report(done)


def rebuild_wave(ctx, conn, items):
    """Rebuild the servers of ``items`` (of ``conn``'s region) together and wait until
    they are ACTIVE; before each, push its undo (rebuilt back with its image and the
    user-data Nova shows it has, else the previous SIG's)."""
    sig = ctx.sig
    for item in items:
        server = conn.compute.get_server(item.server_id)
        had = rebuild.decoded(server.user_data) if server.user_data else item.previous
        ctx.undo.push(f"rebuild of {item.vnf.name}", _rebuild_back, conn, sig, item.vnf,
                      item.server_id, server.image.id, had)
        _rebuild(conn, sig, item.vnf, item.server_id, item.image_id, item.user_data)
    oscloud.servers_active(conn, [i.server_id for i in items], plan.vcdn_tag(sig.vcdn_id),
                           oscloud.timeout("boot"))


def restore_user_data(ctx, names):
    """Rebuild the servers of the VNFs ``names`` with the SIG's user-data, caches in
    waves (:func:`reconfigure`), a region's lone cache stood in for as in an update
    (:func:`stand_ins`, deleted afterwards), and record it. Nothing is undone should
    a step fail (run :func:`~cdnaas.ro.vim.pipeline.isolated`, never reverted): a
    stand-in left serving is deleted by the next restore."""
    vnfs = [v for v in ctx.sig.vnfs if v.name in names]
    ctx.prepared = prepare(ctx.cloud, ctx.sig, vnfs)
    items = [rebuild_of(ctx, v) for v in vnfs]
    standing_in = stand_ins(ctx, items)
    try:
        servers.boot(ctx, standing_in, step=steps.BOOT_STAND_INS)
        reconfigure(ctx, items)
    except Exception as exc:
        raise VimError(f"{words(exc)}; could not give {', '.join(sorted(names))} their "
                       "recorded configuration again") from exc
    for item in items:
        rebuild.note(ctx.record["servers"][item.vnf.name], item.user_data)
    servers.remove_servers(ctx, ctx.record["regions"], {
        v.name: ctx.record["servers"].pop(v.name) for v in standing_in},
        step=steps.REMOVE_STAND_INS)


def _rebuild(conn, sig, vnf, server_id, image_id, user_data):
    """Ask Nova to rebuild ``vnf``'s server from ``image_id`` with ``user_data``: the same
    server, ports, addresses and compute host; a fresh disk (what it cached is gone)."""
    conn.compute.rebuild_server(server_id, image_id, user_data=rebuild.encoded(user_data),
                                metadata=servers.metadata(sig, vnf, user_data))


def _rebuild_back(conn, sig, vnf, server_id, image_id, user_data):
    """The undo of a rebuild: :func:`_rebuild` with what the server had, then wait for it."""
    _rebuild(conn, sig, vnf, server_id, image_id, user_data)
    oscloud.servers_active(conn, [server_id], plan.vcdn_tag(sig.vcdn_id), oscloud.timeout("boot"))
