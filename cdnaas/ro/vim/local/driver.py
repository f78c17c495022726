"""The ``local`` VIM driver: a real vCDN on this one Linux machine.

Each region of a deployment is a Linux bridge with its own /24 (RO's address
management: gateway .1, load balancer .2, DNS .3, caches from .10); each VNF is
a network namespace on its region's bridge running the same nginx and dnsmasq
configurations the OpenStack driver boots (``templates/``), with its vCPUs as a
CPU quota of its cgroup, pinned to its planned host's CPUs where the operator maps
hosts to CPU sets of this machine (:func:`.cgroups.host_cpus`). The DNS VNF is
multi-homed (one leg per region) and steers queries by client prefix (nftables) to
one dnsmasq per region, each answering with its region's balancer. Nothing has a
route off the machine: origins must be on this machine (the caches reach it at
their bridge's gateway).

Everything a deployment creates is named after it, so removing it (on failure,
on terminate, or as a stray after a crash) needs no record beyond its id.
"""
import concurrent.futures
import ipaddress
import logging
import os
import shutil
import socket
import time

from cdnaas.common import config
from cdnaas.ro import vnfconfig
from cdnaas.ro.vim.base import (Deployment, DeploymentFailed, EntryPoint, PrerequisitesMissing,
                                VimDriver, VimError, VnfHealth, VnfInstance, VnfMetrics,
                                check_origin_policy, no_progress, run_all)
from cdnaas.ro.vim.local import cgroups, clients, loadgen, netns, network, processes
from cdnaas.ro.vim.local.system import run

LOG = logging.getLogger(__name__)

TOOLS = ("ip", "nginx", "dnsmasq", "nft", "dig", "curl")
HTTP_PORT = 80
DNS_BASE_PORT = 5300
FIRST_CACHE_HOST = 10
VNF_USER = "root"  # the namespace is the VNF's machine; its files live under the state dir


def _pool():
    return config.local_pool()


def _vnf_root(owner, deployment_id):
    return config.state_dir() / "local" / owner / deployment_id


