"""The ``openstack`` driver's deploy, update, restore and remove as flows of steps
(:mod:`cdnaas.ro.vim.pipeline`) over an :class:`.context.OpenStackContext`.

Every step that makes something pushes its undo as it goes (a booted server deletes
itself), so the runner undoes a failed deploy or update newest first; a deploy's first
step's revert then sweeps whatever still carries the vCDN's tag. What an update removes
goes once the rest succeeded (:func:`removal`, never undone: what fails there is left to
the next update or restore). A restore undoes only the repairs that failed halfway.
"""
from cdnaas.ro.vim import steps
from cdnaas.ro.vim.base import Deployment, DeploymentFailed, EntryPoint, VimError
from cdnaas.ro.vim.openstack import (balancers, networks, plan, rebuild, rolling, servers,
                                     shield, sweep, translate)
from cdnaas.ro.vim.openstack.lookup import SERVER_ROLES, prepare, words
from cdnaas.ro.vim.pipeline import Step, isolated

#: record key: an update's removals failed, something of it is left to delete
LEFTOVERS = "leftovers"


def deploy():
    """Networks, subnets and security groups of every region; its balancers (made with
    their listeners and pools); every server booted; each balancer's members
    registered. A failure undoes every step, then sweeps by tag."""
    return [
        Step(steps.CREATE_NETWORKS, _create_networks, revert=lambda ctx: sweep.sweep(
            ctx, sweep.vim_regions_of(ctx.sig), plan.vcdn_tag(ctx.deployment_id))),
        Step(steps.CONFIGURE_LOAD_BALANCERS,
             lambda ctx: ctx.lbs.update(balancers.create_balancers(ctx))),
        Step(steps.BOOT_SERVERS, lambda ctx: servers.boot(
            ctx, [v for v in ctx.sig.vnfs if v.role in SERVER_ROLES])),
        Step(steps.REGISTER_MEMBERS, lambda ctx: balancers.register_members(ctx))]


def _create_networks(ctx):
    cidrs = plan.subnets(ctx.sig, {})
    ctx.addresses = plan.addresses(ctx.sig, cidrs, {})
    networks.create_networks(ctx, cidrs)
    ctx.addresses = networks.operator_addresses(ctx.record, ctx.addresses)


def check_update(ctx):
    """Refuse, before anything changes, an update of ``ctx.deployment`` (serving
    ``ctx.previous``, where known) to the SIG that the driver cannot make: a VNF that is
    neither a cache nor a DNS server added or removed, an origin shield added, removed
    or moved.

    :raises DeploymentFailed: saying what cannot change.
    """
    sig, previous, change = ctx.sig, ctx.previous, ctx.change
    shield.check_change(ctx.deployment, sig, {v.name for v in change.relocated},
                        change.regions_changed, previous)
    _new_names, added, removed = _delta(ctx)
    recorded = ctx.deployment.resources["regions"]  # what the driver made, not what serves
    _check_changes(added, removed, {r.name for r in sig.regions if r.name not in recorded},
                   set(recorded) - {r.name for r in sig.regions})


def _delta(ctx):
    """``(names kept where they were, VNFs to boot, VNFs that go)`` of the update: a VNF
    the SIG puts in another region (a DNS server following the default region) is booted
    there again, and its old server goes."""
    moved = {v.name for v in ctx.change.relocated}
    new_names = {v.name for v in ctx.sig.vnfs} - moved
    old = {v.name for v in ctx.deployment.vnfs}
    added = [v for v in ctx.sig.vnfs if v.name not in old or v.name in moved]
    removed = [v for v in ctx.deployment.vnfs if v.name not in new_names]
    return new_names, added, removed


