"""The local driver's DNS VNF: multi-homed (one leg per region), one dnsmasq per region
each answering with its region's balancer, and nftables steering each region's clients
(by prefix) to its dnsmasq; changed without a query unanswered. Each function works for
one step of a flow (:mod:`.flows`) over its :class:`~.context.LocalContext`."""
import json

from cdnaas.ro.vim import dnsprobe
from cdnaas.ro.vim.local import cgroups, network, processes
from cdnaas.ro.vim.local.addressing import add_legs, leg, legs_of, stale_legs
from cdnaas.ro.vim.local.removal import remove_vnf
from cdnaas.ro.vim.local.system import ip_batch, run
from cdnaas.vnf import tools
from cdnaas.vnf.balancer import served_names
from cdnaas.vnf.geodns import dns_of, steering_of

DNS_BASE_PORT = 5300  # to 5399: each region's dnsmasq on the DNS VNF (:func:`dns_ports`)
SPARE_DNS_PORT = 5400  # + (port - 5300): a region's spare dnsmasq while its own restarts
DNS_PORTS = 100


def start_dns(ctx, vnf):
    """Start the DNS VNF ``vnf`` afresh: its namespace with a leg on every region's bridge,
    its steering, and each region's dnsmasq, each answering before this returns."""
    sig, addresses = ctx.sig, ctx.addresses
    prefix = ctx.prefix(vnf.name)
    regions = [r.name for r in sig.regions]
    own = addresses[vnf.name]
    ports = dns_ports(prefix, sig)
    configs = {}
    for region, (path, text) in dns_configs(sig, vnf, prefix, addresses, ports,
                                            check=False).items():
        path.write_text(text)
        configs[region] = path
    links = legs_of(sig, ctx.layout, own, lambda r: r.client_prefixes
                    + (["default"] if r.name == sig.default_region else []))
    namespace = ctx.namespace(vnf.name)
    network.create_namespace(namespace, links)
    steer(namespace, prefix, sig, ports)
    group = ctx.group(vnf.name)
    cgroups.create(group, vnf.vcpus, cgroups.host_cpus(vnf.host))
    for region in regions:
        processes.start_daemon(namespace, ["dnsmasq", f"--conf-file={configs[region]}"])
    for region in regions:
        processes.wait_until(lambda r=region: dnsprobe.resolves(
            own[0], sig.hostname, port=ports[r]), f"DNS {vnf.name} for {region}")
        cgroups.adopt(group, processes.pid_in(prefix / f"{vnf.name}-{region}.pid"))


def reshape_dns(ctx, vnf):
    """Bring the DNS VNF to ``ctx.sig``'s regions in place: a leg on each new region's
    bridge, each region's dnsmasq started or restarted where its config changed (each
    listens on every leg) and those of removed regions stopped, the steering and the
    default route replaced, the removed regions' legs deleted, its CPU group
    moved to its host. No query goes unanswered (:func:`restart_dns`). Gone
    altogether (a crash), it is built afresh."""
    sig = ctx.sig
    namespace = ctx.namespace(vnf.name)
    if namespace not in network.list_namespaces():
        remove_vnf(ctx.owner, ctx.deployment_id, vnf.name)
        start_dns(ctx, vnf)
        return
    own = ctx.addresses[vnf.name]
    legs = add_legs(namespace, legs_of(sig, ctx.layout, own, lambda r: r.client_prefixes))
    restart_dns(ctx, vnf)
    default = legs[leg(sig, own, sig.default_region)]
    ip_batch([f"route replace default dev {default}"] + stale_legs(legs, own),
             namespace=namespace)
    cgroups.create(ctx.group(vnf.name), vnf.vcpus, cgroups.host_cpus(vnf.host))


