"""Each region's Octavia balancer: made with its listeners and pools in one call, its
pools' members set in one batch call per pool, HTTPS turned on, off or given another
certificate container by an update and put back as recorded by a restore
(:mod:`.https`). Functions of :class:`.context.OpenStackContext` steps (:mod:`.flows`).

Octavia locks a balancer during each call on it: every write waits for the balancer
to be ACTIVE before and after it.
"""
from cdnaas.common import challenges, errors
from cdnaas.ro.vim import steps
from cdnaas.ro.vim.base import DeploymentFailed, VimError, run_all, tls_ref
from cdnaas.ro.vim.openstack import cloud as oscloud
from cdnaas.ro.vim.openstack import https, https_policy, plan
from cdnaas.ro.vim.openstack.lookup import words
from cdnaas.vnf.balancer import served_names


def create_balancers(ctx, regions=None):
    """Start creating the load balancer of each region of ``regions`` (default: all of
    the SIG's) with its listeners and pools (one call each), each undone by ``ctx.undo``.

    :returns: region -> load balancer id (provisioning; :func:`register_members` waits).
    """
    sig, addresses = ctx.sig, ctx.addresses
    lbs = {}
    tags = plan.tags(sig.vcdn_id)
    for region in sig.regions if regions is None else regions:
        conn = ctx.conn(region.vim_region)
        info = ctx.record["regions"][region.name]
        lb_vnf = sig.vnfs_in(region.name, "load_balancer")
        name = balancer_name(sig, region.name)
        attrs = {"name": name, "vip_subnet_id": info["subnet_id"], "tags": tags,
                 "description": f"CDNaaS vCDN {sig.vcdn_id}, region {region.name}",
                 "listeners": listeners(ctx.secrets, conn, sig, region.name)}
        if lb_vnf and addresses.get(lb_vnf[0].name):
            attrs["vip_address"] = addresses[lb_vnf[0].name]
        lb = conn.load_balancer.create_load_balancer(**attrs)
        ctx.undo.push(f"load balancer {name}", delete_load_balancer, conn, lb.id)
        info["lb_id"] = lb.id
        lbs[region.name] = lb.id
    return lbs


def listeners(secrets, conn, sig, region):
    """The listeners of ``region``'s balancer for ``sig`` (:func:`.plan.listeners`):
    HTTPS with ``sig``'s certificate container (Barbican, through RO's ``secrets``), ALPN
    and HSTS where the Octavia API takes them, and the vCDN's HTTPS policy (ACME
    challenges let through where the certificate is managed); HTTP only without a
    certificate."""
    policy = {"policy": sig.service.get("https_policy"), "names": served_names(sig),
              "acme": acme_answered(sig)}
    ref = tls_ref(sig)
    if ref is None:
        return plan.listeners(balancer_name(sig, region), plan.tags(sig.vcdn_id), **policy)
    if secrets is None:
        raise VimError(f"{sig.vcdn_id} serves HTTPS but RO gave this driver no secret store")
    versions = oscloud.octavia_versions(conn)
    return plan.listeners(balancer_name(sig, region), plan.tags(sig.vcdn_id),
                          container_ref=secrets.external_ref(ref),
                          alpn=plan.alpn_supported(versions),
                          policy_api=plan.octavia_supports(versions, plan.HSTS_VERSION),
                          **policy)


def register_members(ctx, regions=None, step=steps.REGISTER_MEMBERS):
    """Wait for each balancer of ``ctx.lbs``, then set its pools' members in ONE batch
    call per pool, for ``regions`` (default: all of the SIG's)."""
    sig, record = ctx.sig, ctx.record
    regions = regions if regions is not None else [r.name for r in sig.regions]

    def register(region):
        conn = ctx.region_conn(region)
        info = record["regions"][region]
        oscloud.load_balancer_active(conn, ctx.lbs[region], oscloud.timeout("lb"))
        if "pool_id" not in info:
            lb = conn.load_balancer.get_load_balancer(ctx.lbs[region])
            info.update(pools(conn, lb) if tls_ref(sig) else {"pool_id": lb.pools[0]["id"]})
            info["vip_address"] = lb.vip_address
        set_members(conn, info, members(sig, region, info, ctx.addresses))
    ctx.parallel(register, regions, step)


def members(sig, region, info, addresses, leaving=(), stand_ins=()):
    """Pool members of ``region``'s caches, but those named in ``leaving``, and of
    ``stand_ins``."""
    return [{"name": plan.resource_name(sig.vcdn_id, v.name), "address": addresses[v.name],
             "protocol_port": plan.HTTP_PORT, "subnet_id": info["subnet_id"],
             "tags": plan.tags(sig.vcdn_id)}
            for v in [*sig.vnfs_in(region, "cache"), *stand_ins] if v.name not in leaving]