def plan_update(ctx):
    """Work out, before anything changes, what a checked update (:func:`check_update`)
    does: the servers that boot and go, the kept ones rebuilt with new user-data (a new
    origin, new cache rules or names: :attr:`~cdnaas.ro.vim.changes.Change.
    caches_reconfigured`, :attr:`~cdnaas.ro.vim.changes.Change.renamed`; the DNS servers
    and the origin shield where regions come or go) and their stand-ins, their addresses
    and images (:func:`.lookup.prepare`).

    :returns: the subnets of the SIG's regions (region -> CIDR).
    :raises DeploymentFailed: what the servers need cannot be found.
    """
    sig, change, record = ctx.sig, ctx.change, ctx.record
    new_names, added, removed = _delta(ctx)
    old = {v.name: v for v in ctx.deployment.vnfs}
    ctx.added = [v for v in added if v.role in SERVER_ROLES]
    kept = []
    if ctx.previous is not None:
        rebuilt_roles = SERVER_ROLES if change.caches_reconfigured or change.renamed else \
            ("dns", "shield") if change.regions_changed else ()
        kept = [v for v in sig.vnfs if v.name in new_names & set(old)
                and v.role in rebuilt_roles]
    ctx.prepared = prepare(ctx.cloud, sig, ctx.added + kept)
    cidrs = plan.subnets(sig, {r: info["cidr"] for r, info in record["regions"].items()})
    ctx.addresses = plan.addresses(sig, cidrs, {n: v.address for n, v in old.items()
                                                if n in new_names})
    if any(i.get("operator_network") for i in record["regions"].values()):
        ctx.addresses.update({v.name: None for v in ctx.added})
    ctx.addresses.update(shield.leaving_addresses(sig, record))
    ctx.rebuilds = rolling.rebuilds(ctx, kept)
    ctx.stand_ins = rolling.stand_ins(ctx, ctx.rebuilds)
    ctx.lived = sorted(r for r in record["regions"] if r not in change.removed_regions)
    ctx.resized = sorted({v.region for v in added + removed if v.role == "cache"}
                         & set(ctx.lived))
    ctx.leaving = {v.name: record["servers"].pop(v.name) for v in removed
                   if v.role in SERVER_ROLES}
    return cidrs


def update(ctx, cidrs):
    """The flow of a planned update (:func:`plan_update`): the new regions' networks and
    balancers (and a security group where a DNS server moves into a region that stays);
    the origin shield given legs in new regions and rebuilt first; new servers and
    stand-ins booted; the members of each region whose caches change registered (should
    the batch fail, the old members are put back); kept servers rebuilt in waves
    (:func:`.rolling.reconfigure`); then HTTPS as the SIG has it: turned on (each
    balancer's HTTPS listener and pool) or given the new certificate. Turned off, it
    goes with the removals (:func:`removal`). Each step is undone should a later one
    fail."""
    change = ctx.change
    new_regions = [ctx.sig.region(r) for r in change.added_regions]
    boot_step = steps.BOOT_SERVERS if new_regions or change.relocated else steps.BOOT_CACHES
    flow = [
        Step(steps.CREATE_NETWORKS, lambda ctx: _add_regions(ctx, new_regions, cidrs)),
        Step(steps.RESHAPE_ORIGIN_SHIELD, rolling.grow_shields),
        Step(boot_step, lambda ctx: servers.boot(ctx, ctx.added + ctx.stand_ins, boot_step)),
        Step(steps.UPDATE_LOAD_BALANCERS, _register_changed),
        Step(steps.REBUILD_CACHES, lambda ctx: rolling.reconfigure(
            ctx, [r for r in ctx.rebuilds if r.vnf.role != "shield"]))]
    if change.tls == "on":
        flow.append(Step(steps.TURN_HTTPS_ON, balancers.https_on))
    elif change.tls == "rotated":
        flow.append(Step(steps.ROTATE_CERTIFICATES, balancers.rotate))
    if ctx.previous is not None and balancers.https_policy_changed(ctx.previous, ctx.sig):
        flow.append(Step(steps.CHANGE_HTTPS_POLICY, balancers.change_https_policy))
    return flow


