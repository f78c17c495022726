"""The local driver's nginx VNFs (caches, origin shield, load balancers): started in their
namespaces, given a new config without losing a viewer request, their balancers' log
shippers kept on the vCDN's log streams. Each function works for one step of a flow
(:mod:`.flows`) over its :class:`~.context.LocalContext`."""
import functools
import threading
import time

from cdnaas.common.sig import Origin
from cdnaas.delivery import access, logstreams, origins, responses
from cdnaas.ro.vim import management, steps
from cdnaas.ro.vim.base import run_all
from cdnaas.ro.vim.local import cgroups, logshipping, netns, network, processes, tls_files
from cdnaas.ro.vim.local.addressing import (HTTP_PORT, HTTPS_PORT, add_legs, cidr, leg,
                                            legs_of, managed_address, management_sources,
                                            origin_address, stale_legs)
from cdnaas.ro.vim.local.system import ip_batch
from cdnaas.vnf import endpoints, options, tools
from cdnaas.vnf.balancer import balancer_of
from cdnaas.vnf.cache import cache_of

VNF_USER = "root"  # the namespace is the VNF's machine; its files live under the state dir


def boot_caches(ctx, caches, step=steps.BOOT_CACHES, addresses=None):
    """Start ``caches`` (or the origin shield) in parallel; each answers HTTP before
    this returns. A shield has a leg on every region's bridge, where that region's
    caches reach it. ``addresses``: where each VNF listens (default ``ctx.addresses``)."""
    sig, layout = ctx.sig, ctx.layout
    addresses = ctx.addresses if addresses is None else addresses
    # every cache of a region reaches the origins at the same address: resolved and
    # checked against the origin policy once per region, not once per cache
    reach = functools.cache(lambda origin, region: origin_address(origin, layout[region]))

    def config(vnf, prefix):
        write_cache_files(sig, prefix)
        return cache_text(ctx, vnf, addresses, prefix, reach)

    def links(vnf):
        if vnf.role == "shield":
            return legs_of(sig, layout, addresses[vnf.name])
        return [(layout[vnf.region]["bridge"], cidr(addresses[vnf.name], layout[vnf.region]),
                 [])]
    managed = {v.name: managed_address(sig, v, addresses) for v in caches}
    boot_nginx(ctx, step, caches, config, links, managed)


def boot_balancers(ctx, balancers=None, addresses=None):
    """Start each region's balancer (or only ``balancers``) with all its region's caches
    as members (one config each)."""
    sig, layout = ctx.sig, ctx.layout
    addresses = ctx.addresses if addresses is None else addresses
    if balancers is None:
        balancers = sig.vnfs_in(role="load_balancer")
    bundle = ctx.bundle() if balancers else None  # read once for them all

    def config(vnf, prefix):
        members = [(c.name, addresses[c.name]) for c in sig.vnfs_in(vnf.region, "cache")]
        return lb_text(sig, vnf, addresses[vnf.name], members, prefix, bundle)
    boot_nginx(ctx, steps.CONFIGURE_LOAD_BALANCERS, balancers, config,
               lambda v: [(layout[v.region]["bridge"], cidr(addresses[v.name], layout[v.region]),
                           sig.region(v.region).client_prefixes + ["default"])],
               addresses, started=lambda v: ship_logs(ctx, v, addresses))


def boot_nginx(ctx, step, vnfs, config, links, addresses, started=lambda vnf: None):
    """Plug every VNF's namespace in one ``ip`` run, then in parallel for each:
    configure its links and start nginx in it (nginx checks its config as it
    starts and runs nothing on one it rejects), wait until it answers, move
    its processes into its CPU group, then call ``started(vnf)``."""
    names = {v.name: ctx.namespace(v.name) for v in vnfs}
    network.create_namespaces([(names[v.name], links(v)) for v in vnfs])

    def start(vnf):
        prefix = ctx.prefix(vnf.name)
        conf = prefix / "nginx.conf"
        conf.write_text(config(vnf, prefix))
        tools.prepare_nginx_prefix(str(prefix))
        group = ctx.group(vnf.name)
        cgroups.create(group, vnf.vcpus, cgroups.host_cpus(vnf.host))
        network.configure_namespace(names[vnf.name], links(vnf))
        processes.start_nginx(names[vnf.name], prefix, str(conf))
        processes.wait_until(lambda: management.answers_http(addresses[vnf.name]),
                             f"{vnf.role} {vnf.name}")
        cgroups.adopt(group, processes.pid_in(prefix / "nginx.pid"))
        started(vnf)
    ctx.parallel(step, vnfs, start)