def restore_members(ctx, deployment, region):
    """Make ``deployment``'s caches of ``region`` the members of its balancer's pools."""
    info = deployment.resources["regions"][region]
    conn = ctx.conn(info["vim_region"])
    recorded = [{"name": plan.resource_name(deployment.deployment_id, v.name),
                 "address": v.address, "protocol_port": plan.HTTP_PORT,
                 "subnet_id": info["subnet_id"], "tags": plan.tags(deployment.deployment_id)}
                for v in deployment.vnfs if v.region == region and v.role == "cache"]
    set_members(conn, info, recorded)


def set_members(conn, info, wanted):
    """Make ``wanted`` the members of each pool of region ``info``'s balancer: one batch
    call per pool, each once the balancer is ACTIVE (Octavia locks it during a batch)."""
    oscloud.load_balancer_active(conn, info["lb_id"], oscloud.timeout("lb"))
    for pool_id in pool_ids(info):
        oscloud.batch_update_members(conn, pool_id, wanted)
        oscloud.load_balancer_active(conn, info["lb_id"], oscloud.timeout("lb"))


def pools(conn, lb):
    """``{"pool_id": the HTTP listener's pool, "tls_pool_id", "tls_listener_id": the HTTPS
    listener's and its pool (when it has one)}`` of Octavia balancer ``lb``."""
    found = {}
    for item in lb.listeners:
        listener = conn.load_balancer.get_listener(item["id"])
        if listener.protocol == "TERMINATED_HTTPS":
            found.update(tls_pool_id=listener.default_pool_id, tls_listener_id=listener.id)
        else:
            found["pool_id"] = listener.default_pool_id
    return found


def pool_ids(info):
    """The pools of a region's balancer that take its caches as members (HTTP, HTTPS)."""
    return [info[k] for k in ("pool_id", "tls_pool_id") if info.get(k)]


def balancer_name(sig, region):
    """The name of ``region``'s Octavia balancer (and of its HTTP listener and pool)."""
    lb_vnf = sig.vnfs_in(region, "load_balancer")
    return plan.resource_name(sig.vcdn_id, lb_vnf[0].name if lb_vnf else region)


def balancer_gone(conn, lb_id):
    """Whether Octavia balancer ``lb_id`` is gone (or going: DELETED, PENDING_DELETE)."""
    return oscloud.load_balancer_status(conn, lb_id) in ("DELETED", "PENDING_DELETE")


def delete_load_balancer(conn, lb_id, wait=True):
    """Delete balancer ``lb_id`` (its listeners and pools with it; gone is fine), waited
    gone unless not to ``wait``."""
    oscloud.delete_load_balancer(conn, lb_id)
    if wait:
        oscloud.load_balancer_gone(conn, lb_id, oscloud.timeout("delete"))


def acme_answered(sig):
    """Whether the caches of ``sig`` answer ACME HTTP-01 challenges (its certificate is
    managed: :func:`cdnaas.common.challenges.thumbprint_of`).

    :raises DeploymentFailed: its thumbprint is refused.
    """
    try:
        return challenges.thumbprint_of(sig.service) is not None
    except errors.BadRequest as exc:
        raise DeploymentFailed(exc.message) from None


def https_policy_changed(previous, sig):
    """Whether going from ``previous`` to ``sig`` changes what the balancers' listeners
    carry of the HTTPS policy: the policy, or the names its L7 redirects match, or whether
    they let ACME challenges through (:func:`.plan.http_l7_policies`)."""
    policies = [(s.service.get("https_policy"),
                 plan.http_l7_policies(s.service.get("https_policy"), served_names(s),
                                       # a pool's name alike for both: only the actions count
                                       acme_pool="http" if acme_answered(s) else None))
                for s in (previous, sig)]
    return policies[0] != policies[1]


# -- HTTPS: each balancer's TERMINATED_HTTPS listener and its pool ----------------------

def rotate(ctx):
    """Give the HTTPS listener of each region that stays (``ctx.lived``) the SIG's
    certificate container (Octavia reloads its balancer gracefully); the undo gives the
    previous one back."""
    new = ctx.secrets.external_ref(tls_ref(ctx.sig))
    old = ctx.secrets.external_ref(tls_ref(ctx.previous))

    def give(region):
        info = ctx.record["regions"][region]
        conn = ctx.conn(info.get("vim_region"))
        ids = (conn, info["lb_id"], info["tls_listener_id"])
        ctx.undo.push(f"certificate of {region}", https.give_container, *ids, old)
        https.give_container(*ids, new)
    first_alone(ctx, give, ctx.lived, steps.ROTATE_CERTIFICATES)


