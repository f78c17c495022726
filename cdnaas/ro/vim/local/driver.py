"""The ``local`` VIM driver: a real vCDN on this one Linux machine.

Each region of a deployment is a Linux bridge with its own /24 (RO's address
management: gateway .1, load balancer .2, DNS .3, origin shield .4, caches from
.10); each VNF is
a network namespace on its region's bridge running the same nginx and dnsmasq
configurations the OpenStack driver boots (``templates/``), with its vCPUs as a
CPU quota of its cgroup, pinned to its planned host's CPUs where the operator maps
hosts to CPU sets of this machine (:func:`.cgroups.host_cpus`). The DNS VNF is
multi-homed (one leg per region) and steers queries by client prefix (nftables) to
one dnsmasq per region, each answering with its region's balancer; an origin shield,
where the flavor has one, is multi-homed too, and each region's caches fetch from its
leg in their region. Nothing has a
route off the machine: origins must be on this machine (the caches reach it at
their bridge's gateway).

Everything a deployment creates is named after it, so removing it (on failure,
on terminate, or as a stray after a crash) needs no record beyond its id.
"""
import concurrent.futures
import dataclasses
import functools
import ipaddress
import json
import logging
import os
import shutil
import socket
import threading
import time

from cdnaas.common import config
from cdnaas.common.sig import Origin
from cdnaas.delivery import access, logstreams, origins, responses
from cdnaas.ro import purge, vnfconfig
from cdnaas.ro.vim import dnsprobe, hosts, logfiles, management
from cdnaas.ro.vim.base import (Deployment, DeploymentFailed, EntryPoint,
                                PrerequisitesMissing, VimDriver, VimError, VnfHealth,
                                VnfInstance, VnfMetrics, check_origin_policy, no_progress,
                                run_all, served_names)
from cdnaas.ro.vim.changes import caches_reconfigured, sig_change
from cdnaas.ro.vim.local import (cgroups, clients, loadgen, logshipping, netns,
                                 network, processes, tls_files, vnfhealth)
from cdnaas.ro.vim.local.system import ip_batch, run

LOG = logging.getLogger(__name__)

TOOLS = ("ip", "nginx", "dnsmasq", "nft")
HTTP_PORT = 80
HTTPS_PORT = 443
DNS_BASE_PORT = 5300  # to 5399: each region's dnsmasq on the DNS VNF (:func:`_dns_ports`)
SPARE_DNS_PORT = 5400  # + (port - 5300): a region's spare dnsmasq while its own restarts
DNS_PORTS = 100
#: how long a new deployment's check from each region may keep asking its DNS for an answer
VERIFY_SECONDS = 15.0
VNF_USER = "root"  # the namespace is the VNF's machine; its files live under the state dir
LOCAL_ADDRESSES_SECONDS = 1.0  # how long :func:`_local_addresses` keeps what it read
_LOCAL_ADDRESSES = [float("-inf"), []]
_LOCAL_ADDRESSES_LOCK = threading.Lock()


def _pool():
    return config.local_pool()


def _vnf_root(owner, deployment_id):
    return config.state_dir() / "local" / owner / deployment_id