class LocalDriver(VimDriver):
    """Deploys SIGs as namespaces, bridges, cgroups, nginx and dnsmasq on this machine."""

    name = "local"

    def __init__(self):
        self.pool = concurrent.futures.ThreadPoolExecutor(16, thread_name_prefix="local-vim")

    # -- prerequisites -------------------------------------------------------

    def check_prerequisites(self):
        if os.geteuid() != 0:
            raise PrerequisitesMissing("the local driver needs root (network namespaces, "
                                       "bridges, cgroups): run the services as root")
        missing = [tool for tool in TOOLS if shutil.which(tool) is None]
        if missing:
            raise PrerequisitesMissing(f"missing tools: {', '.join(missing)} "
                                       "(scripts/setup installs them)")
        cgroups.check()

    # -- lifecycle -----------------------------------------------------------

    def deploy(self, sig, progress=no_progress):
        self.check_prerequisites()
        owner = network.owner()
        try:
            return self._build(owner, sig, progress)
        except Exception as exc:
            LOG.warning("deployment %s failed, undoing it: %s", sig.vcdn_id, exc)
            self._remove(owner, sig.vcdn_id)
            raise DeploymentFailed(f"{exc}; everything created was removed") from exc

    def _build(self, owner, sig, progress):
        regions = [r.name for r in sig.regions]
        subnets = network.create_bridges(
            [(network.bridge_name(owner, sig.vcdn_id, r), network.bridge_alias(owner, sig.vcdn_id, r))
             for r in regions], _pool())
        layout = {r: {"bridge": network.bridge_name(owner, sig.vcdn_id, r),
                      "subnet": str(subnets[network.bridge_name(owner, sig.vcdn_id, r)])}
                  for r in regions}
        addresses = _assign(sig, layout, {})

        self._boot_caches(owner, sig, sig.vnfs_in(role="cache"), addresses, layout, progress)
        self._boot_balancers(owner, sig, addresses, layout, progress)
        dns_vnfs = sig.vnfs_in(role="dns")
        self._parallel("configure DNS", progress, dns_vnfs,
                       lambda v: self._start_dns(owner, sig, v, layout, addresses))
        self._parallel("verify from each region", progress, sig.regions,
                       lambda r: _verify_region(sig, r, addresses))
        return self._deployment(owner, sig, layout, addresses)

    def update(self, deployment, sig, progress=no_progress):
        owner = deployment.resources["owner"]
        layout = deployment.resources["layout"]
        if set(layout) != {r.name for r in sig.regions}:
            raise DeploymentFailed("the local driver cannot add or remove regions of a live "
                                   "vCDN; deploy a new one")
        old = {v.name: v for v in deployment.vnfs}
        addresses = _assign(sig, layout, {name: v.address for name, v in old.items()})
        added = [v for v in sig.vnfs_in(role="cache") if v.name not in old]
        removed = [v for v in deployment.vnfs if v.role == "cache"
                   and v.name not in {c.name for c in sig.vnfs}]
        touched = sorted({v.region for v in added + removed})
        try:
            self._boot_caches(owner, sig, added, addresses, layout, progress)
            self._parallel("reconfigure load balancers", progress, touched,
                           lambda region: self._reload_lb(owner, sig, region, addresses))
        except Exception as exc:
            for vnf in added:
                self._remove_vnf(owner, sig.vcdn_id, vnf.name)
            self._parallel("restore load balancers", no_progress, touched,
                           lambda region: self._reload_lb(owner, sig, region, addresses,
                                                          members=_members(deployment, region)))
            raise DeploymentFailed(f"{exc}; the previous caches still serve") from exc
        self._parallel("drain and stop caches", progress, removed,
                       lambda v: self._drain_and_stop(owner, sig.vcdn_id, v))
        return self._deployment(owner, sig, layout, addresses)

    def restore(self, deployment, sig, progress=no_progress):
        """See :meth:`VimDriver.restore`: the deployment's VNFs that it does not record
        (namespaces, CPU groups, files) are removed, recorded caches that do not answer
        are booted again at their recorded address, and every balancer is reloaded
        with the recorded caches as members."""
        self.check_prerequisites()
        owner = deployment.resources["owner"]
        layout = deployment.resources["layout"]
        recorded = {v.name: v for v in deployment.vnfs}
        addresses = {v.name: v.address for v in deployment.vnfs}
        strays = sorted(self._vnf_names(owner, deployment.deployment_id) - set(recorded))
        self._parallel("remove VNFs the update added", progress, strays,
                       lambda name: self._remove_vnf(owner, deployment.deployment_id, name))
        gone = [v for v in sig.vnfs_in(role="cache")
                if v.name in recorded and not processes.answers_http(recorded[v.name].address)]
        for vnf in gone:  # whatever is left of them (a namespace, a group) goes first
            self._remove_vnf(owner, deployment.deployment_id, vnf.name)
        self._boot_caches(owner, sig, gone, addresses, layout, progress)
        self._parallel("restore load balancers", progress, sorted(layout),
                       lambda region: self._reload_lb(owner, sig, region, addresses,
                                                      members=_members(deployment, region)))
        return deployment

    def _vnf_names(self, owner, deployment_id):
        """Names of the VNFs of ``deployment_id`` with a namespace, CPU group or files here."""
        names = {parsed[2] for parsed in map(network.parse_namespace, network.list_namespaces())
                 if parsed and parsed[:2] == (owner, deployment_id)}
        group_prefix = f"{owner}_{deployment_id}_"
        names |= {g[len(group_prefix):] for g in cgroups.names() if g.startswith(group_prefix)}
        root = _vnf_root(owner, deployment_id)
        if root.exists():
            names |= {p.name for p in root.iterdir() if p.is_dir()}
        return names

    def terminate(self, deployment, progress=no_progress):
        owner = deployment.resources.get("owner", network.owner())
        total = len(deployment.vnfs) or 1
        progress("remove VNFs", 0, total)
        _injected_delay()
        self._remove(owner, deployment.deployment_id)
        progress("remove VNFs", total, total)

    def health(self, deployment):
        results = []
        for vnf in deployment.vnfs:
            if vnf.role == "dns":
                healthy = bool(processes.resolves(vnf.address, deployment.entry_point.hostname))
                detail = "answers DNS" if healthy else "no DNS answer"
            else:
                healthy = processes.answers_http(vnf.address)
                detail = "answers HTTP" if healthy else "no HTTP answer"
            results.append(VnfHealth(vnf.name, vnf.role, vnf.region, healthy, detail))
        return results

    def metrics(self, deployment):
        """Each nginx VNF's ``stub_status`` from its management listener, which only this
        side reaches (active connections without this reading's own, requests so far;
        probes count as requests) and every VNF's CPU time from its cgroup, read in
        parallel."""
        owner = deployment.resources.get("owner", network.owner())

        def read(vnf):
            status = processes.stub_status(vnf.address) if vnf.role != "dns" else None
            cpu = cgroups.cpu_usage_seconds(_group(owner, deployment.deployment_id, vnf.name))
            return VnfMetrics(name=vnf.name, role=vnf.role, region=vnf.region, host=vnf.host,
                              vcpus=vnf.vcpus, read_at=time.time(),
                              active_connections=max(0, status["active"] - 1) if status else None,
                              requests=status["requests"] if status else None, cpu_seconds=cpu)
        return list(self.pool.map(read, deployment.vnfs))

    def load_test(self, deployment, vnf_name, test):
        """See :meth:`VimDriver.load_test`: wrk or the simulated viewers in a client
        namespace on the VNF's region bridge, off the VNF's CPUs
        (:mod:`cdnaas.ro.vim.local.loadgen`)."""
        vnf = next((v for v in deployment.vnfs if v.name == vnf_name), None)
        if vnf is None:
            raise VimError(f"deployment {deployment.deployment_id} has no VNF {vnf_name}")
        owner = deployment.resources.get("owner", network.owner())
        return loadgen.run(deployment, vnf, _group(owner, deployment.deployment_id, vnf.name),
                           test)

    def cleanup(self, known_ids):
        owner = network.owner()
        strays = set()
        for namespace in network.list_namespaces():
            parsed = network.parse_namespace(namespace)
            if parsed and parsed[0] == owner and parsed[1] not in known_ids:
                strays.add(parsed[1])
        strays |= {dep for _name, own, dep, _region in network.list_bridges()
                   if own == owner and dep not in known_ids}
        strays |= {name.split("_")[1] for name in cgroups.names()
                   if name.startswith(f"{owner}_") and name.split("_")[1] not in known_ids}
        root = config.state_dir() / "local" / owner
        if root.exists():
            strays |= {p.name for p in root.iterdir() if p.name not in known_ids}
        for deployment_id in sorted(strays):
            LOG.info("removing stray local deployment %s", deployment_id)
            self._remove(owner, deployment_id)
        return sorted(strays)

    # -- VNFs ----------------------------------------------------------------

    def _boot_caches(self, owner, sig, caches, addresses, layout, progress):
        """Start ``caches`` in parallel; each answers HTTP before this returns."""
        origin = {r: _origin_address(sig.origin, layout[r]) for r in {c.region for c in caches}}

        def config(vnf, prefix):
            return vnfconfig.cache_config(
                name=vnf.name, workers=vnf.vcpus, listen_address=addresses[vnf.name],
                listen_port=HTTP_PORT, origin=sig.origin, prefix_dir=str(prefix), user=VNF_USER,
                origin_address=origin[vnf.region],
                planned_connections=vnfconfig.planned_connections(sig, vnf),
                max_files=processes.open_file_limit(),
                management_sources=_management_sources(addresses[vnf.name]))
        self._boot_nginx("boot caches", progress, owner, sig.vcdn_id, caches, config,
                         lambda v: [(layout[v.region]["bridge"],
                                     _cidr(addresses[v.name], layout[v.region]), [])],
                         addresses)

    def _boot_balancers(self, owner, sig, addresses, layout, progress):
        """Start each region's balancer with all its caches as members (one config each)."""
        def config(vnf, prefix):
            members = [(c.name, addresses[c.name]) for c in sig.vnfs_in(vnf.region, "cache")]
            return self._lb_text(vnf, addresses[vnf.name], members, prefix,
                                 vnfconfig.planned_connections(sig, vnf))
        self._boot_nginx("configure load balancers", progress, owner, sig.vcdn_id,
                         sig.vnfs_in(role="load_balancer"), config,
                         lambda v: [(layout[v.region]["bridge"],
                                     _cidr(addresses[v.name], layout[v.region]),
                                     sig.region(v.region).client_prefixes + ["default"])],
                         addresses)

    @staticmethod
    def _lb_text(vnf, address, members, prefix, planned):
        return vnfconfig.lb_config(name=vnf.name, workers=vnf.vcpus, listen_address=address,
                                   listen_port=HTTP_PORT, prefix_dir=str(prefix),
                                   planned_connections=planned,
                                   max_files=processes.open_file_limit(),
                                   members=[(name, addr, HTTP_PORT) for name, addr in members],
                                   management_sources=_management_sources(address),
                                   user=VNF_USER)

    def _boot_nginx(self, step, progress, owner, deployment_id, vnfs, config, links, addresses):
        """Plug every VNF's namespace in one ``ip`` run, then in parallel for each:
        configure its links and start nginx in it (nginx checks its config as it
        starts and runs nothing on one it rejects), wait until it answers, and move
        its processes into its CPU group."""
        names = {v.name: network.namespace_name(owner, deployment_id, v.name) for v in vnfs}
        network.create_namespaces([(names[v.name], links(v)) for v in vnfs])

        def start(vnf):
            prefix = self._prefix(owner, deployment_id, vnf.name)
            conf = prefix / "nginx.conf"
            conf.write_text(config(vnf, prefix))
            vnfconfig.prepare_nginx_prefix(str(prefix))
            group = _group(owner, deployment_id, vnf.name)
            cgroups.create(group, vnf.vcpus, cgroups.host_cpus(vnf.host))
            if vnf.host in _injected_failures():  # test hook: this host "fails" to start VNFs
                processes.start_daemon(names[vnf.name], ["false"])
            network.configure_namespace(names[vnf.name], links(vnf))
            processes.start_nginx(names[vnf.name], prefix, str(conf))
            processes.wait_until(lambda: processes.answers_http(addresses[vnf.name]),
                                 f"{vnf.role} {vnf.name}")
            cgroups.adopt(group, processes.pid_in(prefix / "nginx.pid"))
            _injected_delay()
        self._parallel(step, progress, vnfs, start)

    def _reload_lb(self, owner, sig, region, addresses, members=None):
        lb = sig.vnfs_in(region, "load_balancer")[0]
        prefix = self._prefix(owner, sig.vcdn_id, lb.name)
        if members is None:
            members = [(c.name, addresses[c.name]) for c in sig.vnfs_in(region, "cache")]
        text = self._lb_text(lb, addresses[lb.name], members, prefix,
                             vnfconfig.planned_connections(sig, lb))
        namespace = network.namespace_name(owner, sig.vcdn_id, lb.name)
        with netns.entered(namespace):  # nginx -t binds the balancer's address
            vnfconfig.check_nginx(text, str(prefix))
        (prefix / "nginx.conf").write_text(text)
        processes.reload_nginx(namespace, str(prefix), str(prefix / "nginx.conf"))

    def _start_dns(self, owner, sig, vnf, layout, addresses):
        prefix = self._prefix(owner, sig.vcdn_id, vnf.name)
        regions = [r.name for r in sig.regions]
        own = addresses[vnf.name]
        ports = {r: DNS_BASE_PORT + i for i, r in enumerate(regions)}
        configs = {}
        for region in regions:
            lb = sig.vnfs_in(region, "load_balancer")[0]
            text = vnfconfig.dns_config(name=f"{vnf.name}-{region}", hostname=sig.hostname,
                                        answer_address=addresses[lb.name], listen_addresses=own,
                                        port=ports[region], prefix_dir=str(prefix))
            vnfconfig.check_dnsmasq(text)
            configs[region] = prefix / f"dnsmasq-{region}.conf"
            configs[region].write_text(text)
        rules = [(p, ports[r.name]) for r in sig.regions for p in r.client_prefixes]
        ruleset = vnfconfig.steering_rules(table="cdnaas-geo", rules=rules,
                                           default_port=ports[sig.default_region])
        vnfconfig.check_nft(ruleset)
        (prefix / "steering.nft").write_text(ruleset)
        links = []
        for index, region in enumerate(regions):
            routes = sig.region(region).client_prefixes
            if region == sig.default_region:
                routes = routes + ["default"]
            links.append((layout[region]["bridge"], _cidr(own[index], layout[region]), routes))
        namespace = network.namespace_name(owner, sig.vcdn_id, vnf.name)
        network.create_namespace(namespace, links)
        run(["nft", "-f", str(prefix / "steering.nft")], namespace=namespace)
        group = _group(owner, sig.vcdn_id, vnf.name)
        cgroups.create(group, vnf.vcpus, cgroups.host_cpus(vnf.host))
        for region in regions:
            command = ["dnsmasq", f"--conf-file={configs[region]}"]
            if vnf.host in _injected_failures():
                command = ["false"]
            processes.start_daemon(namespace, command)
        for region in regions:
            processes.wait_until(lambda r=region: processes.resolves(
                own[0], sig.hostname, port=ports[r]), f"DNS {vnf.name} for {region}")
            cgroups.adopt(group, processes.pid_in(prefix / f"{vnf.name}-{region}.pid"))

    def _drain_and_stop(self, owner, deployment_id, vnf):
        """Wait (bounded) for the balancer's connections to a removed cache to end, then stop it."""
        timeout = config.setting("CDNAAS_LOCAL_DRAIN_SECONDS")
        try:
            processes.wait_until(lambda: _idle(vnf.address), f"drain of {vnf.name}", timeout)
        except VimError:
            LOG.info("cache %s still had connections after %.0f s; stopping it", vnf.name, timeout)
        self._remove_vnf(owner, deployment_id, vnf.name)

    def _remove_vnf(self, owner, deployment_id, vnf_name):
        cgroups.remove(_group(owner, deployment_id, vnf_name))
        network.delete_namespace(network.namespace_name(owner, deployment_id, vnf_name))
        shutil.rmtree(_vnf_root(owner, deployment_id) / vnf_name, ignore_errors=True)

    def _remove(self, owner, deployment_id):
        """Remove everything named after ``deployment_id``; what is gone is fine."""
        cgroups.remove(*[name for name in cgroups.names()
                         if name.startswith(f"{owner}_{deployment_id}_")])
        network.delete_namespaces([
            namespace for namespace in network.list_namespaces()
            if (network.parse_namespace(namespace) or ())[:2] == (owner, deployment_id)])
        clients.remove_clients(deployment_id)
        network.delete_bridges([bridge for bridge, own, dep, _region in network.list_bridges()
                                if (own, dep) == (owner, deployment_id)])
        shutil.rmtree(_vnf_root(owner, deployment_id), ignore_errors=True)

    # -- helpers -------------------------------------------------------------

    def _prefix(self, owner, deployment_id, vnf_name):
        prefix = _vnf_root(owner, deployment_id) / vnf_name
        prefix.mkdir(parents=True, exist_ok=True)
        return prefix

    def _parallel(self, step, progress, items, action):
        """Run ``action`` over ``items`` in parallel, reporting ``step`` progress; first error wins."""
        run_all(self.pool, action, items, step, progress)

    def _deployment(self, owner, sig, layout, addresses):
        vnfs, dns_servers = [], []
        for vnf in sig.vnfs:
            address = addresses[vnf.name]
            if vnf.role == "dns":
                dns_servers += address
                address = address[0]
            vnfs.append(VnfInstance(name=vnf.name, role=vnf.role, region=vnf.region,
                                    host=vnf.host, address=address, vcpus=vnf.vcpus,
                                    resource_id=network.namespace_name(owner, sig.vcdn_id,
                                                                       vnf.name)))
        endpoints = {r.name: addresses[sig.vnfs_in(r.name, "load_balancer")[0].name]
                     for r in sig.regions}
        return Deployment(deployment_id=sig.vcdn_id, driver=self.name, vnfs=vnfs,
                          entry_point=EntryPoint(hostname=sig.hostname, dns_servers=dns_servers),
                          region_endpoints=endpoints,
                          resources={"owner": owner, "layout": layout})


