"""The local driver's deploy, update, restore and remove as flows of steps
(:mod:`cdnaas.ro.vim.pipeline`) over a :class:`~.context.LocalContext`.

A deploy's first step makes the bridges; its revert removes everything named after the
deployment, so a deploy that fails anywhere leaves nothing. An update's first step's
revert restores the recorded deployment (:func:`restore`); what it removes goes only
once the rest succeeded (:func:`removal`, nothing undone). A restore undoes nothing: it
is what undoes.
"""
import logging
import time

from cdnaas.ro.vim import steps
from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.local import clients, vnfhealth
from cdnaas.ro.vim.local.addressing import add_regions, assign, leg, members, restore_bridges
from cdnaas.ro.vim.local.dns_vnf import reshape_dns, restart_dns, start_dns
from cdnaas.ro.vim.local.nginx_vnfs import (boot_balancers, boot_caches, reload_lb,
                                            reshape_shield, roll_caches)
from cdnaas.ro.vim.local.removal import (drain_and_stop, remove_all, remove_region,
                                         remove_vnf, serving_strays, vnf_names)
from cdnaas.ro.vim.pipeline import Step, each, together

LOG = logging.getLogger(__name__)

#: how long a new deployment's check from each region may keep asking its DNS for an answer
VERIFY_SECONDS = 15.0


def deploy(pool):
    """Bridges first; then at once, each step in parallel over its VNFs: the origin
    shield, the caches, the balancers and the DNS VNF started (none needs another to
    start: caches and balancers name their upstreams by address), and each region's
    viewer plugged in; then a check from each region (:func:`verify_region`). The
    viewers go once it passed, waited for by nothing (a failure removes them with the
    rest)."""
    return [
        Step(steps.CREATE_NETWORKS, _make_regions,
             revert=lambda ctx: remove_all(ctx.owner, ctx.deployment_id)),
        together(
            Step(steps.BOOT_ORIGIN_SHIELD, lambda ctx: boot_caches(
                ctx, ctx.sig.vnfs_in(role="shield"), steps.BOOT_ORIGIN_SHIELD)),
            Step(steps.BOOT_CACHES, lambda ctx: boot_caches(ctx, ctx.sig.vnfs_in(role="cache"))),
            Step(steps.CONFIGURE_LOAD_BALANCERS, boot_balancers),
            each(steps.CONFIGURE_DNS, lambda ctx: ctx.sig.vnfs_in(role="dns"), start_dns, pool),
            Step(steps.VERIFY_REGIONS, lambda ctx: ctx.viewers.update(viewers(ctx)))),
        each(steps.VERIFY_REGIONS, lambda ctx: ctx.sig.regions, verify_region, pool),
        Step(steps.VERIFY_REGIONS, lambda ctx: pool.submit(clients.remove,
                                                           list(ctx.viewers.values())))]


def _make_regions(ctx):
    """The bridges of every region of a new deployment, and its VNFs' addresses."""
    ctx.record["layout"] = add_regions(ctx.owner, ctx.deployment_id,
                                       [r.name for r in ctx.sig.regions])
    ctx.addresses = assign(ctx.sig, ctx.layout, {})


def update(ctx, pool, restore):
    """The flow of an update of ``ctx.deployment`` to ``ctx.sig`` (``ctx.change``): bridges
    of new regions; the origin shield, when regions come or go or it moves, given a leg
    in each new region and reloaded to listen on it (:func:`.nginx_vnfs.reshape_shield`:
    a shield whose region goes moves to the one the SIG puts it in), so that caches of
    new regions find it; new caches and new regions' balancers; kept caches
    reconfigured, one at a time, when the origin or the cache rules change (what they
    cached stays: a new origin is taken to serve the same content, a purge empties
    them); balancers of regions whose caches or service changed reloaded (settled when
    :attr:`~cdnaas.ro.vim.changes.Change.settles`); the DNS VNF built again when regions
    come or go or it moves (:func:`.dns_vnf.reshape_dns`, in place, then every region
    checked from a client), else its dnsmasq restarted where the names changed.
    A failure puts everything back: ``restore(ctx)``, the first step's revert."""
    change = ctx.change
    kept_regions = [r.name for r in ctx.sig.regions if r.name in ctx.deployment.resources["layout"]]
    touched = sorted({v.region for v in change.new_in("cache") + change.gone
                      if v.role == "cache"} & set(kept_regions))
    if change.service_changed:  # a rotation reloads every balancer, gracefully
        touched = kept_regions
    shields = reshaped_shields(change)
    # the shield first: a cache reloaded before it would fetch from its old config (a
    # reshaped shield has its new one already)
    reconfigured = [v for v in change.kept_in("shield") if v not in shields] \
        + change.kept_in("cache") if change.caches_reconfigured else []
    reshaped = change.regions_changed or any(v.role == "dns" for v in change.moved)
    restarted = [] if reshaped or not change.renamed else ctx.sig.vnfs_in(role="dns")
    flow = [
        Step(steps.CREATE_NETWORKS, _grow_regions, revert=restore),
        each(steps.RESHAPE_ORIGIN_SHIELD, lambda ctx: shields,
             lambda ctx, v: reshape_shield(ctx, v, draining=True), pool),
        Step(steps.BOOT_CACHES, lambda ctx: boot_caches(ctx, change.new_in("cache"))),
        Step(steps.CONFIGURE_LOAD_BALANCERS,
             lambda ctx: boot_balancers(ctx, change.new_in("load_balancer"))),
        Step(steps.RECONFIGURE_CACHES, lambda ctx: roll_caches(ctx, reconfigured)),
        each(steps.RECONFIGURE_LOAD_BALANCERS, lambda ctx: touched,
             lambda ctx, region: reload_lb(ctx, region, settle=change.settles), pool),
        each(steps.RECONFIGURE_DNS, lambda ctx: restarted, restart_dns, pool)]
    if reshaped:
        flow += [each(steps.RESHAPE_DNS, lambda ctx: ctx.sig.vnfs_in(role="dns"), reshape_dns,
                      pool),
                 Step(steps.VERIFY_REGIONS, lambda ctx: verify_regions(ctx, pool))]
    return flow


