"""The ``openstack`` VIM driver: a vCDN as Nova servers, Neutron networks and Octavia balancers.

Per vCDN and region: a Neutron network and /24 subnet (RO's addresses, see
:mod:`.plan`), security groups opening only what each VNF needs (TCP 80 from
the region's subnet for caches and an origin shield, and their management port with the
status page from ``CDNAAS_OS_MANAGEMENT_CIDR`` only; UDP and TCP 53 for DNS), one port
per VNF with its address (an origin shield: one on each region's network, its legs,
where that region's caches fetch from), one Nova server per cache, shield or DNS VNF on
its planned host (``vnfs[].host``,
asked of Nova as far as its policy allows, else left to its scheduler: :mod:`.placement`)
in the region's availability
zone (``regions[].zone``) and OpenStack region (``regions[].vim_region``), with the
smallest flavor fitting its vCPUs and RAM, the SIG's image found by name (or
tag) in Glance and cloud-init user-data from ``templates/`` (:mod:`.userdata`);
and one Octavia load balancer (listener and pool created with it, in one call)
whose members — the region's caches — are registered in ONE batch member
update. The SIG's load-balancer VNF is that Octavia balancer.

Servers are created in parallel and waited for together (one listing per poll);
every wait has a timeout (``CDNAAS_OS_*_TIMEOUT``). Every resource carries the
tags ``cdnaas``, ``cdnaas-owner:<owner>`` and ``cdnaas-vcdn:<id>``; each step
records its undo (:class:`~cdnaas.ro.vim.base.Undo`), a failed deploy undoes everything and
then sweeps by tag; deleting what is gone is success; :meth:`cleanup` finds
strays by tag. An update adds and removes caches and regions (the DNS server follows
the default region; an origin shield gains and loses legs: :mod:`.shield`), rotates
the certificate, turns HTTPS on or off (each balancer's TERMINATED_HTTPS listener and
its pool), and gives a new origin, cache rules or names
by rebuilding the servers whose user-data changes, caches in waves that keep their
balancer serving (:mod:`.rebuild`). What a done update could not delete is deleted by
the next update or restore (:class:`~cdnaas.ro.vim.base.RemovalIncomplete`).

Settings (read at call time): ``CDNAAS_OS_CLOUD`` / ``OS_CLOUD`` (the clouds.yaml
entry), ``CDNAAS_OS_OWNER``, ``CDNAAS_OS_POOL``, ``CDNAAS_OS_MANAGEMENT_CIDR``
(:func:`.plan.management_cidrs`), ``CDNAAS_OS_NETWORK`` (an
operator-provided network used by every region instead of one per vCDN; its
first IPv4 subnet holds the VNFs and Neutron picks their addresses),
``CDNAAS_OS_CREATE_FLAVORS=1`` (create a flavor when none fits; needs the
admin role), ``CDNAAS_OS_FLAVOR_DISK_GB``, ``CDNAAS_OS_HOSTS`` (CDNaaS host to Nova
compute host, :func:`.placement.compute_host`).
"""
import concurrent.futures
import logging

from cdnaas.common import config
from cdnaas.ro.vim import logfiles, management, pipeline, purge
from cdnaas.ro.vim.base import (DeploymentFailed, RemovalIncomplete, VimDriver, VimError,
                                no_progress)
from cdnaas.ro.vim.changes import sig_change
from cdnaas.ro.vim.openstack import barbican, flows, loadgen, lookup, placement, plan
from cdnaas.ro.vim.openstack import cloud as oscloud
from cdnaas.ro.vim.openstack import rebuild, shield, sweep, translate
from cdnaas.ro.vim.openstack.context import OpenStackContext, copied

LOG = logging.getLogger(__name__)