def restart_dns(ctx, vnf):
    """Give the DNS VNF's dnsmasq processes ``ctx.sig``'s config (names, regions, listen
    addresses) without a moment unanswered: dnsmasq reads its config only as it
    starts, so each whose config changed (or that does not answer) is first doubled
    by a spare on another port, the steering sent to the spares, the old ones (and
    those of regions the SIG lacks) stopped and started on their new config, the
    steering sent back, and the spares stopped. Unchanged ones are left."""
    sig, addresses = ctx.sig, ctx.addresses
    prefix = ctx.prefix(vnf.name)
    namespace = ctx.namespace(vnf.name)
    group = ctx.group(vnf.name)

    def start(path, region, port, suffix=""):
        processes.start_daemon(namespace, ["dnsmasq", f"--conf-file={path}"])
        processes.wait_until(lambda: dnsprobe.resolves(
            addresses[vnf.name][0], served_names(sig)[-1], port=port),
            f"DNS {vnf.name} for {region}")
        cgroups.adopt(group, processes.pid_in(prefix / f"{vnf.name}-{region}{suffix}.pid"))

    def stop(name):
        pid_file = prefix / f"{name}.pid"
        if pid_file.exists():  # a region new to the DNS VNF has none yet
            pid = processes.pid_in(pid_file)
            if processes.program(pid) == "dnsmasq":  # not a killed one's reused id
                processes.stop(pid)
            pid_file.unlink(missing_ok=True)  # dnsmasq removes it as it exits

    ports = dns_ports(prefix, sig)
    spare_ports = {r: SPARE_DNS_PORT + p - DNS_BASE_PORT for r, p in ports.items()}
    configs = dns_configs(sig, vnf, prefix, addresses, ports)
    changed = [r for r, (path, text) in configs.items()
               if not (path.exists() and path.read_text() == text and dnsprobe.resolves(
                   addresses[vnf.name][0], served_names(sig)[-1], port=ports[r]))]
    # a spare differs from its region's config (checked) only by its name and port
    spares = dns_configs(sig, vnf, prefix, addresses, spare_ports, "-spare", check=False)
    for region in changed:
        path, text = spares[region]
        stop(f"{vnf.name}-{region}-spare")  # one an interrupted change left
        path.write_text(text)
        start(path, region, spare_ports[region], "-spare")
    steer(namespace, prefix, sig, ports | {r: spare_ports[r] for r in changed})
    for stale in prefix.glob("dnsmasq-*.conf"):  # regions the DNS VNF no longer serves
        region = stale.name[len("dnsmasq-"):-len(".conf")]
        if region not in ports and not region.endswith("-spare"):
            stop(f"{vnf.name}-{region}")
            stale.unlink()
    for region in changed:
        path, text = configs[region]
        stop(f"{vnf.name}-{region}")
        path.write_text(text)
        start(path, region, ports[region])
    steer(namespace, prefix, sig, ports)
    for region in changed:
        stop(f"{vnf.name}-{region}-spare")
        spares[region][0].unlink()


def dns_configs(sig, vnf, prefix, addresses, ports, suffix="", check=True):
    """``{region: (config path, text)}`` of the DNS VNF's dnsmasq of each region, each
    answering every name of the vCDN with its region's balancer, on its port of
    ``ports`` (``suffix`` names a spare: :func:`restart_dns`); with ``check``, each
    checked by ``dnsmasq --test`` (before a running one is replaced; a dnsmasq that
    starts checks its config itself and runs nothing on one it rejects)."""
    configs = {}
    for region in (r.name for r in sig.regions):
        lb = sig.vnfs_in(region, "load_balancer")[0]
        text = dns_of(sig, vnf, region, name_suffix=suffix, answer_address=addresses[lb.name],
                      listen_addresses=addresses[vnf.name], port=ports[region],
                      prefix_dir=str(prefix))
        if check:
            tools.check_dnsmasq(text)
        configs[region] = (prefix / f"dnsmasq-{region}{suffix}.conf", text)
    return configs


def steer(namespace, prefix, sig, ports):
    """Load the DNS VNF's steering for ``sig``: each region's clients to its port of
    ``ports`` (``nft -f`` loads a ruleset whole or not at all, so it needs no check
    first)."""
    ruleset = steering_of(sig, ports)
    (prefix / "steering.nft").write_text(ruleset)
    run(["nft", "-f", str(prefix / "steering.nft")], namespace=namespace)


def dns_ports(prefix, sig):
    """``{region: port}``: the port of each region's dnsmasq on the DNS VNF under
    ``prefix``. A region keeps the port it has (``dns-ports.json``) while it stays; a new
    one takes the next port after the last one given (round the :data:`DNS_PORTS` ports),
    so that a port does not go to another region while the kernel may still send it a
    client's earlier query flow (NAT of a UDP flow holds 30 s after its last packet): a
    client would get another region's balancer."""
    path = prefix / "dns-ports.json"
    known = json.loads(path.read_text()) if path.exists() else {"ports": {}, "next": 0}
    ports = {r.name: known["ports"][r.name] for r in sig.regions if r.name in known["ports"]}
    offset = known["next"]
    for region in (r.name for r in sig.regions if r.name not in ports):
        while DNS_BASE_PORT + offset % DNS_PORTS in ports.values():
            offset += 1
        ports[region] = DNS_BASE_PORT + offset % DNS_PORTS
        offset += 1
    path.write_text(json.dumps({"ports": ports, "next": offset % DNS_PORTS}))
    return ports