def reshaped_shields(change):
    """The origin shields an update reshapes: when regions come or go, or it moves."""
    if change.regions_changed or any(v.role == "shield" for v in change.moved):
        return change.kept_in("shield")
    return []


def _grow_regions(ctx):
    """Bridges of the regions new to the deployment; the VNFs' addresses (kept ones keep
    theirs)."""
    layout = {**ctx.deployment.resources["layout"],
              **add_regions(ctx.owner, ctx.deployment_id, ctx.change.added_regions)}
    ctx.record["layout"] = {r.name: layout[r.name] for r in ctx.sig.regions}
    ctx.addresses = assign(ctx.sig, ctx.layout, {v.name: v.address
                                                 for v in ctx.deployment.vnfs})


def removal(ctx, pool):
    """What an update removes, once the rest succeeded (nothing undoes it): removed
    caches drain and stop, removed regions drain, lose their VNFs and their bridge, and
    then the shield stops listening on its legs there (which their caches fetched from
    as they drained) and loses them."""
    change = ctx.change
    return [
        each(steps.DRAIN_CACHES, lambda ctx: [v for v in change.gone if v.role == "cache"
                                              and v.region in ctx.layout],
             lambda ctx, v: drain_and_stop(ctx.owner, ctx.deployment_id, v.name), pool),
        each(steps.REMOVE_REGIONS, lambda ctx: change.removed_regions,
             lambda ctx, region: remove_region(ctx.owner, ctx.deployment_id, region,
                                               [v for v in change.gone if v.region == region]),
             pool),
        each(steps.REMOVE_SHIELD_LEGS,
             lambda ctx: reshaped_shields(change) if change.removed_regions else [],
             reshape_shield, pool)]


def restore(pool):
    """The flow of a restore of ``ctx.deployment`` (serving ``ctx.sig``): the VNFs of the
    deployment it does not record go (those serving at an address it does not hold only
    at the end, once the balancers have their recorded members again), its bridges
    become those it records, VNFs that are not whole are mended where they run (they
    answer) or removed and built again at their recorded address (silent), the shield
    and caches are given their config again (a rolling reload), each balancer its
    recorded members, and the DNS VNF the recorded regions."""
    return [
        Step(steps.REMOVE_ADDED, _remove_added),
        Step(steps.RESTORE_REGIONS, lambda ctx: restore_bridges(ctx.owner, ctx.deployment_id,
                                                                ctx.layout)),
        Step(steps.RESTART_STOPPED, lambda ctx: _sort_broken(ctx, pool)),
        Step(steps.BOOT_CACHES, lambda ctx: [boot_caches(ctx, [v for v in ctx.gone
                                                               if v.role == role])
                                             for role in ("shield", "cache")]),
        Step(steps.CONFIGURE_LOAD_BALANCERS, lambda ctx: boot_balancers(
            ctx, [v for v in ctx.gone if v.role == "load_balancer"])),
        each(steps.RESTORE_ORIGIN_SHIELD, lambda ctx: _running(ctx, "shield"),  # before caches
             lambda ctx, v: reshape_shield(ctx, v, mend=v.name in ctx.mended), pool),
        Step(steps.RECONFIGURE_CACHES, lambda ctx: roll_caches(ctx, _running(ctx, "cache"),
                                                               ctx.mended)),
        each(steps.RESTORE_LOAD_BALANCERS, lambda ctx: sorted(ctx.layout),
             lambda ctx, region: reload_lb(
                 ctx, region, members=members(ctx.deployment, region),
                 mend=ctx.sig.vnfs_in(region, "load_balancer")[0].name in ctx.mended), pool),
        each(steps.RESTORE_DNS, lambda ctx: ctx.sig.vnfs_in(role="dns"), reshape_dns, pool),
        each(steps.DRAIN_ADDED, lambda ctx: ctx.serving,
             lambda ctx, name: drain_and_stop(ctx.owner, ctx.deployment_id, name), pool)]