class OpenStackDriver(VimDriver):
    """Deploys SIGs on an OpenStack cloud (Nova, Neutron, Glance, Octavia) with openstacksdk."""

    name = "openstack"
    logging_role = "cache"  # Octavia's balancers log nothing an API returns

    def __init__(self):
        self._cloud = None
        self._diagnostics_refused = set()  # clouds whose Nova refused us server diagnostics
        self._placement_refused = placement.Refusals()  # ways of asking for a host refused
        self.pool = concurrent.futures.ThreadPoolExecutor(16, thread_name_prefix="openstack-vim")

    @property
    def cloud(self):
        """The :class:`.cloud.Cloud` named by the environment now (a new one if it changed)."""
        name = oscloud.cloud_name()
        if self._cloud is None or self._cloud.name != name:
            self._cloud = oscloud.Cloud(name)
        return self._cloud

    def check_prerequisites(self):
        """See :meth:`VimDriver.check_prerequisites`: openstacksdk and a cloud in clouds.yaml."""
        oscloud.check_configured()

    def secret_backend(self):
        """See :meth:`VimDriver.secret_backend`: Barbican, where Octavia reads certificates."""
        return barbican.BarbicanBackend(lambda: self.cloud.conn())

    # -- lifecycle: flows of steps (:mod:`.flows`) --------------------------------

    def _context(self, deployment_id, sig, record, progress=no_progress, **extra):
        return OpenStackContext(deployment_id=deployment_id, sig=sig, record=record,
                                progress=progress, cloud=self.cloud, pool=self.pool,
                                secrets=self.secrets,
                                placement_refused=self._placement_refused, **extra)

    def deploy(self, sig, progress=no_progress):
        """See :meth:`VimDriver.deploy`: :func:`.flows.deploy`, after what the servers need
        was found (:func:`.lookup.prepare`); a failure undoes every step and sweeps by tag."""
        shield.check(sig)
        self.check_prerequisites()
        record = {"cloud": self.cloud.name, "owner": plan.owner(), "regions": {},
                  "servers": {}, "management_cidrs": plan.management_cidrs()}
        context = self._context(sig.vcdn_id, sig, record, progress)
        context.prepared = lookup.prepare(context.cloud, sig, sig.vnfs)
        try:
            pipeline.run(flows.deploy(), context)
        except Exception as exc:
            raise DeploymentFailed(f"{lookup.words(exc)}; everything created was removed") \
                from exc
        return flows.deployment_of(context)

    def update(self, deployment, sig, progress=no_progress, previous=None):
        """See :meth:`VimDriver.update`: caches are added or removed, with their pool members
        (one batch call per region); a new origin, new cache rules or new served names
        rebuild the kept servers whose user-data changes (:func:`.rolling.reconfigure`:
        caches in waves that keep each balancer's pool serving, then the DNS servers;
        compute API 2.57); a new certificate is given to the HTTPS listeners. HTTPS turned
        on gives each balancer its HTTPS listener and pool (undone should a later step
        fail); turned off, they are deleted once everything else succeeded (not undone).

        A new region gets what deploy makes of one (network, subnet, security groups, a
        balancer with ``sig``'s listeners, its servers), the DNS servers are rebuilt
        with ``sig``'s regions, and a removed region's servers, balancer and network go
        once everything else succeeded (:func:`.flows.removal`, not undone). An origin
        shield gets a leg in each new region before it is rebuilt, first of all servers
        (:func:`.rolling.grow_shields`), and the new region's caches boot; it keeps
        listening on its legs in removed regions until their caches are gone, then is
        rebuilt without them and loses them (:func:`.rolling.shrink_shields`, not
        undone); it is not added, removed nor moved (:func:`.shield.check_change`). A DNS
        server whose region goes (it follows the default region) is booted again in its
        new region, at that region's DNS address, and the old one goes with the others.
        With ``previous`` None, nothing is rebuilt and HTTPS stays as it is. A changed
        ``https_policy`` (or new names under its redirect) is given to the kept balancers
        live (:func:`.balancers.change_https_policy`: TLS versions, HSTS, L7 policies;
        undone should a later step fail); new balancers are made with it.

        What the removals could not delete (the update done) is deleted first by the
        next update (with ``previous``) or restore: :meth:`restore` deletes what the
        record does not name.

        :raises RemovalIncomplete: the update is done, what it removed is not all deleted.
        """
        change = sig_change(deployment, sig, previous)
        flows.check_update(self._context(sig.vcdn_id, sig, {}, progress, deployment=deployment,
                                         previous=previous, change=change))
        self.check_prerequisites()
        if deployment.resources.get(flows.LEFTOVERS) and previous is not None:
            deployment = self.restore(deployment, previous, progress)
        context = self._context(sig.vcdn_id, sig, copied(deployment.resources), progress,
                                deployment=deployment, previous=previous, change=change)
        cidrs = flows.plan_update(context)
        try:
            pipeline.run(flows.update(context, cidrs), context)
        except Exception as exc:
            raise DeploymentFailed(f"{lookup.words(exc)}; the previous caches still serve") \
                from exc
        flows.commit(context)
        try:  # the update is done: what fails now is left to delete, never undone
            pipeline.run(flows.removal(context), context)
        except Exception as exc:  # pylint: disable=broad-except  (any VIM failure)
            context.record[flows.LEFTOVERS] = True
            message = (f"{lookup.words(exc)}; the update is done, but what it removed is not "
                       "all deleted: the next update or restore deletes it (ending the vCDN "
                       "too)")
            LOG.warning("vCDN %s: %s", sig.vcdn_id, message)
            raise RemovalIncomplete(message, flows.deployment_of(context)) from exc
        return flows.deployment_of(context)

    def restore(self, deployment, sig, progress=no_progress):
        """See :meth:`VimDriver.restore` (:func:`.flows.restore`): servers, then ports, that
        carry the vCDN's tag but are not in the record are deleted (what the interrupted
        update was adding); recorded servers that are gone (caches it had removed) are
        booted again with a new port at their recorded address; recorded servers the
        update had rebuilt with other user-data (their metadata's digest is not the
        recorded one: :func:`.rebuild.rebuilt_since`) are rebuilt with ``sig``'s
        (:func:`.rolling.restore_user_data`); the balancers, security groups and networks
        of regions the record does not name are deleted (:func:`.sweep.remove_unrecorded`:
        a region the update was adding), and what it had deleted of a recorded region is
        made again (:func:`.networks.repair_regions`: a region it was removing) before the
        servers are; a port on a recorded server that the record does not name (an origin
        shield's leg the update was adding) is detached before it is deleted, and the legs
        it had taken from the shield are made again (:func:`.shield.repair_legs`); each
        balancer's HTTPS is put back as ``sig`` serves it
        (:func:`.balancers.restore_https`: an HTTPS listener and pool the update made are
        deleted, those it deleted made again, each listener given ``sig``'s certificate
        container where it has another); then the members of each balancer's pools are
        set back to the recorded caches, one batch call per pool. A server still
        rebuilding refuses a rebuild (409): the restore fails, and restoring again once
        it is ACTIVE is success. The same deletes what a done update could not
        (:class:`RemovalIncomplete`): servers, HTTPS listeners and regions its record no
        longer names.

        :returns: the deployment, with the new ids of what was made again: servers and
            ports, networks, security groups, balancers, HTTPS listeners and pools.
        :raises VimError: a step failed (what it created was undone, but rebuilds and
            HTTPS listeners and pools).
        """
        self.check_prerequisites()
        record = copied(deployment.resources)
        record.pop(flows.LEFTOVERS, None)  # what is not recorded goes below
        context = self._context(deployment.deployment_id, sig, record, progress,
                                deployment=deployment)
        pipeline.run(flows.restore(), context)
        return flows.deployment_of(context)

    def terminate(self, deployment, progress=no_progress):
        """See :meth:`VimDriver.terminate` (:func:`.flows.terminate`)."""
        self.check_prerequisites()
        pipeline.run(flows.terminate(), self._context(
            deployment.deployment_id, None, deployment.resources, progress))

    def health(self, deployment):
        """See :meth:`VimDriver.health`: server status (caches, DNS) and load balancer
        provisioning status, as the cloud reports them (one listing per region); where RO
        reaches the vCDN's networks (management prefixes set), what the guest of each
        cache and origin shield whose server is ACTIVE says too, asked in parallel on its
        management listener (:func:`.translate.guest_health`): the generation of the
        config its nginx workers run against the one its user-data wrote (recorded,
        :func:`.rebuild.note`). Inside the guest, systemd restarts a master that dies
        beside its workers, which then end gracefully (:mod:`.userdata`)."""
        from openstack import exceptions
        record = deployment.resources
        servers, lbs = {}, {}
        for region, info in record["regions"].items():
            conn = self.cloud.conn(info["vim_region"])
            servers.update({s.id: s for s in conn.compute.servers(
                tags=plan.vcdn_tag(deployment.deployment_id))})
            try:
                lbs[region] = conn.load_balancer.get_load_balancer(info["lb_id"])
            except exceptions.NotFoundException:
                lbs[region] = None
        guests = bool(plan.management_cidrs())
        boot_seconds = config.setting("CDNAAS_OS_GUEST_BOOT_SECONDS")

        def check(vnf):
            if vnf.role == "load_balancer":
                return translate.load_balancer_health(vnf, lbs.get(vnf.region))
            server = servers.get(vnf.resource_id)
            found = translate.server_health(vnf, server)
            if not (guests and found.healthy and vnf.role in ("cache", "shield")):
                return found
            wanted = record["servers"].get(vnf.name, {}).get(rebuild.GENERATION_KEY)
            return translate.guest_health(vnf, server, management.generation(vnf.address),
                                          wanted, boot_seconds)
        return list(self.pool.map(check, deployment.vnfs))

    def metrics(self, deployment):
        """See :meth:`VimDriver.metrics`: each region's Octavia statistics (its open
        connections are the region's viewers) and each server's CPU time from Nova's
        diagnostics, read in parallel.

        Nova shows diagnostics to the admin role by default: once it refuses them to
        this cloud's account, CPU times are None and are not asked again (until the RO
        restarts); a server that is not running has None too. Octavia counts
        connections, not HTTP requests, so requests stay None.
        """
        record = deployment.resources
        cloud = self.cloud

        def read(vnf):
            conn = cloud.conn(record["regions"][vnf.region]["vim_region"])
            if vnf.role == "load_balancer":
                return translate.load_balancer_metrics(vnf, lookup.asked(
                    conn.load_balancer.get_load_balancer_statistics, vnf.resource_id))
            return translate.server_metrics(vnf, self._diagnostics(cloud, conn, vnf))
        return list(self.pool.map(read, deployment.vnfs))

    def read_logs(self, deployment, positions, max_bytes=logfiles.READ_BYTES, release=False):
        """See :meth:`VimDriver.read_logs`: each cache's usage log (Octavia's balancers
        log nothing an API returns; the caches log every request they pass, with the
        viewer's address the balancer adds), from its management listener
        (:mod:`cdnaas.ro.vim.logfiles`), open to ``CDNAAS_OS_MANAGEMENT_CIDR``, where RO
        must be; in parallel. The cache rotates its log by size itself
        (:data:`.userdata.USAGE_ROTATE_BYTES`, checked every minute): ``release`` changes
        nothing, and lines rotated twice between two reads are reported lost."""
        return list(self.pool.map(lambda v: logfiles.read_chunk(
            v, positions.get(v.name), max_bytes)[0], [v for v in deployment.vnfs
                                                      if v.role == self.logging_role]))

    def log_stream_status(self, deployment):
        """See :meth:`VimDriver.log_stream_status`: each cache's shipper (a systemd unit,
        :mod:`.userdata`), through its management listener."""
        return logfiles.stream_statuses(self.pool, deployment, self.logging_role)

    def invalidate(self, deployment, paths, prefixes, progress=no_progress):
        """See :meth:`VimDriver.invalidate`: on each cache's management listener
        (:mod:`cdnaas.ro.vim.purge`), open to ``CDNAAS_OS_MANAGEMENT_CIDR``, where RO must be."""
        return purge.invalidate_caches(self.pool, deployment, paths, prefixes, progress)

    def prefetch(self, deployment, paths, progress=no_progress):
        """See :meth:`VimDriver.prefetch`: through each cache's management listener."""
        return purge.prefetch_caches(self.pool, deployment, paths, progress)

    def load_test(self, deployment, vnf_name, test):
        """See :meth:`VimDriver.load_test`: wrk or the simulated viewers, run by the agent of
        a load-generator server in the VNF's network, booted by the region's first test
        and kept until the vCDN goes (:mod:`.loadgen`); the VNF's CPU time from Nova's
        diagnostics, where they are shown to us."""
        self.check_prerequisites()
        cloud = self.cloud
        vnf = loadgen.measured(deployment, vnf_name)
        conn = cloud.conn(deployment.resources["regions"][vnf.region]["vim_region"])
        lookup.check_measured_vcpus(conn, vnf)

        def cpu_seconds():
            return translate.server_metrics(vnf, self._diagnostics(cloud, conn, vnf)).cpu_seconds
        try:
            return loadgen.run(conn, deployment, vnf, test,
                               lambda: lookup.find_flavor(conn, loadgen.VCPUS, loadgen.RAM_MB),
                               cpu_seconds)
        except VimError:
            raise
        except Exception as exc:
            raise oscloud.translate_error(exc, f"load test of {vnf_name}") from exc

    def _diagnostics(self, cloud, conn, vnf):
        """Nova's diagnostics of ``vnf``'s server, or None when they are not shown to us."""
        from openstack import exceptions
        if cloud.name in self._diagnostics_refused:
            return None
        try:
            return lookup.asked(conn.compute.get_server_diagnostics, vnf.resource_id)
        except exceptions.ForbiddenException:
            self._diagnostics_refused.add(cloud.name)
            LOG.warning("cloud %s shows server diagnostics to admins only: no CPU figures for "
                        "its VNFs (give the RO's user the admin role or open the policy "
                        "os_compute_api:os-server-diagnostics, then restart the RO)", cloud.name)
            return None

    def cleanup(self, known_ids):
        """See :meth:`VimDriver.cleanup`: vCDN tags of this owner's resources not in
        ``known_ids``."""
        self.check_prerequisites()
        cloud = self.cloud
        strays = sweep.strays(cloud, known_ids)
        for value, regions in sorted(strays.items()):
            LOG.info("removing stray OpenStack resources of vCDN %s", value)
            sweep.sweep(self._context(value, None, {}), sorted(regions, key=str),
                        f"cdnaas-vcdn:{value}")
        return sorted(strays)