def _add_regions(ctx, regions, cidrs):
    networks.add_regions(ctx, regions, cidrs)
    ctx.lbs.update({r: ctx.record["regions"][r]["lb_id"] for r in ctx.lived})
    networks.open_roles(ctx, ctx.added, ctx.lived)


def _register_changed(ctx):
    for region in ctx.resized:  # should the batch fail: put the old members back
        ctx.undo.push(f"members of {region}", balancers.restore_members, ctx, ctx.deployment,
                      region)
    balancers.register_members(ctx, regions=ctx.resized + ctx.change.added_regions,
                               step=steps.UPDATE_LOAD_BALANCERS)


def commit(ctx):
    """The update is done: record the rebuilt servers' new user-data, and take the
    stand-ins and the removed regions out of the record, to be deleted
    (:func:`removal`). Only now: a failed update leaves the record as it was."""
    for item in ctx.rebuilds:
        rebuild.note(ctx.record["servers"][item.vnf.name], item.user_data)
    ctx.leaving.update({v.name: ctx.record["servers"].pop(v.name) for v in ctx.stand_ins})
    ctx.gone = {r: ctx.record["regions"].pop(r) for r in ctx.change.removed_regions}


def removal(ctx):
    """What a done update removes, never undone: HTTPS turned off, the servers that go
    (out of their pools already), the origin shield's legs in removed regions, the
    removed regions' balancers, security groups and networks."""
    change = ctx.change
    gone_or_moved = ctx.gone or change.relocated
    flow = []
    if change.tls == "off":
        flow.append(Step(steps.TURN_HTTPS_OFF, balancers.https_off))
    return flow + [
        Step(steps.REMOVE_SERVERS if gone_or_moved else steps.REMOVE_CACHES,
             lambda ctx: servers.remove_servers(
                 ctx, {**ctx.record["regions"], **ctx.gone}, ctx.leaving,
                 step=steps.REMOVE_SERVERS if gone_or_moved else steps.REMOVE_CACHES)),
        isolated(Step(steps.REMOVE_SHIELD_LEGS, rolling.shrink_shields),
                 revert_on_failure=False),
        Step(steps.REMOVE_REGIONS, lambda ctx: networks.remove_regions(ctx, ctx.gone))]


def restore():
    """The flow of a restore of ``ctx.deployment`` (serving ``ctx.sig``): servers and
    ports the record does not name go (:func:`.sweep.remove_added`), and regions it
    does not name (:func:`.sweep.remove_unrecorded`); what an interrupted update had
    deleted of a recorded region is made again (:func:`.networks.repair_regions`), and
    the origin shield's legs (:func:`.shield.repair_legs`); recorded servers that are
    gone are booted again at their recorded addresses, those rebuilt with other
    user-data rebuilt with the SIG's (:func:`.rolling.restore_user_data`, not undone);
    HTTPS put back as the SIG serves it; each balancer's members set to the recorded
    caches. Each repair that fails halfway undoes its own work only."""
    return [
        Step(steps.REMOVE_ADDED, _remove_added),
        isolated(Step(steps.RESTORE_REGIONS, networks.repair_regions)),
        isolated(Step(steps.RESTORE_ORIGIN_SHIELD, _repair_legs)),
        isolated(Step(steps.RESTART_STOPPED, _boot_missing)),
        isolated(Step(steps.REBUILD_CACHES, _restore_user_data), revert_on_failure=False),
        Step(steps.RESTORE_HTTPS, balancers.restore_https),
        Step(steps.RESTORE_LOAD_BALANCERS, _restore_members)]


def _remove_added(ctx):
    """What the record does not name goes; the addresses of what it names (and of the
    shield's legs) are worked out again."""
    ctx.missing, ctx.rebuilt = sweep.remove_added(ctx)
    sweep.remove_unrecorded(ctx)
    ctx.addresses = plan.addresses(
        ctx.sig, {r: i["cidr"] for r, i in ctx.record["regions"].items()},
        {v.name: v.address for v in ctx.deployment.vnfs})


