"""The ``local`` VIM driver: a real vCDN on this one Linux machine.

Each region of a deployment is a Linux bridge with its own /24 (RO's address
management: gateway .1, load balancer .2, DNS .3, origin shield .4, caches from
.10: :mod:`.addressing`); each VNF is a network namespace on its region's bridge
running the same nginx and dnsmasq configurations the OpenStack driver boots
(``templates/``: :mod:`.nginx_vnfs`, :mod:`.dns_vnf`), with its vCPUs as a CPU quota
of its cgroup, pinned to its planned host's CPUs where the operator maps hosts to CPU
sets of this machine (:func:`.cgroups.host_cpus`). The DNS VNF is multi-homed (one leg
per region) and steers queries by client prefix (nftables) to one dnsmasq per region,
each answering with its region's balancer; an origin shield, where the flavor has one,
is multi-homed too, and each region's caches fetch from its leg in their region.
Nothing has a route off the machine: origins must be on this machine (the caches reach
it at their bridge's gateway).

Deploy, update, restore and terminate are flows of steps (:mod:`.flows`) run by
:func:`cdnaas.ro.vim.pipeline.run`. Everything a deployment creates is named after it,
so removing it (on failure, on terminate, or as a stray after a crash) needs no record
beyond its id (:mod:`.removal`).
"""
import concurrent.futures
import dataclasses
import logging
import os
import shutil
import threading
import time

from cdnaas.common import config
from cdnaas.ro.vim import logfiles, management, pipeline, purge
from cdnaas.ro.vim.base import (Deployment, DeploymentFailed, EntryPoint,
                                PrerequisitesMissing, VimDriver, VimError, VnfHealth,
                                VnfInstance, VnfMetrics, no_progress)
from cdnaas.ro.vim.changes import sig_change
from cdnaas.ro.vim.local import (cgroups, flows, loadgen, network, processes, removal,
                                 vnfhealth)
from cdnaas.ro.vim.local.addressing import assign, managed_address
from cdnaas.ro.vim.local.context import LocalContext, group, vnf_root
from cdnaas.ro.vim.local.system import run
from cdnaas.vnf.endpoints import PURGE_MODULE

LOG = logging.getLogger(__name__)