def reload_lb(ctx, region, members=None, settle=False, mend=False):
    """Reload ``region``'s balancer on its config for ``ctx.sig`` (its certificate:
    ``ctx.bundle()``), with ``members`` or the region's caches, unless it was written
    already and it is not to ``mend`` (a balancer that does not run what was written is
    not whole: its health says so and a restore mends it); with ``settle``, return once
    its old workers have ended (:func:`.processes.reload_nginx`). Its log shipper follows
    the SIG's log streams (:func:`ship_logs`)."""
    sig, addresses = ctx.sig, ctx.addresses
    lb = sig.vnfs_in(region, "load_balancer")[0]
    prefix = ctx.prefix(lb.name)
    if members is None:
        members = [(c.name, addresses[c.name]) for c in sig.vnfs_in(region, "cache")]
    text = lb_text(sig, lb, addresses[lb.name], members, prefix, ctx.bundle())
    namespace = ctx.namespace(lb.name)
    conf = prefix / "nginx.conf"
    if mend or not (conf.exists() and conf.read_text() == text):  # else it runs that
        with netns.entered(namespace):  # nginx -t binds the balancer's address
            tools.check_nginx(text, str(prefix))
        conf.write_text(text)
        processes.reload_nginx(namespace, str(prefix), str(conf), ctx.group(lb.name),
                               settle=settle)
        tls_files.prune(prefix, text)  # the new master reads only the files it names
    ship_logs(ctx, lb, addresses)


def ship_logs(ctx, vnf, addresses):
    """Run the balancer ``vnf``'s log shipper on the SIG's log streams, or none
    (:mod:`.logshipping`); collectors on this machine are reached at the region's
    bridge gateway, as origins are."""
    stored = ctx.sig.service.get(logstreams.FIELD)
    logshipping.sync(
        ctx.namespace(vnf.name), ctx.prefix(vnf.name), ctx.group(vnf.name), addresses[vnf.name],
        None if stored is None else logstreams.check(stored, f"service.{logstreams.FIELD}"),
        vnf.name,
        lambda host, port: origin_address(Origin(scheme="tcp", host=host, port=port),
                                          ctx.layout[vnf.region]))


def roll_caches(ctx, vnfs, mended=(), addresses=None):
    """A rolling reload of ``vnfs`` (caches, origin shields) onto their config for
    ``ctx.sig`` that loses no viewer request, those named in ``mended`` even where that
    config is written already (:func:`reload_cache`); every cache reload of the driver
    goes through here. The shields first, one at a time (the caches fetch from them),
    then each region's caches one at a time, the regions side by side; a refused config
    stops the roll.

    Why one at a time, apart: a cache's graceful reload closes the kept-alive
    connections its old workers hold, and a balancer that sends a request on one at
    that instant gets a reset. It sends the request again to the next member at once
    (an error on a cached connection costs no try), but counts a failure of the cache,
    which leaves its rotation for :data:`cdnaas.vnf.endpoints.MEMBER_FAIL_SECONDS`
    (``fail_timeout``, which keeps failover from a dead cache fast). So the next cache
    of the region reloads only once that time, and a second more (nginx counts whole
    seconds), has passed since the previous one's old workers ended: the balancer
    never has every member out. A cache that needs no reload waits for nothing (a
    heal mends one cache of a region: the others are as they were). Reloaded within
    those seconds, both caches of a region were out and the balancer answered 502 "no
    live upstreams" (2,054 to 6,178 viewer requests lost per run of
    ``benchmarks/key_rotation.py``). Draining each cache through its balancer (a
    reload with the member ``down``, another with it back) avoids the resets too, but
    reloads the balancer twice per cache, each time closing every viewer's idle
    connection."""
    done, lock = [0], threading.Lock()
    ctx.progress(steps.RECONFIGURE_CACHES, 0, len(vnfs))

    def roll(members):
        rejoins_at = [float("-inf")]  # when the balancer may pick the one reloaded before
        for vnf in members:
            if reload_cache(ctx, vnf, addresses, mend=vnf.name in mended, pause=lambda: time.sleep(
                    max(0.0, rejoins_at[0] - time.monotonic()))):
                rejoins_at[0] = time.monotonic() + endpoints.MEMBER_FAIL_SECONDS + 1
            with lock:
                done[0] += 1
                ctx.progress(steps.RECONFIGURE_CACHES, done[0], len(vnfs))
    roll([v for v in vnfs if v.role == "shield"])
    regions = {}
    for vnf in vnfs:
        if vnf.role == "cache":
            regions.setdefault(vnf.region, []).append(vnf)
    run_all(ctx.pool, roll, regions.values())


def reload_cache(ctx, vnf, addresses=None, mend=False, pause=lambda: None):
    """Give the running cache (or shield) ``vnf`` its config for ``ctx.sig`` (origin, cache
    rules), checked in its namespace and reloaded gracefully once ``pause()`` returns,
    returning once its old workers have ended: True; nothing when it has that config
    already and is not to ``mend``: False. Caches are reloaded through
    :func:`roll_caches`, which keeps their balancer serving."""
    prefix = ctx.prefix(vnf.name)
    write_cache_files(ctx.sig, prefix)
    text = cache_text(ctx, vnf, ctx.addresses if addresses is None else addresses, prefix)
    conf = prefix / "nginx.conf"
    if not mend and conf.exists() and conf.read_text() == text:
        return False
    namespace = ctx.namespace(vnf.name)
    with netns.entered(namespace):  # nginx -t binds the cache's address
        tools.check_nginx(text, str(prefix))
    pause()
    conf.write_text(text)
    processes.reload_nginx(namespace, str(prefix), str(conf), ctx.group(vnf.name), settle=True)
    return True