def change_https_policy(ctx):
    """Give the balancer of each region that stays (``ctx.lived``) the SIG's HTTPS policy
    (:func:`.https_policy.converge`); the undo brings back the previous SIG's."""
    def change(region):
        info = ctx.record["regions"][region]
        conn = ctx.conn(info.get("vim_region"))
        ctx.undo.push(f"HTTPS policy of {region}", converge_https_policy, ctx.secrets, conn,
                      ctx.previous, region, info)
        converge_https_policy(ctx.secrets, conn, ctx.sig, region, info)
    ctx.parallel(change, ctx.lived, steps.CHANGE_HTTPS_POLICY)


def converge_https_policy(secrets, conn, sig, region, info):
    """Bring ``region``'s balancer (``info``) to ``sig``'s HTTPS policy."""
    https_policy.converge(conn, info["lb_id"], info["pool_id"],
                          listeners(secrets, conn, sig, region))


def first_alone(ctx, action, regions, step):
    """``action(region)`` for the first of ``regions`` alone, then for the others side
    by side: taking a certificate container, Octavia's API adds its service user to
    the container's and secrets' read ACLs in Barbican, which fails two such writes
    at once (a duplicate row; Octavia answers 400 "Could not retrieve certificate").
    The other regions find the ACLs made."""
    ctx.progress(step, 0, len(regions))
    action(regions[0])
    run_all(ctx.pool, action, regions[1:], step,
            lambda _step, done, total: ctx.progress(step, done + 1, total + 1))


def https_on(ctx):
    """Give the balancer of each region that stays (``ctx.lived``) the TERMINATED_HTTPS
    listener deploy makes (:func:`.plan.listeners`: the SIG's certificate container) and
    its pool, whose members are the region's caches (one batch call); record them as
    ``tls_listener_id`` and ``tls_pool_id``. Octavia locks the balancer during each
    call: it is waited ACTIVE between them (:func:`.https.add`). The undo deletes what
    was made. The first region alone, then the others side by side
    (:func:`first_alone`)."""
    def add(region):
        info = ctx.record["regions"][region]
        conn = ctx.conn(info["vim_region"])
        info["tls_listener_id"], info["tls_pool_id"] = https.add(
            conn, info["lb_id"], https_spec(ctx, conn, region), ctx.undo)
        oscloud.batch_update_members(conn, info["tls_pool_id"],
                                     members(ctx.sig, region, info, ctx.addresses))
        oscloud.load_balancer_active(conn, info["lb_id"], oscloud.timeout("lb"))
    first_alone(ctx, add, ctx.lived, steps.TURN_HTTPS_ON)


def https_off(ctx):
    """Delete each region's HTTPS listener and its pool (:func:`.https.restore` to
    HTTP only: the pool first, the balancer waited ACTIVE between Octavia calls) and
    drop them from the record. Nothing undoes this: an update does it once everything
    else succeeded.

    :raises Exception: a delete failed (the update records what is left).
    """
    def remove(region):
        info = ctx.record["regions"][region]
        https.restore(ctx.conn(info["vim_region"]), info, None)
    ctx.parallel(remove, sorted(ctx.record["regions"]), steps.TURN_HTTPS_OFF)


def https_spec(ctx, conn, region):
    """The HTTPS listener (with its default pool) of ``region``'s balancer as
    :func:`.plan.listeners` describes it for the SIG; None when it serves HTTP only."""
    specs = listeners(ctx.secrets, conn, ctx.sig, region)
    return specs[1] if len(specs) > 1 else None


def restore_https(ctx):
    """Put each recorded region's HTTPS listener and pool back as the SIG serves them
    (:func:`.https.restore`: what an interrupted :func:`https_on`, :func:`https_off`
    or :func:`rotate` changed) with the SIG's HTTPS policy (what an interrupted
    :func:`change_https_policy` changed) and record their ids; the first region alone
    (:func:`first_alone`: a listener may be given a certificate container).

    :raises VimError: an Octavia call failed (restoring again carries on).
    """
    def repair(region):
        info = ctx.record["regions"][region]
        conn = ctx.conn(info["vim_region"])
        specs = listeners(ctx.secrets, conn, ctx.sig, region)
        https.restore(conn, info, specs[1] if len(specs) > 1 else None)
        https_policy.converge(conn, info["lb_id"], info["pool_id"], specs)
    try:
        first_alone(ctx, repair, sorted(ctx.record["regions"]), steps.RESTORE_HTTPS)
    except Exception as exc:
        raise VimError(f"{words(exc)}; could not put the HTTPS listeners back as "
                       "recorded") from exc