def _remove_added(ctx):
    """Remove the VNFs of the deployment it does not record, but those serving at an
    address of a recorded region that none of its VNFs holds (a cache that replaced one,
    which its balancer may name alone): they go last (``ctx.serving``)."""
    recorded = {v.name for v in ctx.deployment.vnfs}
    ctx.serving = serving_strays(ctx.owner, ctx.deployment)
    strays = sorted(vnf_names(ctx.owner, ctx.deployment_id) - recorded - set(ctx.serving))
    ctx.parallel(steps.REMOVE_ADDED, strays,
                 lambda name: remove_vnf(ctx.owner, ctx.deployment_id, name))


def _sort_broken(ctx, pool):
    """Look at every recorded VNF (:func:`.vnfhealth.recorded`): a broken nginx VNF that
    answers is mended where it runs (``ctx.mended``); the others broken (silent, or the
    DNS VNF) are removed, whatever is left of them, to be built again (``ctx.gone``)."""
    recorded = {v.name: v for v in ctx.deployment.vnfs}
    kept = [v for v in ctx.sig.vnfs if v.name in recorded]
    broken = [(v, found) for v, found in zip(kept, pool.map(
        lambda v: vnfhealth.recorded(ctx.owner, ctx.deployment, recorded[v.name]), kept))
        if not found.healthy]
    for vnf, found in broken:
        if vnf.role != "dns" and not found.silent:
            LOG.info("mending %s %s of %s where it runs: %s", vnf.role, vnf.name,
                     ctx.deployment_id, found.detail)
            ctx.mended.add(vnf.name)
    ctx.gone = [v for v, _found in broken if v.name not in ctx.mended]
    for vnf in ctx.gone:  # whatever is left of them (namespace, group, orphans) goes first
        LOG.info("rebuilding %s %s of %s", vnf.role, vnf.name, ctx.deployment_id)
        remove_vnf(ctx.owner, ctx.deployment_id, vnf.name)


def _running(ctx, role):
    """The recorded VNFs of ``role`` a restore kept running (mended or whole)."""
    recorded = {v.name for v in ctx.deployment.vnfs}
    return [v for v in ctx.sig.vnfs_in(role=role) if v.name in recorded and v not in ctx.gone]


def terminate():
    """Everything named after the deployment goes; what is gone already is fine."""
    def remove(ctx):
        total = len(ctx.deployment.vnfs) or 1
        ctx.progress(steps.REMOVE_VNFS, 0, total)
        remove_all(ctx.owner, ctx.deployment_id)
        ctx.progress(steps.REMOVE_VNFS, total, total)
    return [Step(steps.REMOVE_VNFS, remove)]


def viewers(ctx):
    """``{region: Client}``: a viewer of each region of the SIG that has client prefixes,
    at its probe address (:func:`.clients.probe_address`), all plugged in at once."""
    return clients.viewers(ctx.deployment_id, {
        r.name: (ctx.layout[r.name]["bridge"], ctx.layout[r.name]["subnet"],
                 clients.probe_address(r.client_prefixes[0]))
        for r in ctx.sig.regions if r.client_prefixes})


def verify_regions(ctx, pool):
    """:func:`verify_region` from a viewer of each region, plugged in for it and removed."""
    found = viewers(ctx)
    try:
        ctx.parallel(steps.VERIFY_REGIONS, ctx.sig.regions,
                     lambda r: _verify(ctx, r, found.get(r.name)))
    finally:
        clients.remove(found.values())


def verify_region(ctx, region):
    """:func:`_verify` from ``ctx.viewers``' viewer of ``region``."""
    _verify(ctx, region, ctx.viewers.get(region.name))


def _verify(ctx, region, viewer):
    """``viewer``, a client of ``region`` (None: the region has no client prefix, so no
    client of it can exist), resolves the vCDN to its balancer and fetches through it."""
    if viewer is None:
        return
    sig = ctx.sig
    lb = ctx.addresses[sig.vnfs_in(region.name, "load_balancer")[0].name]
    dns_server = leg(sig, ctx.addresses[sig.vnfs_in(role="dns")[0].name], region.name)
    # asked again for a while: one lost UDP answer on a loaded host is not a failure
    deadline = time.monotonic() + VERIFY_SECONDS
    answer = viewer.lookup(dns_server, sig.hostname)
    while lb not in answer and time.monotonic() < deadline:
        time.sleep(0.2)
        answer = viewer.lookup(dns_server, sig.hostname)
    if lb not in answer:
        raise VimError(f"a client of {region.name} got {answer or 'no answer'} for "
                       f"{sig.hostname}, not its balancer {lb}")
    # fetched again too: a cache's first fetch from the origin may fail on a loaded
    # host, or the origin come up meanwhile
    status = viewer.status(sig.hostname, lb)
    while not 0 < status < 500 and time.monotonic() < deadline:
        time.sleep(0.2)
        status = viewer.status(sig.hostname, lb)
    if not 0 < status < 500:
        raise VimError(f"a client of {region.name} could not fetch through the vCDN "
                       f"(HTTP {status or 'no answer'}); is the origin {sig.origin.url} up?")