def _repair_legs(ctx):
    """Give each recorded origin shield back the legs an interrupted update took
    (:func:`.shield.repair_legs`: it was removing their regions).

    :raises VimError: a step failed.
    """
    try:
        for vnf in ctx.sig.vnfs_in(role="shield"):
            if vnf.name in ctx.record["servers"]:  # else booted again, legs and all
                shield.repair_legs(ctx.region_conn(vnf.region), ctx.sig, ctx.record, vnf,
                                   ctx.addresses, ctx.undo)
    except Exception as exc:
        raise VimError(f"{words(exc)}; could not give the origin shield its legs "
                       "again") from exc


def _boot_missing(ctx):
    """Boot again the recorded servers that are gone, at their recorded addresses.

    :raises VimError: a step failed.
    """
    if not ctx.missing:
        return
    vnfs = [v for v in ctx.sig.vnfs if v.name in ctx.missing]
    try:
        ctx.prepared = prepare(ctx.cloud, ctx.sig, vnfs)
        servers.boot(ctx, vnfs, step=steps.RESTART_STOPPED)
    except Exception as exc:
        raise VimError(f"{words(exc)}; could not boot {', '.join(ctx.missing)} again") \
            from exc


def _restore_user_data(ctx):
    if ctx.rebuilt:
        rolling.restore_user_data(ctx, ctx.rebuilt)


def _restore_members(ctx):
    restored = deployment_of(ctx)
    ctx.parallel(lambda region: balancers.restore_members(ctx, restored, region),
                 sorted(ctx.record["regions"]), steps.RESTORE_LOAD_BALANCERS)


def terminate():
    """What the record names and what carries the vCDN's tag goes; what is gone already
    is fine."""
    def remove(ctx):
        regions = sorted({i.get("vim_region") for i in ctx.record.get("regions", {}).values()},
                         key=str) or [None]
        ctx.progress(steps.REMOVE_VNFS, 0, 1)
        sweep.sweep(ctx, regions, plan.vcdn_tag(ctx.deployment_id), ctx.record)
        ctx.progress(steps.REMOVE_VNFS, 1, 1)
    return [Step(steps.REMOVE_VNFS, remove)]


def deployment_of(ctx):
    """The :class:`~cdnaas.ro.vim.base.Deployment` ``ctx``'s flow built (or restored)."""
    sig, record = ctx.sig, ctx.record
    instances = []
    for vnf in sig.vnfs:
        info = record["regions"][vnf.region]
        if vnf.role == "load_balancer":
            instances.append(translate.vnf_instance(vnf, info["lb_id"], info["vip_address"]))
        else:
            instances.append(translate.vnf_instance(
                vnf, record["servers"][vnf.name]["server_id"], ctx.addresses[vnf.name]))
    endpoints = {r.name: record["regions"][r.name]["vip_address"] for r in sig.regions}
    dns = [i.address for i in instances if i.role == "dns"]
    return Deployment(deployment_id=sig.vcdn_id, driver="openstack", vnfs=instances,
                      entry_point=EntryPoint(hostname=sig.hostname, dns_servers=dns),
                      region_endpoints=endpoints, resources=record)


def _check_changes(added, removed, new_regions, gone_regions):
    """Refuse, before anything changes, what an update cannot add or remove: VNFs but
    caches, DNS servers (booted again where their region changes) and the balancers of
    ``new_regions`` and ``gone_regions``."""
    for verb, vnfs, regions in (("added", added, new_regions), ("removed", removed,
                                                                 gone_regions)):
        for vnf in vnfs:
            if vnf.role not in SERVER_ROLES and not (vnf.role == "load_balancer"
                                                     and vnf.region in regions):
                raise DeploymentFailed(f"{vnf.name} ({vnf.role}) cannot be {verb} by an "
                                       "update; nothing was changed")