def _group(owner, deployment_id, vnf_name):
    return f"{owner}_{deployment_id}_{vnf_name}"


def _cidr(address, region_layout):
    return f"{address}/{ipaddress.ip_network(region_layout['subnet']).prefixlen}"


def _assign(sig, layout, kept):
    """Addresses of the SIG's VNFs: kept caches stay, new ones take the lowest free."""
    addresses = {}
    for region, info in layout.items():
        subnet = ipaddress.ip_network(info["subnet"])
        # An address held by any VNF of the deployment stays taken, even if that VNF is
        # being removed: a replacement must not answer while the old one still drains.
        taken = {a for address in kept.values()
                 for a in (address if isinstance(address, list) else [address])}
        free = (str(a) for a in list(subnet.hosts())[FIRST_CACHE_HOST - 1:] if str(a) not in taken)
        for vnf in sig.vnfs_in(region):
            if vnf.role == "load_balancer":
                addresses[vnf.name] = str(subnet.network_address + 2)
            elif vnf.role == "cache":
                addresses[vnf.name] = kept.get(vnf.name) or next(free)
    for vnf in sig.vnfs_in(role="dns"):  # multi-homed: .3 on every region, in SIG order
        addresses[vnf.name] = [str(ipaddress.ip_network(layout[r.name]["subnet"]).network_address + 3)
                               for r in sig.regions]
    return addresses