TOOLS = ("ip", "nginx", "dnsmasq", "nft")


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
        if not os.path.exists(PURGE_MODULE):
            raise PrerequisitesMissing(f"missing nginx's purge module {PURGE_MODULE} "
                                       "(package libnginx-mod-http-cache-purge; scripts/setup "
                                       "installs it)")
        cgroups.check()

    # -- lifecycle: flows of steps (:mod:`.flows`) ----------------------------

    def _context(self, deployment_id, sig, record, progress, **extra):
        return LocalContext(deployment_id=deployment_id, sig=sig, record=record,
                            progress=progress, pool=self.pool, tls_bundle=self.tls_bundle,
                            **extra)

    def deploy(self, sig, progress=no_progress):
        """See :meth:`VimDriver.deploy`: :func:`.flows.deploy`; a failure removes
        everything named after the deployment."""
        self.check_prerequisites()
        context = self._context(sig.vcdn_id, sig, {"owner": network.owner()}, progress)
        try:
            pipeline.run(flows.deploy(self.pool), context)
        except Exception as exc:
            raise DeploymentFailed(f"{exc}; everything created was removed") from exc
        return self._deployment(context)

    def update(self, deployment, sig, progress=no_progress, previous=None):
        """See :meth:`VimDriver.update`. What changes is worked out first
        (:func:`~cdnaas.ro.vim.changes.sig_change`), then applied by :func:`.flows.update`;
        a failure puts everything back (:meth:`restore` to ``deployment``). Last, what
        goes goes (:func:`.flows.removal`)."""
        if previous is None:
            if sig_change(deployment, sig).regions_changed:
                raise DeploymentFailed("the local driver changes the regions of a vCDN only "
                                       "knowing the SIG it serves (RO passes it)")
            # what the balancers and DNS serve now: hostnames and certificate
            previous = dataclasses.replace(sig, service=deployment.resources.get("service", {}))
        context = self._context(sig.vcdn_id, sig, {"owner": deployment.resources["owner"]},
                                progress,
                                deployment=deployment, previous=previous,
                                change=sig_change(deployment, sig, previous))
        try:
            pipeline.run(flows.update(context, self.pool, lambda ctx: self.restore(
                ctx.deployment, ctx.previous)), context)
        except Exception as exc:
            raise DeploymentFailed(f"{exc}; the previous deployment still serves") from exc
        pipeline.run(flows.removal(context, self.pool), context)
        return self._deployment(context)

    def restore(self, deployment, sig, progress=no_progress):
        """See :meth:`VimDriver.restore` (:func:`.flows.restore`): the deployment's VNFs
        that it does not record (namespaces, CPU groups, files) and bridges of regions it
        does not record are removed, recorded bridges that are gone come back on their
        subnet, recorded VNFs that are not whole (:mod:`.vnfhealth`: a process tree
        broken, such as workers orphaned by a killed master, another configuration than
        the one written, or no answer) are mended or built again, every cache gets its
        config for ``sig`` again, every balancer whose config for the recorded caches
        differs is reloaded, and the origin shield and the DNS VNF are given ``sig``'s
        regions again (:func:`.nginx_vnfs.reshape_shield`, :func:`.dns_vnf.reshape_dns`):
        their legs in others deleted, the shield managed at its leg in its region again.
        The restore of a deployment that runs as recorded changes nothing: RO calls it to
        repair one (an update to the SIG it already serves).

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
        record = {"owner": deployment.resources["owner"],
                  "layout": deployment.resources["layout"]}
        context = self._context(deployment.deployment_id, sig, record, progress,
                                deployment=deployment,
                                change=sig_change(deployment, sig))
        # DNS and shield: an address per region
        context.addresses = assign(sig, record["layout"],
                                   {v.name: v.address for v in deployment.vnfs})
        pipeline.run(flows.restore(self.pool), context)
        return deployment

    def vnf_names(self, deployment):
        return removal.vnf_names(deployment.resources.get("owner", network.owner()),
                                 deployment.deployment_id)

    def terminate(self, deployment, progress=no_progress):
        record = {"owner": deployment.resources.get("owner", network.owner())}
        pipeline.run(flows.terminate(), self._context(
            deployment.deployment_id, None, record, progress, deployment=deployment))

    def health(self, deployment):
        """See :meth:`VimDriver.health`: each VNF's process tree, the generation of the
        configuration it runs and its answer (:mod:`.vnfhealth`), looked at in parallel."""
        owner = deployment.resources.get("owner", network.owner())

        def check(vnf):
            found = vnfhealth.recorded(owner, deployment, vnf)
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
                connections = removal.connections(
                    network.namespace_name(owner, deployment.deployment_id, vnf.name))
            cpu = cgroups.cpu_usage_seconds(group(owner, deployment.deployment_id, vnf.name))
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
        only this side reaches (:mod:`cdnaas.ro.vim.purge`)."""
        return purge.invalidate_caches(self.pool, deployment, paths, prefixes, progress)

    def prefetch(self, deployment, paths, progress=no_progress):
        """See :meth:`VimDriver.prefetch`: through each cache's management listener
        (:mod:`cdnaas.ro.vim.purge`)."""
        return purge.prefetch_caches(self.pool, deployment, paths, progress)

    def _rotate_log(self, owner, deployment_id, vnf_name):
        prefix = vnf_root(owner, deployment_id) / vnf_name
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
        return loadgen.run(deployment, vnf, deployment.resources.get("owner", network.owner()),
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
            removal.remove_all(owner, deployment_id)
        return sorted(strays)

    def _deployment(self, context):
        """The :class:`Deployment` ``context``'s flow built."""
        sig, addresses = context.sig, context.addresses
        vnfs, dns_servers = [], []
        for vnf in sig.vnfs:
            address, legs = addresses[vnf.name], []
            if vnf.role == "dns":
                dns_servers += address
                address, legs = address[0], list(address)
            elif vnf.role == "shield":
                address = managed_address(sig, vnf, addresses)
            vnfs.append(VnfInstance(name=vnf.name, role=vnf.role, region=vnf.region,
                                    host=vnf.host, address=address, vcpus=vnf.vcpus,
                                    resource_id=context.namespace(vnf.name), addresses=legs))
        endpoints = {r.name: addresses[sig.vnfs_in(r.name, "load_balancer")[0].name]
                     for r in sig.regions}
        return Deployment(deployment_id=sig.vcdn_id, driver=self.name, vnfs=vnfs,
                          entry_point=EntryPoint(hostname=sig.hostname, dns_servers=dns_servers),
                          region_endpoints=endpoints,
                          resources={"owner": context.owner, "layout": context.layout,
                                     "service": dict(sig.service)})