class LocalDriver(VimDriver):
    """Deploys SIGs as namespaces, bridges, cgroups, nginx and dnsmasq on this machine."""

    name = "local"

    def __init__(self):
        self.pool = concurrent.futures.ThreadPoolExecutor(16, thread_name_prefix="local-vim")
        self._rotating = threading.Lock()  # one log rotation at a time

    # -- prerequisites -------------------------------------------------------

    def check_prerequisites(self):
        if os.geteuid() != 0:
            raise PrerequisitesMissing("the local driver needs root (network namespaces, "
                                       "bridges, cgroups): run the services as root")
        missing = [tool for tool in TOOLS if shutil.which(tool) is None]
        if missing:
            raise PrerequisitesMissing(f"missing tools: {', '.join(missing)} "
                                       "(scripts/setup installs them)")
        if not os.path.exists(vnfconfig.PURGE_MODULE):
            raise PrerequisitesMissing(f"missing nginx's purge module {vnfconfig.PURGE_MODULE} "
                                       "(package libnginx-mod-http-cache-purge; scripts/setup "
                                       "installs it)")
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
        """Bridges first; then at once, each step in parallel over its VNFs: the origin
        shield, the caches, the balancers and the DNS VNF started (none needs another to
        start: caches and balancers name their upstreams by address), and each region's
        viewer plugged in; then a check from each region (:func:`_verify_region`)."""
        layout = self._add_regions(owner, sig.vcdn_id, [r.name for r in sig.regions])
        addresses = _assign(sig, layout, {})
        viewers = {}
        steps = [
            lambda: self._boot_caches(owner, sig, sig.vnfs_in(role="shield"), addresses,
                                      layout, progress, "boot origin shield"),
            lambda: self._boot_caches(owner, sig, sig.vnfs_in(role="cache"), addresses,
                                      layout, progress),
            lambda: self._boot_balancers(owner, sig, addresses, layout, progress),
            lambda: self._parallel("configure DNS", progress, sig.vnfs_in(role="dns"),
                                   lambda v: self._start_dns(owner, sig, v, layout, addresses)),
            lambda: viewers.update(_viewers(sig, layout))]
        with concurrent.futures.ThreadPoolExecutor(len(steps)) as steps_pool:
            run_all(steps_pool, lambda step: step(), steps)
        self._parallel("verify from each region", progress, sig.regions,
                       lambda r: _verify_region(sig, r, addresses, viewers.get(r.name)))
        # nothing waits for the viewers to go (a failure above removes them with the rest)
        self.pool.submit(clients.remove, list(viewers.values()))
        return self._deployment(owner, sig, layout, addresses)

    def update(self, deployment, sig, progress=no_progress, previous=None):
        """See :meth:`VimDriver.update`. What changes is worked out first
        (:func:`~cdnaas.ro.vim.changes.sig_change`), then applied in order: bridges of new
        regions; the origin shield, when regions come or go or it moves, given a leg in
        each new region and reloaded to listen on it (:meth:`_reshape_shield`: a shield
        whose region goes moves to the one ``sig`` puts it in), so that caches of new
        regions find it; new caches and new regions' balancers; kept caches reconfigured,
        one at a time, when the origin or the cache rules change (what they cached stays:
        a new origin is taken to serve the same content, a purge empties them); balancers
        of regions whose caches or service changed reloaded; the DNS VNF built again when
        regions come or go or it moves (:meth:`_reshape_dns`, in place, then every region
        checked from a client), else its dnsmasq restarted where the names changed. A
        failure puts everything back (:meth:`restore` to ``deployment``).
        Last, removed caches drain and stop, removed regions drain, lose their VNFs and
        their bridge, and then the shield stops listening on its legs there (which their
        caches fetched from as they drained) and loses them."""
        owner = deployment.resources["owner"]
        change = sig_change(deployment, sig)
        if previous is None:
            if change.regions_changed:
                raise DeploymentFailed("the local driver changes the regions of a vCDN only "
                                       "knowing the SIG it serves (RO passes it)")
            # what the balancers and DNS serve now: hostnames and certificate
            previous = dataclasses.replace(sig, service=deployment.resources.get("service", {}))
        old_layout = deployment.resources["layout"]
        kept_regions = [r.name for r in sig.regions if r.name in old_layout]
        touched = sorted({v.region for v in change.new_in("cache") + change.gone
                          if v.role == "cache"} & set(kept_regions))
        if previous.service != sig.service:  # a rotation reloads every balancer, gracefully
            touched = kept_regions
        shields = change.kept_in("shield") \
            if change.regions_changed or any(v.role == "shield" for v in change.moved) else []
        # the shield first: a cache reloaded before it would fetch from its old config (a
        # reshaped shield has its new one already)
        reconfigured = [v for v in change.kept_in("shield") if v not in shields] \
            + change.kept_in("cache") if caches_reconfigured(previous, sig) else []
        reshaped = change.regions_changed or any(v.role == "dns" for v in change.moved)
        restarted = [] if reshaped or served_names(previous) == served_names(sig) \
            else sig.vnfs_in(role="dns")
        try:
            layout = {**old_layout, **self._add_regions(owner, sig.vcdn_id, change.added_regions)}
            layout = {r.name: layout[r.name] for r in sig.regions}
            addresses = _assign(sig, layout, {v.name: v.address for v in deployment.vnfs})
            self._parallel("reshape origin shield", progress, shields,
                           lambda v: self._reshape_shield(owner, sig, v, layout, addresses,
                                                          draining=True))
            self._boot_caches(owner, sig, change.new_in("cache"), addresses, layout, progress)
            self._boot_balancers(owner, sig, addresses, layout, progress,
                                 change.new_in("load_balancer"))
            self._roll_caches(owner, sig, reconfigured, addresses, layout, progress)
            bundle = self.tls_bundle(sig) if touched else None
            # new cache rules change the key the balancers hash on, a new HTTPS policy or
            # certificate what plain HTTP and TLS get: once the update is done, no new
            # connection may reach an old worker still accepting on the old config
            settle = any(previous.service.get(key) != sig.service.get(key)
                         for key in ("cache_rules", "https_policy", "tls"))
            self._parallel("reconfigure load balancers", progress, touched,
                           lambda region: self._reload_lb(owner, sig, region, addresses, layout,
                                                          bundle, settle=settle))
            self._parallel("reconfigure DNS", progress, restarted,
                           lambda v: self._restart_dns(owner, sig, v, addresses))
            if reshaped:
                self._parallel("reshape DNS", progress, sig.vnfs_in(role="dns"),
                               lambda v: self._reshape_dns(owner, sig, v, layout, addresses))
                viewers = _viewers(sig, layout)
                try:
                    self._parallel("verify from each region", progress, sig.regions,
                                   lambda r: _verify_region(sig, r, addresses,
                                                            viewers.get(r.name)))
                finally:
                    clients.remove(viewers.values())
        except Exception as exc:
            LOG.warning("update of %s failed, putting the deployment back: %s", sig.vcdn_id, exc)
            self.restore(deployment, previous)
            raise DeploymentFailed(f"{exc}; the previous deployment still serves") from exc
        self._parallel("drain and stop caches", progress,
                       [v for v in change.gone if v.role == "cache" and v.region in layout],
                       lambda v: self._drain_and_stop(owner, sig.vcdn_id, v.name))
        self._parallel("remove regions", progress, change.removed_regions,
                       lambda region: self._remove_region(
                           owner, deployment.deployment_id, region,
                           [v for v in change.gone if v.region == region]))
        self._parallel("remove origin shield legs", progress,
                       shields if change.removed_regions else [],
                       lambda v: self._reshape_shield(owner, sig, v, layout, addresses))
        return self._deployment(owner, sig, layout, addresses)

    def _add_regions(self, owner, deployment_id, regions):
        """A bridge for each of ``regions``, on a free /24: ``{region: {bridge, subnet}}``."""
        names = {r: network.bridge_name(owner, deployment_id, r) for r in regions}
        subnets = network.create_bridges(
            [(names[r], network.bridge_alias(owner, deployment_id, r)) for r in regions], _pool())
        return {r: {"bridge": names[r], "subnet": str(subnets[names[r]])} for r in regions}

    def _roll_caches(self, owner, sig, vnfs, addresses, layout, progress, mended=()):
        """A rolling reload of ``vnfs`` (caches, origin shields) onto their config for
        ``sig`` that loses no viewer request, those named in ``mended`` even where that
        config is written already (:meth:`_reload_cache`); every cache reload of the driver
        goes through here. The shields first, one at a time (the caches fetch from them),
        then each region's caches one at a time, the regions side by side; a refused config
        stops the roll.

        Why one at a time, apart: a cache's graceful reload closes the kept-alive
        connections its old workers hold, and a balancer that sends a request on one at
        that instant gets a reset. It sends the request again to the next member at once
        (an error on a cached connection costs no try), but counts a failure of the cache,
        which leaves its rotation for :data:`.vnfconfig.MEMBER_FAIL_SECONDS`
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
        progress("reconfigure caches", 0, len(vnfs))

        def roll(members):
            rejoins_at = [float("-inf")]  # when the balancer may pick the one reloaded before
            for vnf in members:
                if self._reload_cache(owner, sig, vnf, addresses, layout,
                                      mend=vnf.name in mended, pause=lambda: time.sleep(
                                          max(0.0, rejoins_at[0] - time.monotonic()))):
                    rejoins_at[0] = time.monotonic() + vnfconfig.MEMBER_FAIL_SECONDS + 1
                with lock:
                    done[0] += 1
                    progress("reconfigure caches", done[0], len(vnfs))
        roll([v for v in vnfs if v.role == "shield"])
        regions = {}
        for vnf in vnfs:
            if vnf.role == "cache":
                regions.setdefault(vnf.region, []).append(vnf)
        run_all(self.pool, roll, regions.values())

    def _remove_region(self, owner, deployment_id, region, vnfs):
        """Drain the region's balancer (bounded, as a cache), then remove ``vnfs`` (its
        VNFs that go: not the DNS or the shield, which move) and its bridge. The DNS no
        longer answers its clients by then."""
        for vnf in sorted(vnfs, key=lambda v: v.role != "load_balancer"):  # balancer first
            self._drain_and_stop(owner, deployment_id, vnf.name)
        network.delete_bridges([network.bridge_name(owner, deployment_id, region)])

    def restore(self, deployment, sig, progress=no_progress):
        """See :meth:`VimDriver.restore`: the deployment's VNFs that it does not record
        (namespaces, CPU groups, files) and bridges of regions it does not record are
        removed, recorded bridges that are gone come back on their subnet, recorded VNFs
        that are not whole (:mod:`.vnfhealth`: a process tree broken, such as workers
        orphaned by a killed master, another configuration than the one written, or no
        answer) are mended or built again, every cache gets its config for ``sig`` again,
        every balancer whose config for the recorded caches differs is reloaded, and the
        origin shield and the DNS VNF are given ``sig``'s regions again
        (:meth:`_reshape_shield`, :meth:`_reshape_dns`): their legs in others deleted, the
        shield managed at its leg in its region again. The restore of a deployment that
        runs as recorded changes nothing: RO calls it to repair one (an update to the SIG
        it already serves).

        No viewer request is lost to it where what serves is kept serving until what
        replaces it does: an nginx VNF that is not whole but answers (a cache may be its
        balancer's only member, a balancer is its viewers' entry point) is mended where it
        runs, reloaded on its config even if that is the one written
        (:func:`.processes.reload_nginx`: a new master beside the workers of a killed one),
        caches one at a time as in any roll; only one that does not answer is removed and
        built again at its recorded address. A VNF the update added that serves at an
        address the record does not hold (a cache that replaced one, which its balancer
        may name alone) drains and goes only once the balancers have their recorded
        members again; the others (holding a recorded address, after a restore of the
        databases) go first."""
        self.check_prerequisites()
        owner = deployment.resources["owner"]
        deployment_id = deployment.deployment_id
        layout = deployment.resources["layout"]
        recorded = {v.name: v for v in deployment.vnfs}
        addresses = {v.name: v.address for v in deployment.vnfs}
        serving = self._serving_strays(owner, deployment)
        strays = sorted(self._vnf_names(owner, deployment_id) - set(recorded) - set(serving))
        self._parallel("remove VNFs the update added", progress, strays,
                       lambda name: self._remove_vnf(owner, deployment_id, name))
        self._restore_bridges(owner, deployment_id, layout)
        kept = [v for v in sig.vnfs if v.name in recorded]
        broken = [(v, found) for v, found in zip(kept, self.pool.map(
            lambda v: self._finding(owner, deployment, recorded[v.name]), kept))
            if not found.healthy]
        mended = set()  # nginx VNFs that answer: mended where they run
        for vnf, found in broken:
            if vnf.role != "dns" and not found.silent:
                LOG.info("mending %s %s of %s where it runs: %s", vnf.role, vnf.name,
                         deployment_id, found.detail)
                mended.add(vnf.name)
        gone = [v for v, _found in broken if v.name not in mended]
        for vnf in gone:  # whatever is left of them (namespace, group, orphans) goes first
            LOG.info("rebuilding %s %s of %s", vnf.role, vnf.name, deployment_id)
            self._remove_vnf(owner, deployment_id, vnf.name)
        listening = _assign(sig, layout, addresses)  # DNS and shield: an address per region
        for role in ("shield", "cache"):
            self._boot_caches(owner, sig, [v for v in gone if v.role == role], listening,
                              layout, progress)
        self._boot_balancers(owner, sig, listening, layout, progress,
                             [v for v in gone if v.role == "load_balancer"])
        running = {role: [v for v in sig.vnfs_in(role=role) if v.name in recorded
                          and v not in gone] for role in ("shield", "cache")}
        self._parallel("restore origin shield", progress, running["shield"],  # before caches
                       lambda v: self._reshape_shield(owner, sig, v, layout, listening,
                                                      mend=v.name in mended))
        self._roll_caches(owner, sig, running["cache"], listening, layout, progress, mended)
        bundle = self.tls_bundle(sig)
        self._parallel("restore load balancers", progress, sorted(layout),
                       lambda region: self._reload_lb(
                           owner, sig, region, addresses, layout, bundle,
                           members=_members(deployment, region),
                           mend=sig.vnfs_in(region, "load_balancer")[0].name in mended))
        self._parallel("restore DNS", progress, sig.vnfs_in(role="dns"),
                       lambda v: self._reshape_dns(owner, sig, v, layout, listening))
        self._parallel("drain and stop VNFs the update added", progress, serving,
                       lambda name: self._drain_and_stop(owner, deployment_id, name))
        return deployment

    def _serving_strays(self, owner, deployment):
        """Names of the VNFs of ``deployment`` it does not record that serve at an address
        of a region it records, which none of its VNFs holds."""
        recorded = {v.name for v in deployment.vnfs}
        held = {a for v in deployment.vnfs for a in [v.address, *v.addresses]}
        subnets = [ipaddress.ip_network(info["subnet"])
                   for info in deployment.resources["layout"].values()]
        found = []
        for namespace in network.list_namespaces():
            parsed = network.parse_namespace(namespace)
            if not parsed or parsed[:2] != (owner, deployment.deployment_id) \
                    or parsed[2] in recorded:
                continue
            legs = list(network.links_of(namespace))
            if len(legs) == 1 and legs[0] not in held \
                    and any(ipaddress.ip_address(legs[0]) in subnet for subnet in subnets):
                found.append(parsed[2])
        return sorted(found)

    def _finding(self, owner, deployment, vnf):
        """What :mod:`.vnfhealth` finds of the recorded VNF ``vnf``: an nginx VNF asked at
        its recorded address, or the shield at any of its legs (an update that failed may
        have moved it to another region's); one without its own namespace does not answer
        (after a restore of the databases, another deployment's VNF may hold its address)."""
        deployment_id = deployment.deployment_id
        prefix = _vnf_root(owner, deployment_id) / vnf.name
        group = _group(owner, deployment_id, vnf.name)
        if vnf.role == "dns":
            return vnfhealth.dns(prefix, group, vnf.address, deployment.entry_point.hostname)
        namespace = network.namespace_name(owner, deployment_id, vnf.name)
        addresses = []
        if namespace in network.list_namespaces():
            addresses = list(network.links_of(namespace)) if vnf.role == "shield" \
                else [vnf.address]
        return vnfhealth.nginx(prefix, group, addresses)

    def _restore_bridges(self, owner, deployment_id, layout):
        """This deployment's bridges become exactly those of ``layout``'s regions: others go,
        missing ones come back on their recorded subnet."""
        present = {region: name for name, own, dep, region in network.list_bridges()
                   if (own, dep) == (owner, deployment_id)}
        network.delete_bridges([name for region, name in present.items() if region not in layout])
        missing = [r for r in layout if r not in present]
        if missing:
            network.create_bridges(
                [(layout[r]["bridge"], network.bridge_alias(owner, deployment_id, r))
                 for r in missing], _pool(),
                subnets={layout[r]["bridge"]: layout[r]["subnet"] for r in missing})

    def vnf_names(self, deployment):
        return self._vnf_names(deployment.resources.get("owner", network.owner()),
                               deployment.deployment_id)

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
        """See :meth:`VimDriver.health`: each VNF's process tree, the generation of the
        configuration it runs and its answer (:mod:`.vnfhealth`), looked at in parallel."""
        owner = deployment.resources.get("owner", network.owner())

        def check(vnf):
            found = self._finding(owner, deployment, vnf)
            return VnfHealth(vnf.name, vnf.role, vnf.region, found.healthy, found.detail,
                             lasting=bool(found.lasting))
        return list(self.pool.map(check, deployment.vnfs))

    def metrics(self, deployment):
        """Each nginx VNF's connections on its HTTP and HTTPS ports as the kernel counts
        them in its namespace (:func:`.netns.established`: nginx's ``stub_status`` keeps a
        killed worker's connections for good), its requests so far from ``stub_status``
        on its management listener, which only this side reaches (probes count as
        requests), and every VNF's CPU time from its cgroup, read in parallel."""
        owner = deployment.resources.get("owner", network.owner())

        def read(vnf):
            status = connections = None
            if vnf.role != "dns":
                status = management.stub_status(vnf.address)
                connections = _connections(
                    network.namespace_name(owner, deployment.deployment_id, vnf.name))
            cpu = cgroups.cpu_usage_seconds(_group(owner, deployment.deployment_id, vnf.name))
            return VnfMetrics(name=vnf.name, role=vnf.role, region=vnf.region, host=vnf.host,
                              vcpus=vnf.vcpus, read_at=time.time(),
                              active_connections=connections,
                              requests=status["requests"] if status else None, cpu_seconds=cpu)
        return list(self.pool.map(read, deployment.vnfs))

    def read_logs(self, deployment, positions, max_bytes=logfiles.READ_BYTES, release=False):
        """See :meth:`VimDriver.read_logs`: each balancer's log from its management
        listener (:mod:`cdnaas.ro.vim.logfiles`), in parallel. With ``release``, a log
        whose reader stands in its current file, past ``CDNAAS_LOCAL_LOG_ROTATE_MB``, is
        rotated afterwards: renamed ``access.log.1`` (replacing the one before, already
        read) and reopened by nginx (``nginx -s reopen``); lines nginx writes until its
        workers reopen land in ``access.log.1`` after the reader's position, read next."""
        owner = deployment.resources.get("owner", network.owner())
        limit = config.setting("CDNAAS_LOCAL_LOG_ROTATE_MB") * (1 << 20)

        def read(vnf):
            chunk, found = logfiles.read_chunk(vnf, positions.get(vnf.name), max_bytes)
            if release and found.in_current and not found.more and found.current_size > limit:
                self._rotate_log(owner, deployment.deployment_id, vnf.name)
            return chunk
        return list(self.pool.map(read, [v for v in deployment.vnfs
                                         if v.role == self.logging_role]))

    def log_stream_status(self, deployment):
        """See :meth:`VimDriver.log_stream_status`: each balancer's shipper, through its
        management listener."""
        return logfiles.stream_statuses(self.pool, deployment, self.logging_role)

    def invalidate(self, deployment, paths, prefixes, progress=no_progress):
        """See :meth:`VimDriver.invalidate`: on each cache's management listener, which
        only this side reaches (:mod:`cdnaas.ro.purge`)."""
        return purge.invalidate_caches(self.pool, deployment, paths, prefixes, progress)

    def prefetch(self, deployment, paths, progress=no_progress):
        """See :meth:`VimDriver.prefetch`: through each cache's management listener
        (:mod:`cdnaas.ro.purge`)."""
        return purge.prefetch_caches(self.pool, deployment, paths, progress)

    def _rotate_log(self, owner, deployment_id, vnf_name):
        prefix = _vnf_root(owner, deployment_id) / vnf_name
        logs = prefix / "logs"
        with self._rotating:
            os.replace(logs / "access.log", logs / "access.log.1")
            run(processes.nginx_command(str(prefix), str(prefix / "nginx.conf"), "-s", "reopen"),
                namespace=network.namespace_name(owner, deployment_id, vnf_name))
        LOG.info("rotated the usage log of %s/%s", deployment_id, vnf_name)

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

    def _boot_caches(self, owner, sig, caches, addresses, layout, progress,
                     step="boot caches"):
        """Start ``caches`` (or the origin shield) in parallel; each answers HTTP before
        this returns. A shield has a leg on every region's bridge, where that region's
        caches reach it."""
        # every cache of a region reaches the origins at the same address: resolved and
        # checked against the origin policy once per region, not once per cache
        reach = functools.cache(lambda origin, region: _origin_address(origin, layout[region]))

        def config(vnf, prefix):
            _write_cache_files(sig, prefix)
            return _cache_text(sig, vnf, addresses, layout, prefix, reach)

        def legs(vnf):
            if vnf.role == "shield":
                return _legs(sig, layout, addresses[vnf.name])
            return [(layout[vnf.region]["bridge"], _cidr(addresses[vnf.name],
                                                         layout[vnf.region]), [])]
        managed = {v.name: _managed_address(sig, v, addresses) for v in caches}
        self._boot_nginx(step, progress, owner, sig.vcdn_id, caches, config, legs, managed)

    def _boot_balancers(self, owner, sig, addresses, layout, progress, balancers=None):
        """Start each region's balancer (or only ``balancers``) with all its region's caches
        as members (one config each)."""
        if balancers is None:
            balancers = sig.vnfs_in(role="load_balancer")
        bundle = self.tls_bundle(sig) if balancers else None  # read once for them all

        def config(vnf, prefix):
            members = [(c.name, addresses[c.name]) for c in sig.vnfs_in(vnf.region, "cache")]
            return _lb_text(sig, vnf, addresses[vnf.name], members, prefix, bundle)
        self._boot_nginx("configure load balancers", progress, owner, sig.vcdn_id,
                         balancers, config,
                         lambda v: [(layout[v.region]["bridge"],
                                     _cidr(addresses[v.name], layout[v.region]),
                                     sig.region(v.region).client_prefixes + ["default"])],
                         addresses,
                         started=lambda v: self._ship_logs(owner, sig, v, layout, addresses))

    def _boot_nginx(self, step, progress, owner, deployment_id, vnfs, config, links, addresses,
                    started=lambda vnf: None):
        """Plug every VNF's namespace in one ``ip`` run, then in parallel for each:
        configure its links and start nginx in it (nginx checks its config as it
        starts and runs nothing on one it rejects), wait until it answers, move
        its processes into its CPU group, then call ``started(vnf)``."""
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
            processes.wait_until(lambda: management.answers_http(addresses[vnf.name]),
                                 f"{vnf.role} {vnf.name}")
            cgroups.adopt(group, processes.pid_in(prefix / "nginx.pid"))
            started(vnf)
            _injected_delay()
        self._parallel(step, progress, vnfs, start)

    def _reload_lb(self, owner, sig, region, addresses, layout, bundle, members=None,
                   settle=False, mend=False):
        """Reload ``region``'s balancer on its config for ``sig`` (``bundle``: its
        :meth:`tls_bundle`), with ``members`` or the region's caches, unless it was written
        already and it is not to ``mend`` (a balancer that does not run what was written is
        not whole: its health says so and a restore mends it); with ``settle``, return once
        its old workers have ended (:func:`.processes.reload_nginx`). Its log shipper
        follows ``sig``'s log streams (:meth:`_ship_logs`)."""
        lb = sig.vnfs_in(region, "load_balancer")[0]
        prefix = self._prefix(owner, sig.vcdn_id, lb.name)
        if members is None:
            members = [(c.name, addresses[c.name]) for c in sig.vnfs_in(region, "cache")]
        text = _lb_text(sig, lb, addresses[lb.name], members, prefix, bundle)
        namespace = network.namespace_name(owner, sig.vcdn_id, lb.name)
        conf = prefix / "nginx.conf"
        if mend or not (conf.exists() and conf.read_text() == text):  # else it runs that
            with netns.entered(namespace):  # nginx -t binds the balancer's address
                vnfconfig.check_nginx(text, str(prefix))
            conf.write_text(text)
            processes.reload_nginx(namespace, str(prefix), str(conf), _group(
                owner, sig.vcdn_id, lb.name), settle=settle)
            tls_files.prune(prefix, text)  # the new master reads only the files it names
        self._ship_logs(owner, sig, lb, layout, addresses)

    def _ship_logs(self, owner, sig, vnf, layout, addresses):
        """Run the balancer ``vnf``'s log shipper on ``sig``'s log streams, or none
        (:mod:`.logshipping`); collectors on this machine are reached at the region's
        bridge gateway, as origins are."""
        stored = sig.service.get(logstreams.FIELD)
        logshipping.sync(
            network.namespace_name(owner, sig.vcdn_id, vnf.name),
            self._prefix(owner, sig.vcdn_id, vnf.name), _group(owner, sig.vcdn_id, vnf.name),
            addresses[vnf.name],
            None if stored is None else logstreams.check(stored, f"service.{logstreams.FIELD}"),
            vnf.name,
            lambda host, port: _origin_address(Origin(scheme="tcp", host=host, port=port),
                                               layout[vnf.region]))

    def _dns_configs(self, sig, vnf, prefix, addresses, ports, suffix="", check=True):
        """``{region: (config path, text)}`` of the DNS VNF's dnsmasq of each region, each
        answering every name of the vCDN with its region's balancer, on its port of
        ``ports`` (``suffix`` names a spare: :meth:`_restart_dns`); with ``check``, each
        checked by ``dnsmasq --test`` (before a running one is replaced; a dnsmasq that
        starts checks its config itself and runs nothing on one it rejects)."""
        configs = {}
        flavor = vnfconfig.flavor_config(sig, vnf)
        for region in (r.name for r in sig.regions):
            lb = sig.vnfs_in(region, "load_balancer")[0]
            text = vnfconfig.dns_config(name=f"{vnf.name}-{region}{suffix}",
                                        hostname=sig.hostname,
                                        aliases=served_names(sig)[1:],
                                        answer_address=addresses[lb.name],
                                        listen_addresses=addresses[vnf.name],
                                        port=ports[region], prefix_dir=str(prefix),
                                        flavor=flavor)
            if check:
                vnfconfig.check_dnsmasq(text)
            configs[region] = (prefix / f"dnsmasq-{region}{suffix}.conf", text)
        return configs

    def _restart_dns(self, owner, sig, vnf, addresses):
        """Give the DNS VNF's dnsmasq processes ``sig``'s config (names, regions, listen
        addresses) without a moment unanswered: dnsmasq reads its config only as it
        starts, so each whose config changed (or that does not answer) is first doubled
        by a spare on another port, the steering sent to the spares, the old ones (and
        those of regions ``sig`` lacks) stopped and started on their new config, the
        steering sent back, and the spares stopped. Unchanged ones are left."""
        prefix = self._prefix(owner, sig.vcdn_id, vnf.name)
        namespace = network.namespace_name(owner, sig.vcdn_id, vnf.name)
        group = _group(owner, sig.vcdn_id, vnf.name)

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

        ports = _dns_ports(prefix, sig)
        spare_ports = {r: SPARE_DNS_PORT + p - DNS_BASE_PORT for r, p in ports.items()}
        configs = self._dns_configs(sig, vnf, prefix, addresses, ports)
        changed = [r for r, (path, text) in configs.items()
                   if not (path.exists() and path.read_text() == text and dnsprobe.resolves(
                       addresses[vnf.name][0], served_names(sig)[-1], port=ports[r]))]
        # a spare differs from its region's config (checked) only by its name and port
        spares = self._dns_configs(sig, vnf, prefix, addresses, spare_ports, "-spare",
                                   check=False)
        for region in changed:
            path, text = spares[region]
            stop(f"{vnf.name}-{region}-spare")  # one an interrupted change left
            path.write_text(text)
            start(path, region, spare_ports[region], "-spare")
        self._steer(namespace, prefix, sig, ports | {r: spare_ports[r] for r in changed})
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
        self._steer(namespace, prefix, sig, ports)
        for region in changed:
            stop(f"{vnf.name}-{region}-spare")
            spares[region][0].unlink()

    def _steer(self, namespace, prefix, sig, ports):
        """Load the DNS VNF's steering for ``sig``: each region's clients to its port of
        ``ports`` (``nft -f`` loads a ruleset whole or not at all, so it needs no check
        first)."""
        ruleset = _steering(sig, ports)
        (prefix / "steering.nft").write_text(ruleset)
        run(["nft", "-f", str(prefix / "steering.nft")], namespace=namespace)

    def _reload_cache(self, owner, sig, vnf, addresses, layout, mend=False,
                      pause=lambda: None):
        """Give the running cache (or shield) ``vnf`` its config for ``sig`` (origin, cache
        rules), checked in its namespace and reloaded gracefully once ``pause()`` returns,
        returning once its old workers have ended: True; nothing when it has that config
        already and is not to ``mend``: False. Caches are reloaded through
        :meth:`_roll_caches`, which keeps their balancer serving."""
        prefix = self._prefix(owner, sig.vcdn_id, vnf.name)
        _write_cache_files(sig, prefix)
        text = _cache_text(sig, vnf, addresses, layout, prefix)
        conf = prefix / "nginx.conf"
        if not mend and conf.exists() and conf.read_text() == text:
            return False
        namespace = network.namespace_name(owner, sig.vcdn_id, vnf.name)
        with netns.entered(namespace):  # nginx -t binds the cache's address
            vnfconfig.check_nginx(text, str(prefix))
        pause()
        conf.write_text(text)
        processes.reload_nginx(namespace, str(prefix), str(conf),
                               _group(owner, sig.vcdn_id, vnf.name), settle=True)
        return True

    def _start_dns(self, owner, sig, vnf, layout, addresses):
        prefix = self._prefix(owner, sig.vcdn_id, vnf.name)
        regions = [r.name for r in sig.regions]
        own = addresses[vnf.name]
        ports = _dns_ports(prefix, sig)
        configs = {}
        for region, (path, text) in self._dns_configs(sig, vnf, prefix, addresses, ports,
                                                      check=False).items():
            path.write_text(text)
            configs[region] = path
        links = _legs(sig, layout, own, lambda r: r.client_prefixes
                      + (["default"] if r.name == sig.default_region else []))
        namespace = network.namespace_name(owner, sig.vcdn_id, vnf.name)
        network.create_namespace(namespace, links)
        self._steer(namespace, prefix, sig, ports)
        group = _group(owner, sig.vcdn_id, vnf.name)
        cgroups.create(group, vnf.vcpus, cgroups.host_cpus(vnf.host))
        for region in regions:
            command = ["dnsmasq", f"--conf-file={configs[region]}"]
            if vnf.host in _injected_failures():
                command = ["false"]
            processes.start_daemon(namespace, command)
        for region in regions:
            processes.wait_until(lambda r=region: dnsprobe.resolves(
                own[0], sig.hostname, port=ports[r]), f"DNS {vnf.name} for {region}")
            cgroups.adopt(group, processes.pid_in(prefix / f"{vnf.name}-{region}.pid"))

    def _reshape_dns(self, owner, sig, vnf, layout, addresses):
        """Bring the DNS VNF to ``sig``'s regions in place: a leg on each new region's
        bridge, each region's dnsmasq started or restarted where its config changed (each
        listens on every leg) and those of removed regions stopped, the steering and the
        default route replaced, the removed regions' legs deleted, its CPU group
        moved to its host. No query goes unanswered (:meth:`_restart_dns`). Gone
        altogether (a crash), it is built afresh."""
        namespace = network.namespace_name(owner, sig.vcdn_id, vnf.name)
        if namespace not in network.list_namespaces():
            self._remove_vnf(owner, sig.vcdn_id, vnf.name)
            self._start_dns(owner, sig, vnf, layout, addresses)
            return
        own = addresses[vnf.name]
        legs = _add_legs(namespace, _legs(sig, layout, own, lambda r: r.client_prefixes))
        self._restart_dns(owner, sig, vnf, addresses)
        default = legs[_leg(sig, own, sig.default_region)]
        ip_batch([f"route replace default dev {default}"] + _stale_legs(legs, own),
                 namespace=namespace)
        cgroups.create(_group(owner, sig.vcdn_id, vnf.name), vnf.vcpus,
                       cgroups.host_cpus(vnf.host))

    def _reshape_shield(self, owner, sig, vnf, layout, addresses, draining=False, mend=False):
        """Bring the running origin shield ``vnf`` to ``sig``'s regions in place, as
        :meth:`_reshape_dns` does the DNS VNF: a leg on each new region's bridge, its
        config reloaded (:meth:`_reload_cache`) to listen on each leg, its legs in regions
        ``sig`` lacks deleted, its CPU group moved to its host. A shield ``sig`` puts in
        another region (its own removed) is handled, not refused: it is managed at its
        leg there and reaches the origin through that region's bridge from then on.
        With ``draining``, the legs in regions ``sig`` lacks stay and it keeps listening
        on them, for their caches still draining: call it again without, once those
        regions are gone. With ``mend``, it is reloaded even where its config is written
        already (:meth:`_reload_cache`)."""
        namespace = network.namespace_name(owner, sig.vcdn_id, vnf.name)
        own = addresses[vnf.name]
        legs = _add_legs(namespace, _legs(sig, layout, own))
        served = own + [a for a in legs if a not in own] if draining else own
        self._reload_cache(owner, sig, vnf, {**addresses, vnf.name: served}, layout, mend)
        ip_batch(_stale_legs(legs, served), namespace=namespace)
        cgroups.create(_group(owner, sig.vcdn_id, vnf.name), vnf.vcpus,
                       cgroups.host_cpus(vnf.host))

    def _drain_and_stop(self, owner, deployment_id, name):
        """Wait (bounded) for the connections to the removed cache or balancer ``name`` to
        end, then stop it."""
        timeout = config.setting("CDNAAS_LOCAL_DRAIN_SECONDS")
        namespace = network.namespace_name(owner, deployment_id, name)
        try:
            processes.wait_until(lambda: _idle(namespace), f"drain of {name}", timeout)
        except VimError:
            LOG.info("%s still had connections after %.0f s; stopping it", name, timeout)
        self._remove_vnf(owner, deployment_id, name)

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
            address, legs = addresses[vnf.name], []
            if vnf.role == "dns":
                dns_servers += address
                address, legs = address[0], list(address)
            elif vnf.role == "shield":
                address = _managed_address(sig, vnf, addresses)
            vnfs.append(VnfInstance(name=vnf.name, role=vnf.role, region=vnf.region,
                                    host=vnf.host, address=address, vcpus=vnf.vcpus,
                                    resource_id=network.namespace_name(owner, sig.vcdn_id,
                                                                       vnf.name),
                                    addresses=legs))
        endpoints = {r.name: addresses[sig.vnfs_in(r.name, "load_balancer")[0].name]
                     for r in sig.regions}
        return Deployment(deployment_id=sig.vcdn_id, driver=self.name, vnfs=vnfs,
                          entry_point=EntryPoint(hostname=sig.hostname, dns_servers=dns_servers),
                          region_endpoints=endpoints,
                          resources={"owner": owner, "layout": layout,
                                     "service": dict(sig.service)})


def _cache_text(sig, vnf, addresses, layout, prefix, reach=None):
    """The nginx config of the cache or origin shield ``vnf`` of ``sig``, under ``prefix``.

    The shield fetches from the origins (the primary and any secondary, each resolved
    here) and also listens on its leg in every other region; a cache fetches from the
    shield's leg in its own region where the vCDN has a shield (plain HTTP, the origin's
    name as Host), else from the origins.
    A cache trusts its region's balancer for the viewer's address (X-Forwarded-For); the
    files of the vCDN's access control are written first
    (:func:`cdnaas.delivery.access.write_vnf_files`). ``reach(origin, region)`` gives
    where the VNFs of ``region`` reach ``origin`` (:func:`_origin_address` by default).
    """
    if reach is None:
        def reach(origin, region):
            return _origin_address(origin, layout[region])
    address = _managed_address(sig, vnf, addresses)
    [shield] = sig.vnfs_in(role="shield") or [None]
    origin, also_listen, secondary_address = sig.origin, [], None
    behind_shield = vnf.role != "shield" and shield is not None
    if behind_shield:
        origin = Origin(scheme="http", host=sig.origin.host, port=HTTP_PORT)
        origin_address = _leg(sig, addresses[shield.name], vnf.region)
    else:
        if vnf.role == "shield":
            also_listen = [a for a in addresses[vnf.name] if a != address]
        origin_address = reach(sig.origin, vnf.region)
        secondary = origins.secondary_origin(sig.service)
        if secondary is not None:
            secondary_address = reach(secondary, vnf.region)
    viewers_facing = vnf.role == "cache"
    access.write_vnf_files(prefix, vnfconfig.access_files(sig.service if viewers_facing
                                                          else None))
    return vnfconfig.cache_config(
        name=vnf.name, workers=vnf.vcpus, listen_address=address, listen_port=HTTP_PORT,
        origin=origin, prefix_dir=str(prefix), user=VNF_USER, origin_address=origin_address,
        planned_connections=vnfconfig.planned_connections(sig, vnf),
        max_files=processes.open_file_limit(), management_sources=_management_sources(address),
        flavor=vnfconfig.flavor_config(sig, vnf), cache_rules=sig.service.get("cache_rules"),
        shield=not viewers_facing, also_listen=also_listen, service=sig.service,
        secondary_address=secondary_address, behind_shield=behind_shield, region=vnf.region,
        real_ip_from=[addresses[lb.name] for lb in sig.vnfs_in(vnf.region, "load_balancer")]
        if viewers_facing else [])


def _write_cache_files(sig, prefix):
    """Write the files ``sig``'s cache configs refer to (:func:`.vnfconfig.cache_files`)
    under ``prefix``, readable by the workers; those of a previous config go."""
    wanted = {prefix / relative: text
              for relative, text in vnfconfig.cache_files(sig.service).items()}
    for path, text in wanted.items():
        path.parent.mkdir(mode=0o755, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        path.chmod(0o644)
    folder = prefix / responses.PAGES_DIR
    for path in folder.iterdir() if folder.is_dir() else ():
        if path not in wanted:
            path.unlink()


def _lb_text(sig, vnf, address, members, prefix, bundle):
    """The balancer ``vnf``'s config for ``sig``, its certificate files (of ``bundle``, or
    none) written first."""
    return vnfconfig.lb_config(name=vnf.name, workers=vnf.vcpus, listen_address=address,
                               listen_port=HTTP_PORT, prefix_dir=str(prefix),
                               planned_connections=vnfconfig.planned_connections(sig, vnf),
                               max_files=processes.open_file_limit(),
                               members=[(name, addr, HTTP_PORT) for name, addr in members],
                               management_sources=_management_sources(address),
                               user=VNF_USER, flavor=vnfconfig.flavor_config(sig, vnf),
                               server_names=served_names(sig),
                               tls=tls_files.write(prefix, bundle, HTTPS_PORT),
                               cache_rules=sig.service.get("cache_rules"),
                               service=sig.service)


def _leg(sig, legs, region):
    """The address of a multi-homed VNF (DNS, shield) on ``region``'s bridge (``legs`` in
    the SIG's region order)."""
    return legs[[r.name for r in sig.regions].index(region)]


def _legs(sig, layout, addresses, routes=lambda region: []):
    """The links of a multi-homed VNF (DNS, shield) as :func:`.network.create_namespaces`
    takes them: its address (``addresses``, in the SIG's region order) on each region's
    bridge, with the on-link routes ``routes(region)`` gives."""
    return [(layout[r.name]["bridge"], _cidr(address, layout[r.name]), routes(r))
            for r, address in zip(sig.regions, addresses)]


def _add_legs(namespace, links):
    """Give the running multi-homed VNF in ``namespace`` a leg for each of ``links`` (as
    :func:`_legs` makes them) whose address it lacks, numbered after its last one; return
    its legs then (:func:`.network.links_of`)."""
    legs = network.links_of(namespace)
    missing = [link for link in links if link[1].split("/")[0] not in legs]
    if not missing:
        return legs
    network.add_links(namespace, missing,
                      first=1 + max((int(name[3:]) for name in legs.values()), default=-1))
    return network.links_of(namespace)


def _stale_legs(legs, kept):
    """``ip`` lines deleting those of ``legs`` (:func:`.network.links_of`) whose address is
    not one of ``kept``."""
    return [f"link del {name}" for address, name in legs.items() if address not in kept]


def _managed_address(sig, vnf, addresses):
    """Where RO manages ``vnf``: its address, or a multi-homed one's leg in its region."""
    address = addresses[vnf.name]
    return _leg(sig, address, vnf.region) if isinstance(address, list) else address


def _dns_ports(prefix, sig):
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


def _steering(sig, ports):
    """The DNS VNF's nftables ruleset: each region's clients to its port of ``ports``,
    the rest to the default region's."""
    return vnfconfig.steering_rules(table="cdnaas-geo",
                                    rules=[(p, ports[r.name]) for r in sig.regions
                                           for p in r.client_prefixes],
                                    default_port=ports[sig.default_region])


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
        free = (str(a) for a in list(subnet.hosts())[hosts.FIRST_CACHE_HOST - 1:]
                if str(a) not in taken)
        for vnf in sig.vnfs_in(region):
            if vnf.role == "load_balancer":
                addresses[vnf.name] = str(subnet.network_address + hosts.LB_HOST)
            elif vnf.role == "cache":
                addresses[vnf.name] = kept.get(vnf.name) or next(free)
    # DNS VNFs and the shield are multi-homed: an address on every region, in SIG order
    for vnf in sig.vnfs_in(role="dns") + sig.vnfs_in(role="shield"):
        host = hosts.SHIELD_HOST if vnf.role == "shield" else hosts.dns_host(sig, vnf)
        addresses[vnf.name] = [
            str(ipaddress.ip_network(layout[r.name]["subnet"]).network_address + host)
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
    """This machine's IPv4 addresses, read again at most every :data:`LOCAL_ADDRESSES_SECONDS`
    (each of a deployment's caches asks)."""
    with _LOCAL_ADDRESSES_LOCK:
        read_at, addresses = _LOCAL_ADDRESSES
        if time.monotonic() - read_at > LOCAL_ADDRESSES_SECONDS:
            out = run(["ip", "-o", "-4", "addr", "show"])
            addresses = [ipaddress.ip_interface(line.split()[3]).ip for line in out.splitlines()]
            _LOCAL_ADDRESSES[:] = [time.monotonic(), addresses]
        return addresses


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


def _connections(namespace):
    """How many viewers or balancers are connected to the nginx VNF in ``namespace``, on
    its HTTP or HTTPS port (None: its namespace is gone)."""
    try:
        return netns.established(namespace, (HTTP_PORT, HTTPS_PORT))
    except VimError:
        return None


def _idle(namespace):
    """Whether no viewer or balancer is connected to the nginx VNF in ``namespace`` (one
    gone is)."""
    return not _connections(namespace)


def _viewers(sig, layout):
    """``{region: Client}``: a viewer of each region of ``sig`` that has client prefixes,
    at its probe address (:func:`.clients.probe_address`), all plugged in at once."""
    return clients.viewers(sig.vcdn_id, {
        r.name: (layout[r.name]["bridge"], layout[r.name]["subnet"],
                 clients.probe_address(r.client_prefixes[0]))
        for r in sig.regions if r.client_prefixes})


def _verify_region(sig, region, addresses, viewer):
    """``viewer``, a client of ``region`` (None: the region has no client prefix, so no
    client of it can exist), resolves the vCDN to its balancer and fetches through it."""
    if viewer is None:
        return
    lb = addresses[sig.vnfs_in(region.name, "load_balancer")[0].name]
    dns_server = _leg(sig, addresses[sig.vnfs_in(role="dns")[0].name], region.name)
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