def _members(deployment, region):
    return [(v.name, v.address) for v in deployment.vnfs if v.region == region and v.role == "cache"]


def _origin_address(origin, region_layout):
    """Where caches reach the origin: this machine's origins at the bridge gateway.

    :raises VimError: the origin is elsewhere (the namespaces have no route out), or it
        now resolves to an address the operator's origin policy refuses.
    """
    host = origin.host
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(host, None, socket.AF_INET)}
    except socket.gaierror as exc:
        raise VimError(f"origin host {host} does not resolve: {exc}") from exc
    check_origin_policy(origin, resolved)
    local = {str(a) for a in _local_addresses()}
    if any(ipaddress.ip_address(a).is_loopback or a in local for a in resolved):
        return str(network.gateway(ipaddress.ip_network(region_layout["subnet"])))
    raise VimError(f"origin {host} is not on this machine; the local driver reaches only "
                   "origins on this machine (listening on all addresses)")


def _local_addresses():
    out = run(["ip", "-o", "-4", "addr", "show"])
    return [ipaddress.ip_interface(line.split()[3]).ip for line in out.splitlines()]


def _injected_failures():
    """Hosts whose VNFs fail to start (CDNAAS_LOCAL_FAIL_HOSTS): the rollback tests' hook."""
    return set(config.setting("CDNAAS_LOCAL_FAIL_HOSTS"))