def reshape_shield(ctx, vnf, draining=False, mend=False, addresses=None):
    """Bring the running origin shield ``vnf`` to ``ctx.sig``'s regions in place, as
    :func:`.dns_vnf.reshape_dns` does the DNS VNF: a leg on each new region's bridge, its
    config reloaded (:func:`reload_cache`) to listen on each leg, its legs in regions
    the SIG lacks deleted, its CPU group moved to its host. A shield the SIG puts in
    another region (its own removed) is handled, not refused: it is managed at its
    leg there and reaches the origin through that region's bridge from then on.
    With ``draining``, the legs in regions the SIG lacks stay and it keeps listening
    on them, for their caches still draining: call it again without, once those
    regions are gone. With ``mend``, it is reloaded even where its config is written
    already (:func:`reload_cache`)."""
    addresses = ctx.addresses if addresses is None else addresses
    namespace = ctx.namespace(vnf.name)
    own = addresses[vnf.name]
    legs = add_legs(namespace, legs_of(ctx.sig, ctx.layout, own))
    served = own + [a for a in legs if a not in own] if draining else own
    reload_cache(ctx, vnf, {**addresses, vnf.name: served}, mend)
    ip_batch(stale_legs(legs, served), namespace=namespace)
    cgroups.create(ctx.group(vnf.name), vnf.vcpus, cgroups.host_cpus(vnf.host))


def cache_text(ctx, vnf, addresses, prefix, reach=None):
    """The nginx config of the cache or origin shield ``vnf`` of ``ctx.sig``, under
    ``prefix``.

    The shield fetches from the origins (the primary and any secondary, each resolved
    here) and also listens on its leg in every other region; a cache fetches from the
    shield's leg in its own region where the vCDN has a shield (plain HTTP, the origin's
    name as Host), else from the origins.
    A cache trusts its region's balancer for the viewer's address (X-Forwarded-For); the
    files of the vCDN's access control are written first
    (:func:`cdnaas.delivery.access.write_vnf_files`). ``reach(origin, region)`` gives
    where the VNFs of ``region`` reach ``origin`` (:func:`.addressing.origin_address` by
    default).
    """
    sig, layout = ctx.sig, ctx.layout
    if reach is None:
        def reach(origin, region):
            return origin_address(origin, layout[region])
    address = managed_address(sig, vnf, addresses)
    [shield] = sig.vnfs_in(role="shield") or [None]
    also_listen, secondary_address = [], None
    behind_shield = vnf.role != "shield" and shield is not None
    if behind_shield:
        fetch_from = leg(sig, addresses[shield.name], vnf.region)
    else:
        if vnf.role == "shield":
            also_listen = [a for a in addresses[vnf.name] if a != address]
        fetch_from = reach(sig.origin, vnf.region)
        secondary = origins.secondary_origin(sig.service)
        if secondary is not None:
            secondary_address = reach(secondary, vnf.region)
    viewers_facing = vnf.role == "cache"
    access.write_vnf_files(prefix, options.access_files(sig.service if viewers_facing
                                                        else None))
    return cache_of(
        sig, vnf, listen_address=address, listen_port=HTTP_PORT, prefix_dir=str(prefix),
        user=VNF_USER, origin_address=fetch_from, max_files=processes.open_file_limit(),
        management_sources=management_sources(address), also_listen=also_listen,
        secondary_address=secondary_address, behind_shield=behind_shield,
        real_ip_from=[addresses[lb.name] for lb in sig.vnfs_in(vnf.region, "load_balancer")]
        if viewers_facing else [])


def write_cache_files(sig, prefix):
    """Write the files ``sig``'s cache configs refer to (:func:`cdnaas.vnf.options.cache_files`)
    under ``prefix``, readable by the workers; those of a previous config go."""
    wanted = {prefix / relative: text
              for relative, text in options.cache_files(sig.service).items()}
    for path, text in wanted.items():
        path.parent.mkdir(mode=0o755, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        path.chmod(0o644)
    folder = prefix / responses.PAGES_DIR
    for path in folder.iterdir() if folder.is_dir() else ():
        if path not in wanted:
            path.unlink()


def lb_text(sig, vnf, address, members, prefix, bundle):
    """The balancer ``vnf``'s config for ``sig``, its certificate files (of ``bundle``, or
    none) written first."""
    return balancer_of(sig, vnf, listen_address=address, listen_port=HTTP_PORT,
                       prefix_dir=str(prefix), max_files=processes.open_file_limit(),
                       members=[(name, addr, HTTP_PORT) for name, addr in members],
                       management_sources=management_sources(address), user=VNF_USER,
                       tls=tls_files.write(prefix, bundle, HTTPS_PORT))