def _management_sources(address):
    """Who may read the status page of the VNF at ``address``: RO, which reaches it from
    its region bridge's gateway (viewers, balancers and the DNS VNF get 403)."""
    return [str(network.region_gateway(address))]


def _injected_delay():
    """Wait ``CDNAAS_LOCAL_STEP_DELAY`` seconds (default none) after each nginx VNF answers
    and before a removal: the crash tests' hook to kill a service inside a step."""
    delay = config.setting("CDNAAS_LOCAL_STEP_DELAY")
    if delay > 0:
        time.sleep(delay)


def _idle(address):
    status = processes.stub_status(address)  # on the management listener
    return status is None or status["active"] <= 1  # the status request itself


def _verify_region(sig, region, addresses):
    """A client of ``region`` resolves the vCDN to its balancer and fetches through it."""
    lb = addresses[sig.vnfs_in(region.name, "load_balancer")[0].name]
    if not region.client_prefixes:
        return  # no client of this region can exist
    index = [r.name for r in sig.regions].index(region.name)
    dns_server = addresses[sig.vnfs_in(role="dns")[0].name][index]  # its leg in this region
    probe = clients.probe_address(region.client_prefixes[0])
    with clients.client(sig.vcdn_id, region.name, probe) as viewer:
        answer = viewer.resolve(dns_server, sig.hostname)
        if lb not in answer:
            raise VimError(f"a client of {region.name} got {answer or 'no answer'} for "
                           f"{sig.hostname}, not its balancer {lb}")
        status, _headers, _body = viewer.fetch(f"http://{sig.hostname}/",
                                               resolve=(sig.hostname, lb))
        if not 0 < status < 500:
            raise VimError(f"a client of {region.name} could not fetch through the vCDN "
                           f"(HTTP {status or 'no answer'}); is the origin {sig.origin.url} up?")

