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
import ipaddress
import logging
import socket

from cdnaas.common import challenges, config, errors
from cdnaas.common.sig import Origin
from cdnaas.delivery import origins
from cdnaas.ro import purge, vnfconfig
from cdnaas.ro.vim import dnsprobe, logfiles, management
from cdnaas.ro.vim.base import (
    Deployment,
    DeploymentFailed,
    EntryPoint,
    RemovalIncomplete,
    RetryableVimError,
    Undo,
    VimDriver,
    VimError,
    check_origin_policy,
    no_progress,
    run_all,
    served_names,
    tls_ref,
)
from cdnaas.ro.vim.openstack import cloud as oscloud
from cdnaas.ro.vim.openstack import (barbican, https, https_policy, loadgen, placement, plan,
                                     rebuild, shield, translate, userdata)

LOG = logging.getLogger(__name__)

SERVER_ROLES = ("cache", "shield", "dns")
#: record key: an update's removals failed, something of it is left to delete
_LEFTOVERS = "leftovers"


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

    # -- deploy ------------------------------------------------------------------

    def deploy(self, sig, progress=no_progress):
        """See :meth:`VimDriver.deploy`."""
        shield.check(sig)
        self.check_prerequisites()
        cloud = self.cloud
        management = plan.management_cidrs()
        prepared = self._prepare(cloud, sig, sig.vnfs)
        undo = Undo()
        record = {"cloud": cloud.name, "owner": plan.owner(), "regions": {}, "servers": {},
                  "management_cidrs": management}
        try:
            cidrs = plan.subnets(sig, {})
            addresses = plan.addresses(sig, cidrs, {})
            self._create_networks(cloud, sig, cidrs, record, undo, progress)
            addresses = self._operator_addresses(sig, record, addresses)
            lbs = self._create_balancers(cloud, sig, addresses, record, undo)
            self._boot(cloud, sig, [v for v in sig.vnfs if v.role in SERVER_ROLES],
                       prepared, addresses, record, undo, progress)
            self._register_members(cloud, sig, lbs, record, addresses, undo, progress)
        except Exception as exc:
            LOG.warning("deployment %s failed, undoing %d step(s): %s", sig.vcdn_id, len(undo),
                        exc)
            undo.run()
            self._sweep(cloud, self._vim_regions(sig), plan.vcdn_tag(sig.vcdn_id))
            raise DeploymentFailed(f"{_words(exc)}; everything created was removed") from exc
        return self._deployment(sig, record, addresses)

    def _prepare(self, cloud, sig, vnfs):
        """Look up what the servers need (image, flavor, origin address); create nothing.

        :returns: ``{"images": {(vim_region, image): id}, "flavors": {(vim_region, vcpus,
            ram): id}, "origin_address": ip, "secondary_address": ip or None}`` (the
            vCDN's secondary origin, :mod:`cdnaas.delivery.origins`).
        :raises DeploymentFailed: an image or flavor is missing, or an origin does not resolve.
        :raises RetryableVimError: the cloud does not answer.
        """
        prepared = {"images": {}, "flavors": {}, "origin_address": None,
                    "secondary_address": None}
        try:
            for vnf in vnfs:
                if vnf.role not in SERVER_ROLES:
                    continue
                vim_region = sig.region(vnf.region).vim_region
                conn = cloud.conn(vim_region)
                key = (vim_region, vnf.image)
                if key not in prepared["images"]:
                    prepared["images"][key] = _find_image(conn, vnf.image, vim_region)
                key = (vim_region, vnf.vcpus, vnf.ram_mb)
                if key not in prepared["flavors"]:
                    prepared["flavors"][key] = _find_flavor(conn, vnf.vcpus, vnf.ram_mb)
            if any(v.role in ("cache", "shield") for v in vnfs):
                prepared["origin_address"] = _resolve(sig.origin)
                prepared["secondary_address"] = _resolve_secondary(sig)
        except RetryableVimError:
            raise
        except Exception as exc:
            raise DeploymentFailed(f"{_words(exc)}; nothing was created") from exc
        return prepared

    def _create_networks(self, cloud, sig, cidrs, record, undo, progress, regions=None):
        """Per region of ``regions`` (default: all of ``sig``'s): network, subnet and
        security groups (or the operator's network), recorded in ``record``."""
        operator_network = config.setting("CDNAAS_OS_NETWORK")
        tags = plan.tags(sig.vcdn_id)
        regions = sig.regions if regions is None else regions
        step = "create networks"
        progress(step, 0, len(regions))
        for done, region in enumerate(regions, 1):
            conn = cloud.conn(region.vim_region)
            info = {"vim_region": region.vim_region, "zone": region.zone,
                    "cidr": cidrs[region.name], "security_groups": {}}
            record["regions"][region.name] = info
            name = plan.resource_name(sig.vcdn_id, region.name)
            if operator_network:
                network = conn.network.find_network(operator_network, ignore_missing=False)
                subnet = next(s for s in conn.network.subnets(network_id=network.id)
                              if s.ip_version == 4)
                info.update(network_id=network.id, subnet_id=subnet.id, cidr=subnet.cidr,
                            operator_network=True)
            else:
                # Neutron takes tags at creation for ports only: the others get them next
                network = conn.network.create_network(name=name,
                                                      description=f"CDNaaS vCDN {sig.vcdn_id}")
                undo.push(f"network {name}", self._delete_network, conn, network.id)
                conn.network.set_tags(network, tags)
                subnet = conn.network.create_subnet(
                    name=name, network_id=network.id, ip_version=4, cidr=cidrs[region.name],
                    gateway_ip=str(ipaddress.ip_network(cidrs[region.name])[1]))
                undo.push(f"subnet {name}", self._delete_subnet, conn, subnet.id)
                conn.network.set_tags(subnet, tags)
                info.update(network_id=network.id, subnet_id=subnet.id)
            roles = {v.role for v in sig.vnfs_in(region.name)} & set(SERVER_ROLES)
            if sig.vnfs_in(role="shield"):  # its leg here, where the region's caches fetch
                roles.add("shield")
            for role in sorted(roles):
                info["security_groups"][role] = self._security_group(
                    conn, sig, region.name, role, info["cidr"], record.get("management_cidrs", []),
                    undo)
            progress(step, done, len(regions))

    def _security_group(self, conn, sig, region, role, cidr, management, undo):
        """A security group opening only what ``role`` serves: 80/tcp (cache, shield) and,
        to the ``management`` prefixes only, their management port; 53 (DNS)."""
        name = plan.resource_name(sig.vcdn_id, f"{region}-{role}")
        group = conn.network.create_security_group(
            name=name, description=f"CDNaaS vCDN {sig.vcdn_id}: {role} VNFs of {region}")
        undo.push(f"security group {name}", oscloud.gone, conn.network.delete_security_group,
                  group.id)
        conn.network.set_tags(group, plan.tags(sig.vcdn_id))
        if role in ("cache", "shield"):  # from the region's subnet: balancer to caches,
            #                              caches to the shield's leg
            rules = [("tcp", plan.HTTP_PORT, cidr)]
            rules += [("tcp", vnfconfig.MANAGEMENT_PORT, prefix) for prefix in management]
        else:  # from anywhere: the region's clients
            rules = [("udp", 53, "0.0.0.0/0"), ("tcp", 53, "0.0.0.0/0")]
        conn.network.create_security_group_rules([
            {"security_group_id": group.id, "direction": "ingress",
             "ethertype": "IPv6" if ":" in prefix else "IPv4",
             "protocol": protocol, "port_range_min": port, "port_range_max": port,
             "remote_ip_prefix": prefix} for protocol, port, prefix in rules])
        return group.id

    def _operator_addresses(self, sig, record, addresses):
        """On an operator's network Neutron picks the addresses: forget RO's."""
        if not any(i.get("operator_network") for i in record["regions"].values()):
            return addresses
        return {name: None for name in addresses}

    def _create_balancers(self, cloud, sig, addresses, record, undo, regions=None):
        """Start creating the load balancer of each region of ``regions`` (default: all of
        ``sig``'s) with its listeners and pools (one call each).

        :returns: region -> load balancer id (provisioning; :meth:`_register_members` waits).
        """
        lbs = {}
        tags = plan.tags(sig.vcdn_id)
        for region in sig.regions if regions is None else regions:
            conn = cloud.conn(region.vim_region)
            info = record["regions"][region.name]
            lb_vnf = sig.vnfs_in(region.name, "load_balancer")
            name = _balancer_name(sig, region.name)
            attrs = {"name": name, "vip_subnet_id": info["subnet_id"], "tags": tags,
                     "description": f"CDNaaS vCDN {sig.vcdn_id}, region {region.name}",
                     "listeners": self._listeners(conn, sig, region.name)}
            if lb_vnf and addresses.get(lb_vnf[0].name):
                attrs["vip_address"] = addresses[lb_vnf[0].name]
            lb = conn.load_balancer.create_load_balancer(**attrs)
            undo.push(f"load balancer {name}", self._delete_load_balancer, conn, lb.id)
            info["lb_id"] = lb.id
            lbs[region.name] = lb.id
        return lbs

    def _listeners(self, conn, sig, region):
        """The listeners of ``region``'s balancer for ``sig`` (:func:`.plan.listeners`):
        HTTPS with ``sig``'s certificate container (Barbican), ALPN and HSTS where the
        Octavia API takes them, and the vCDN's HTTPS policy (ACME challenges let through
        where the certificate is managed); HTTP only without a certificate."""
        policy = {"policy": sig.service.get("https_policy"), "names": served_names(sig),
                  "acme": _acme_answered(sig)}
        ref = tls_ref(sig)
        if ref is None:
            return plan.listeners(_balancer_name(sig, region), plan.tags(sig.vcdn_id), **policy)
        if self.secrets is None:
            raise VimError(f"{sig.vcdn_id} serves HTTPS but RO gave this driver no secret store")
        versions = oscloud.octavia_versions(conn)
        return plan.listeners(_balancer_name(sig, region), plan.tags(sig.vcdn_id),
                              container_ref=self.secrets.external_ref(ref),
                              alpn=plan.alpn_supported(versions),
                              policy_api=plan.octavia_supports(versions, plan.HSTS_VERSION),
                              **policy)

    def secret_backend(self):
        """See :meth:`VimDriver.secret_backend`: Barbican, where Octavia reads certificates."""
        return barbican.BarbicanBackend(lambda: self.cloud.conn())

    def _boot(self, cloud, sig, vnfs, prepared, addresses, record, undo, progress,
              step="boot servers"):
        """Create the ports (one bulk call per region; an origin shield's legs in the other
        regions with theirs) and servers (in parallel) of ``vnfs``; return when every
        server is ACTIVE."""
        if not vnfs:
            return
        tags = plan.tags(sig.vcdn_id)
        by_region, wanted = {}, {}
        for vnf in vnfs:
            by_region.setdefault(vnf.region, []).append(vnf)
            wanted.setdefault(vnf.region, []).append((vnf.name, vnf))
            for region, leg in shield.legs(sig, record, vnf):
                wanted.setdefault(region, []).append((leg, vnf))
        ports = {}
        for region, members in wanted.items():  # one bulk call per region
            conn = cloud.conn(sig.region(region).vim_region)
            info = record["regions"][region]
            created = list(conn.network.create_ports([
                plan.port_spec(sig, key, vnf.role, info, addresses, tags)
                for key, vnf in members]))
            for (key, _vnf), port in zip(members, created):
                undo.push(f"port of {key}", oscloud.gone, conn.network.delete_port, port.id)
                ports[key] = port
                addresses[key] = port.fixed_ips[0]["ip_address"]
            self._parallel(lambda p, conn=conn: conn.network.set_tags(p, tags),
                           plan.untagged(created, tags))
        # LIFO: this runs after every server's delete, before the ports' deletes
        server_ids = {}
        undo.push("wait for servers to go", lambda: [
            oscloud.servers_gone(cloud.conn(sig.region(r).vim_region),
                                 [server_ids[v.name] for v in ms if v.name in server_ids],
                                 oscloud.timeout("delete"))
            for r, ms in by_region.items()])

        hosts = placement.host_map()

        def create(vnf):
            region = sig.region(vnf.region)
            conn = cloud.conn(region.vim_region)
            name = plan.resource_name(sig.vcdn_id, vnf.name)
            compute_host = placement.compute_host(vnf.host, hosts)
            user_data = self._user_data(sig, vnf, addresses, prepared, record)
            legs = {region: ports[leg].id for region, leg in shield.legs(sig, record, vnf)}
            server, way, refused = self._create_server(
                cloud, conn, region, compute_host, name=name,
                image_id=prepared["images"][(region.vim_region, vnf.image)],
                flavor_id=prepared["flavors"][(region.vim_region, vnf.vcpus, vnf.ram_mb)],
                networks=[{"port": ports[vnf.name].id}] + [{"port": i} for i in legs.values()],
                user_data=rebuild.encoded(user_data), tags=tags,
                metadata=_metadata(sig, vnf, user_data))
            undo.push(f"server {name}", oscloud.gone, conn.compute.delete_server, server.id)
            server_ids[vnf.name] = server.id
            record["servers"][vnf.name] = {
                "server_id": server.id, "port_id": ports[vnf.name].id, "region": vnf.region,
                "placement": placement.outcome(vnf.host, compute_host, way, refused, None)}
            rebuild.note(record["servers"][vnf.name], user_data)
            if legs:
                record["servers"][vnf.name]["legs"] = legs
            return server.id

        self._parallel(create, vnfs)
        progress(step, 0, len(vnfs))
        active = {}

        def wait(region):
            members = by_region[region]

            def report(count):
                active[region] = count
                progress(step, sum(active.values()), len(vnfs))
            try:
                placed = oscloud.servers_active(
                    cloud.conn(sig.region(region).vim_region),
                    [server_ids[v.name] for v in members], plan.vcdn_tag(sig.vcdn_id),
                    oscloud.timeout("boot"), report)
            except VimError as exc:
                asked = sorted({record["servers"][v.name]["placement"]["compute_host"]
                                for v in members if record["servers"][v.name]["placement"]
                                ["way"] != placement.ZONE})
                if not asked or "No valid host" not in str(exc):
                    raise
                raise VimError(f"{exc} (servers were asked for their planned hosts "
                               f"{', '.join(asked)}: one disabled, full or outside zone "
                               f"{sig.region(region).zone} fails its server)") from exc
            for vnf in members:  # where Nova put each (None: not shown to this account)
                entry = record["servers"][vnf.name]["placement"]
                entry.update(placement.outcome(entry["planned"], entry["compute_host"],
                                               entry["way"], entry["refused"],
                                               placed.get(server_ids[vnf.name])))
        self._parallel(wait, list(by_region))
        moved = {n: p for n, p in placement.differences(record).items()
                 if n in {v.name for v in vnfs}}
        if moved:
            LOG.warning("vCDN %s: %d server(s) not known to run on their planned host: %s",
                        sig.vcdn_id, len(moved), ", ".join(
                            f"{n} (planned {p['compute_host']}, {p['way']}, on "
                            f"{p['actual'] or 'a host not shown'})"
                            for n, p in sorted(moved.items())))
        progress(step, len(vnfs), len(vnfs))

    def _create_server(self, cloud, conn, region, compute_host, **attrs):
        """Create a server on ``compute_host`` in ``region``'s zone, asking Nova the first
        way its policy allows (:mod:`.placement`).

        :returns: ``(server, way, {refused way: why})``.
        :raises openstack.exceptions.SDKException: the creation failed otherwise.
        """
        with self._placement_refused.asking((cloud.name, region.vim_region)):
            created = self._create_placed(cloud, conn, region, compute_host, attrs)
            self._placement_refused.settle((cloud.name, region.vim_region))
            return created

    def _create_placed(self, cloud, conn, region, compute_host, attrs):
        """:meth:`_create_server`'s ways, each refusal remembered (``attrs``: the server's)."""
        from openstack import exceptions, utils
        key = (cloud.name, region.vim_region)
        refused = self._placement_refused.get(key)
        supported = False
        if compute_host and placement.HOST not in refused:
            supported = utils.supports_microversion(conn.compute, placement.HOST_MICROVERSION)
            if not supported:
                why = f"compute API below {placement.HOST_MICROVERSION} here"
                self._placement_refused.add(key, placement.HOST, why)
                refused[placement.HOST] = why
        while True:
            way, extra = placement.ways(region.zone, compute_host, refused, supported)[0]
            try:
                return conn.compute.create_server(**attrs, **extra), way, refused
            except exceptions.HttpException as exc:
                kind = placement.refusal(way, exc)
                if kind is None:
                    raise
                why = f"{exc.status_code} {getattr(exc, 'details', None) or exc}"
                refused[way] = why
                if kind == "host":  # forcing a host Nova does not know fails the server
                    refused[placement.FORCED] = "not tried: Nova has no such compute host"
                else:
                    self._placement_refused.add(key, way, why)
                    LOG.warning("cloud %s (region %s) refuses placing servers by %s: %s; "
                                "trying the next way (docs/operator-openstack.md)", cloud.name,
                                region.vim_region or "default", way, why)

    @staticmethod
    def _user_data(sig, vnf, addresses, prepared, record):
        """``vnf``'s user-data: an origin shield fetches from the origin and listens on its
        legs too (:func:`.shield.listened`, in address order); a cache fetches from the
        shield's address on its region's network (plain HTTP, the origin's name as Host)
        where the vCDN has one, else from the origin."""
        management = record.get("management_cidrs", [])
        if vnf.role == "shield":
            legs = [addresses[leg] for leg in shield.listened(sig, record, vnf)]
            return userdata.cache(sig, vnf, addresses[vnf.name], prepared["origin_address"],
                                  management, shield=True,
                                  also_listen=sorted(legs, key=ipaddress.ip_address),
                                  secondary_address=prepared["secondary_address"])
        if vnf.role == "cache":
            shield_at = shield.fetched_from(sig, record, addresses, vnf.region)
            subnet = record["regions"].get(vnf.region, {}).get("cidr")
            balancers = [subnet] if subnet else []  # the balancer's (Octavia's) subnet
            if shield_at is None:
                return userdata.cache(sig, vnf, addresses[vnf.name],
                                      prepared["origin_address"], management,
                                      secondary_address=prepared["secondary_address"],
                                      balancers=balancers)
            return userdata.cache(sig, vnf, addresses[vnf.name], shield_at, management,
                                  origin=Origin(scheme="http", host=sig.origin.host,
                                                port=plan.HTTP_PORT), balancers=balancers)
        balancers = {r.name: addresses[sig.vnfs_in(r.name, "load_balancer")[0].name]
                     for r in sig.regions}
        return userdata.dns(sig, vnf, addresses[vnf.name], balancers)

    def _register_members(self, cloud, sig, lbs, record, addresses, undo, progress,
                          regions=None, step="register members"):
        """Wait for each balancer, then set its pool's members in ONE batch call per region."""
        regions = regions if regions is not None else [r.name for r in sig.regions]

        def register(region):
            conn = cloud.conn(sig.region(region).vim_region)
            info = record["regions"][region]
            oscloud.load_balancer_active(conn, lbs[region], oscloud.timeout("lb"))
            if "pool_id" not in info:
                lb = conn.load_balancer.get_load_balancer(lbs[region])
                info.update(_pools(conn, lb) if tls_ref(sig) else {"pool_id": lb.pools[0]["id"]})
                info["vip_address"] = lb.vip_address
            _set_members(conn, info, self._members(sig, region, info, addresses))
        self._parallel(register, regions, step, progress)

    @staticmethod
    def _members(sig, region, info, addresses, leaving=(), stand_ins=()):
        """Pool members of ``region``'s caches, but those named in ``leaving``, and of
        ``stand_ins``."""
        return [{"name": plan.resource_name(sig.vcdn_id, v.name), "address": addresses[v.name],
                 "protocol_port": plan.HTTP_PORT, "subnet_id": info["subnet_id"],
                 "tags": plan.tags(sig.vcdn_id)}
                for v in [*sig.vnfs_in(region, "cache"), *stand_ins] if v.name not in leaving]

    # -- update ------------------------------------------------------------------

    def update(self, deployment, sig, progress=no_progress, previous=None):
        """See :meth:`VimDriver.update`: caches are added or removed, with their pool members
        (one batch call per region); a new origin, new cache rules or new served names
        rebuild the kept servers whose user-data changes (:meth:`_reconfigure`: caches in
        waves that keep each balancer's pool serving, then the DNS servers; compute API
        2.57); a new certificate is given to the HTTPS listeners. HTTPS turned on gives
        each balancer its HTTPS listener and pool (:meth:`_https_on`, undone should a
        later step fail); turned off, they are deleted once everything else succeeded
        (:meth:`_https_off`, not undone).

        A new region gets what deploy makes of one (network, subnet, security groups, a
        balancer with ``sig``'s listeners, its servers), the DNS servers are rebuilt
        with ``sig``'s regions, and a removed region's servers, balancer and network go
        once everything else succeeded (:meth:`_remove_regions`, not undone). An origin
        shield gets a leg in each new region before it is rebuilt, first of all servers
        (:meth:`_grow_shields`), and the new region's caches boot; it keeps listening on
        its legs in removed regions until their caches are gone, then is rebuilt without
        them and loses them (:meth:`_shrink_shields`, not undone); it is not added,
        removed nor moved (:func:`.shield.check_change`). A DNS
        server whose region goes (it follows the default region) is booted again in its
        new region, at that region's DNS address, and the old one goes with the others.
        With ``previous`` None, nothing is rebuilt and HTTPS stays as it is. A changed
        ``https_policy`` (or new names under its redirect) is given to the kept balancers
        live (:meth:`_change_https_policy`: TLS versions, HSTS, L7 policies; undone should
        a later step fail); new balancers are made with it (:meth:`_listeners`).

        What the removals could not delete (the update done) is deleted first by the
        next update (with ``previous``) or restore: :meth:`restore` deletes what the
        record does not name.

        :raises RemovalIncomplete: the update is done, what it removed is not all deleted.
        """
        old = {v.name: v for v in deployment.vnfs}
        moved = {v.name for v in sig.vnfs if v.name in old and old[v.name].region != v.region}
        recorded_regions = deployment.resources["regions"]
        new_regions = [r for r in sig.regions if r.name not in recorded_regions]
        gone_regions = sorted(set(recorded_regions) - {r.name for r in sig.regions})
        shield.check_change(deployment, sig, moved, bool(new_regions or gone_regions),
                            previous)
        new_names = {v.name for v in sig.vnfs} - moved
        added = [v for v in sig.vnfs if v.name not in old or v.name in moved]
        removed = [v for v in deployment.vnfs if v.name not in new_names]
        _check_changes(added, removed, {r.name for r in new_regions}, gone_regions)
        self.check_prerequisites()
        cloud = self.cloud
        if deployment.resources.get(_LEFTOVERS) and previous is not None:
            deployment = self.restore(deployment, previous, progress)
        record = _copy(deployment.resources)
        added = [v for v in added if v.role in SERVER_ROLES]
        if previous is None:
            kept = []
        else:
            rebuilt_roles = SERVER_ROLES if rebuild.reconfigured(previous, sig) else \
                ("dns", "shield") if new_regions or gone_regions else ()
            kept = [v for v in sig.vnfs if v.name in new_names & set(old)
                    and v.role in rebuilt_roles]
        prepared = self._prepare(cloud, sig, added + kept)
        cidrs = plan.subnets(sig, {r: info["cidr"] for r, info in record["regions"].items()})
        addresses = plan.addresses(sig, cidrs, {n: v.address for n, v in old.items()
                                                if n in new_names})
        if any(i.get("operator_network") for i in record["regions"].values()):
            addresses.update({v.name: None for v in added})
        addresses.update(shield.leaving_addresses(sig, record))
        rebuilds = self._rebuilds(cloud, deployment, sig, previous, kept, prepared, addresses)
        shields = [r for r in rebuilds if r.vnf.role == "shield"]
        stand_ins = self._stand_ins(sig, rebuilds, record, addresses)
        lived = sorted(r for r in record["regions"] if r not in gone_regions)
        resized = sorted({v.region for v in added + removed if v.role == "cache"} & set(lived))
        leaving = {v.name: record["servers"].pop(v.name) for v in removed
                   if v.role in SERVER_ROLES}
        before, after = (tls_ref(previous), tls_ref(sig)) if previous is not None else (None, None)
        undo = Undo()
        try:
            lbs = self._add_regions(cloud, sig, new_regions, cidrs, addresses, record, undo,
                                    progress)
            lbs.update({r: record["regions"][r]["lb_id"] for r in lived})
            self._open_roles(cloud, sig, added, record, undo, lived)
            self._grow_shields(cloud, sig, shields, record, addresses, undo, progress)
            self._boot(cloud, sig, added + stand_ins, prepared, addresses, record, undo,
                       progress, step="boot servers" if new_regions or moved else "boot caches")
            for region in resized:  # should the batch fail: put the old members back
                undo.push(f"members of {region}", self._restore_members, cloud, deployment,
                          region)
            self._register_members(cloud, sig, lbs, record, addresses, undo, progress,
                                   regions=resized + [r.name for r in new_regions],
                                   step="update load balancers")
            self._reconfigure(cloud, deployment, sig, [r for r in rebuilds if r not in shields],
                              addresses, undo, progress)
            if before is None and after is not None:
                self._https_on(cloud, sig, record, addresses, undo, progress, lived)
            elif None not in (before, after) and before != after:
                self._rotate(cloud, sig, previous, record, undo, progress, lived)
            if previous is not None and _https_policy_changed(previous, sig):
                self._change_https_policy(cloud, sig, previous, record, undo, progress, lived)
        except Exception as exc:
            LOG.warning("update of %s failed, undoing %d step(s): %s", sig.vcdn_id, len(undo), exc)
            undo.run()
            raise DeploymentFailed(f"{_words(exc)}; the previous caches still serve") from exc
        for item in rebuilds:  # only now: a failed update leaves the record as it was
            rebuild.note(record["servers"][item.vnf.name], item.user_data)
        leaving.update({v.name: record["servers"].pop(v.name) for v in stand_ins})
        gone = {r: record["regions"].pop(r) for r in gone_regions}
        try:  # the update is done: what fails now is left to delete, never undone
            if before is not None and after is None:
                self._https_off(cloud, record, progress)
            self._remove_servers(cloud, {**record["regions"], **gone}, leaving, progress,
                                 step="remove servers" if gone or moved else "remove caches")
            self._shrink_shields(cloud, sig, record, gone, prepared, addresses, progress)
            self._remove_regions(cloud, gone, progress)
        except Exception as exc:  # pylint: disable=broad-except  (any VIM failure)
            record[_LEFTOVERS] = True
            message = (f"{_words(exc)}; the update is done, but what it removed is not all "
                       "deleted: the next update or restore deletes it (ending the vCDN too)")
            LOG.warning("vCDN %s: %s", sig.vcdn_id, message)
            raise RemovalIncomplete(message, self._deployment(sig, record, addresses)) from exc
        return self._deployment(sig, record, addresses)

    def _add_regions(self, cloud, sig, regions, cidrs, addresses, record, undo, progress):
        """Network, subnet, security groups and balancer of each of ``regions`` (new to
        ``record``), as deploy makes them, each undone by ``undo``.

        :returns: region -> load balancer id (provisioning).
        """
        if not regions:
            return {}
        self._create_networks(cloud, sig, cidrs, record, undo, progress, regions)
        return self._create_balancers(cloud, sig, addresses, record, undo, regions)

    def _open_roles(self, cloud, sig, vnfs, record, undo, regions):
        """The security group of each role of ``vnfs`` (to boot) that a region of
        ``regions`` has none for yet: a DNS server moving into a region that stays."""
        for vnf in vnfs:
            info = record["regions"][vnf.region]
            if vnf.region in regions and vnf.role not in info["security_groups"]:
                info["security_groups"][vnf.role] = self._security_group(
                    cloud.conn(info["vim_region"]), sig, vnf.region, vnf.role, info["cidr"],
                    record.get("management_cidrs", []), undo)

    def _remove_regions(self, cloud, infos, progress):
        """Delete the balancer (its listeners and pools with it), security groups and
        network (not the operator's) of each region recorded as ``infos`` (region ->
        its record), their servers gone already; side by side. Nothing undoes this.

        :raises Exception: a delete failed (:meth:`update` records what is left).
        """
        def remove(region):
            info = infos[region]
            conn = cloud.conn(info.get("vim_region"))
            if info.get("lb_id"):
                self._delete_load_balancer(conn, info["lb_id"])
            for group_id in info.get("security_groups", {}).values():
                oscloud.gone(conn.network.delete_security_group, group_id)
            if info.get("network_id") and not info.get("operator_network"):
                self._delete_network(conn, info["network_id"])
        self._parallel(remove, sorted(infos), "remove regions", progress)

    def _remove_unrecorded(self, cloud, deployment_id, record):
        """Delete the balancers, security groups and networks carrying the vCDN's tag that
        ``record`` does not name (a region an interrupted update was adding), in every
        OpenStack region of the cloud and of the record."""
        recorded = set()
        for info in record["regions"].values():
            recorded.update(info.get(k) for k in ("lb_id", "network_id"))
            recorded.update(info.get("security_groups", {}).values())
        vim_regions = {i.get("vim_region") for i in record["regions"].values()}
        self._sweep(cloud, sorted(vim_regions | set(cloud.regions()), key=str),
                    plan.vcdn_tag(deployment_id), keep=recorded, servers=False)

    def _repair_regions(self, cloud, sig, record, addresses, progress):
        """Make again what an interrupted update had deleted of a recorded region (it was
        removing it): its network and subnet at the recorded prefix, its security groups,
        its balancer at the recorded VIP with ``sig``'s listeners; ``record`` takes the new
        ids (the servers are booted again by :meth:`restore`). What this makes is deleted
        should a step fail.

        :raises VimError: a step failed.
        """
        undo = Undo()
        lbs = {}
        try:
            for region in sig.regions:
                info = record["regions"][region.name]
                conn = cloud.conn(info.get("vim_region"))
                if not info.get("operator_network") and \
                        oscloud.found(conn.network.find_network, info["network_id"]) is None:
                    self._create_networks(cloud, sig, {region.name: info["cidr"]}, record,
                                          undo, no_progress, [region])
                    info = record["regions"][region.name]
                for role, group_id in list(info["security_groups"].items()):
                    if oscloud.found(conn.network.find_security_group, group_id) is None:
                        info["security_groups"][role] = self._security_group(
                            conn, sig, region.name, role, info["cidr"],
                            record.get("management_cidrs", []), undo)
                if not info.get("lb_id") or _balancer_gone(conn, info["lb_id"]):
                    for key in ("lb_id", "pool_id", "tls_pool_id", "tls_listener_id"):
                        info.pop(key, None)
                    lbs.update(self._create_balancers(cloud, sig, addresses, record, undo,
                                                      [region]))
            self._register_members(cloud, sig, lbs, record, addresses, undo, progress,
                                   regions=sorted(lbs), step="restore regions")
        except Exception as exc:
            undo.run()
            raise VimError(f"{_words(exc)}; could not make the removed regions again") from exc

    # -- reconfigure: rolling rebuilds -------------------------------------------

    def _rebuilds(self, cloud, deployment, sig, previous, kept, prepared, addresses):
        """Those of ``kept`` (cache and DNS VNFs of ``deployment`` and ``sig``) whose
        user-data ``sig`` changes (:func:`.rebuild.changed`: against the digest recorded at
        boot or rebuild, else the user-data ``previous`` renders, its origin resolved
        again), each with its new image (``sig``'s, found by :meth:`_prepare` as
        ``prepared``) and user-data. Nothing changes here.

        :raises DeploymentFailed: the previous origin does not resolve, or a region's
            compute API is below :data:`.rebuild.MICROVERSION`.
        """
        if not kept:
            return []
        record = deployment.resources
        before = {"origin_address": prepared["origin_address"],
                  "secondary_address": prepared["secondary_address"]}
        if any(v.role in ("cache", "shield") for v in kept):
            try:
                if previous.origin != sig.origin:
                    before["origin_address"] = _resolve(previous.origin)
                before["secondary_address"] = _resolve_secondary(previous)
            except VimError as exc:
                raise DeploymentFailed(f"{exc} (the previous origin, what a failed update "
                                       "goes back to); nothing was changed") from exc
        earlier = {v.name: v for v in previous.vnfs}
        addresses_before = {**addresses, **{v.name: v.address for v in deployment.vnfs}}
        items = [self._rebuild_of(sig, vnf, record, prepared, addresses, self._user_data(
            previous, earlier.get(vnf.name, vnf), addresses_before, before, record))
            for vnf in kept]
        changed = rebuild.changed(items, {n: e.get(rebuild.DIGEST_KEY)
                                          for n, e in record["servers"].items()})
        for vim_region in {sig.region(r.vnf.region).vim_region for r in changed}:
            rebuild.check_compute(cloud.conn(vim_region), vim_region)
        return changed

    @staticmethod
    def _stand_ins(sig, rebuilds, record, addresses):
        """A stand-in (:func:`.rebuild.stand_in`) for each cache of ``rebuilds`` alone in
        its region, given to its item, at the region's lowest spare cache address (put in
        ``addresses``; Neutron picks it on an operator's network).

        :returns: the stand-ins, to boot with the update's new servers.
        """
        found = []
        for item in rebuilds:
            region = item.vnf.region
            if item.vnf.role != "cache" or len(sig.vnfs_in(region, "cache")) > 1:
                continue
            item.stand_in = rebuild.stand_in(item.vnf)
            info = record["regions"][region]
            used = {addresses[v.name] for v in sig.vnfs_in(region)}
            addresses[item.stand_in.name] = None if info.get("operator_network") else \
                plan.spare_address(ipaddress.ip_network(info["cidr"]), used, item.stand_in.name)
            found.append(item.stand_in)
        return found

    def _rebuild_of(self, sig, vnf, record, prepared, addresses, previous=None):
        """The :class:`.rebuild.Rebuild` of ``vnf``'s recorded server to ``sig``'s image
        and user-data (``previous``: what it had, if known)."""
        user_data = self._user_data(sig, vnf, addresses, prepared, record)
        return rebuild.Rebuild(
            vnf=vnf, server_id=record["servers"][vnf.name]["server_id"],
            image_id=prepared["images"][(sig.region(vnf.region).vim_region, vnf.image)],
            user_data=user_data, previous=user_data if previous is None else previous)

    def _reconfigure(self, cloud, deployment, sig, rebuilds, addresses, undo, progress):
        """Rebuild the servers of ``rebuilds`` (:meth:`_rebuilds`) with their new user-data:
        the origin shield first (:meth:`_rebuild_shields`; :meth:`update` rebuilds it
        before, with its new legs); then each region's caches in waves
        (:func:`.rebuild.waves`), regions side by side; then the DNS servers one at a
        time (:meth:`_rebuild_dns`).

        A wave leaves its region's pools (one batch call per pool) while the others
        serve, is rebuilt and waited ACTIVE, and comes back. A region of one cache is
        served by its item's stand-in meanwhile (booted by :meth:`update` or
        :meth:`restore`). Each server's undo rebuilds it back (with the user-data Nova
        shows it had, else the previous SIG's), in its pool; each region's then puts
        ``deployment``'s members back.
        """
        self._rebuild_shields(cloud, sig, [r for r in rebuilds if r.vnf.role == "shield"],
                              undo, progress)
        caches = [r for r in rebuilds if r.vnf.role == "cache"]
        regions = sorted({r.vnf.region for r in caches})
        rebuilt = dict.fromkeys(regions, 0)

        def roll(region):
            def report(count):
                rebuilt[region] = count
                progress("rebuild caches", sum(rebuilt.values()), len(caches))
            undo.push(f"members of {region}", self._restore_members, cloud, deployment, region)
            self._roll_region(cloud, sig, deployment.resources["regions"][region],
                              [r for r in caches if r.vnf.region == region], addresses, undo,
                              report)
        if caches:
            progress("rebuild caches", 0, len(caches))
            self._parallel(roll, regions)
        self._rebuild_dns(cloud, sig, [r for r in rebuilds if r.vnf.role == "dns"], addresses,
                          undo, progress)

    def _rebuild_shields(self, cloud, sig, items, undo, progress):
        """Rebuild the origin shields of ``items`` in place (the caches' misses fail
        meanwhile, their hits serve), each undone by ``undo``."""
        if items:
            self._parallel(lambda item: self._rebuild_wave(
                cloud.conn(sig.region(item.vnf.region).vim_region), sig, [item], undo),
                items, "rebuild origin shield", progress)

    def _grow_shields(self, cloud, sig, items, record, addresses, undo, progress):
        """Give each origin shield of ``sig`` a leg in each new region (made already:
        :func:`.shield.add_legs`), then rebuild those of ``items`` (:meth:`_rebuilds`:
        listening on them), before any cache boots or is rebuilt; all undone by ``undo``."""
        for vnf in sig.vnfs_in(role="shield"):
            shield.add_legs(cloud.conn(sig.region(vnf.region).vim_region), sig, record, vnf,
                            addresses, undo)
        self._rebuild_shields(cloud, sig, items, undo, progress)

    def _shrink_shields(self, cloud, sig, record, gone, prepared, addresses, progress):
        """Take from each origin shield its legs in the regions of ``gone`` (their caches
        gone already): out of ``record`` first (what fails is the next update's or
        restore's to delete), the shield rebuilt without them (its new digest recorded),
        then each detached and deleted (:func:`.shield.delete_leg`). Nothing undoes this.

        :raises Exception: a step failed (:meth:`update` records what is left).
        """
        for vnf in sig.vnfs_in(role="shield"):
            entry = record["servers"][vnf.name]
            leaving = {r: entry["legs"].pop(r) for r in gone if r in entry.get("legs", {})}
            if not leaving:
                continue
            if not entry["legs"]:
                del entry["legs"]
            item = self._rebuild_of(sig, vnf, record, prepared, addresses)
            rebuild.note(entry, item.user_data)
            self._rebuild_shields(cloud, sig, [item], Undo(), progress)
            conn = cloud.conn(sig.region(vnf.region).vim_region)
            for port_id in leaving.values():
                shield.delete_leg(conn, entry["server_id"], port_id)

    def _rebuild_dns(self, cloud, sig, items, addresses, undo, progress):
        """Rebuild the DNS servers of ``items`` one at a time, so that a vCDN of two DNS
        VNFs always has one answering: where RO reaches the vCDN's networks (management
        prefixes set), a rebuilt server is waited until it answers the vCDN's name (to
        RO's address, as to the default region's clients) before the next is rebuilt,
        ``CDNAAS_OS_DNS_TIMEOUT`` at most; elsewhere ACTIVE is all RO can see.

        :raises VimError: a rebuilt server never answered (the update is undone).
        """
        step = "rebuild DNS"
        if items:
            progress(step, 0, len(items))
        for done, item in enumerate(items, 1):
            self._rebuild_wave(cloud.conn(sig.region(item.vnf.region).vim_region), sig,
                               [item], undo)
            if done < len(items) and plan.management_cidrs():
                address = addresses[item.vnf.name]
                oscloud.wait_until(lambda a=address: dnsprobe.resolves(a, sig.hostname),
                                   f"DNS server {item.vnf.name} at {address} to answer "
                                   f"{sig.hostname} after its rebuild", oscloud.timeout("dns"))
            progress(step, done, len(items))


    def _roll_region(self, cloud, sig, info, items, addresses, undo, report):
        """Rebuild ``items``, caches of the region recorded as ``info``, wave by wave out of
        its balancer's pools; ``report(number rebuilt)`` after each wave."""
        region = items[0].vnf.region
        conn = cloud.conn(info["vim_region"])
        caches = sig.vnfs_in(region, "cache")
        stand_ins = [i.stand_in for i in items if i.stand_in is not None]
        done = 0
        for wave in rebuild.waves(items, len(caches)):
            leaving = {r.vnf.name for r in wave}
            serving = len(leaving) < len(caches) or stand_ins  # else in place: none would
            if serving:
                _set_members(conn, info, self._members(sig, region, info, addresses, leaving,
                                                       stand_ins))
            self._rebuild_wave(conn, sig, wave, undo)
            if serving:
                _set_members(conn, info, self._members(sig, region, info, addresses))
            done += len(wave)
            report(done)

    @staticmethod
    def _rebuild_wave(conn, sig, items, undo):
        """Rebuild the servers of ``items`` (of ``conn``'s region) together and wait until
        they are ACTIVE; before each, push its undo (rebuilt back with its image and the
        user-data Nova shows it has, else the previous SIG's)."""
        for item in items:
            server = conn.compute.get_server(item.server_id)
            had = rebuild.decoded(server.user_data) if server.user_data else item.previous
            undo.push(f"rebuild of {item.vnf.name}", _rebuild_back, conn, sig, item.vnf,
                      item.server_id, server.image.id, had)
            _rebuild(conn, sig, item.vnf, item.server_id, item.image_id, item.user_data)
        oscloud.servers_active(conn, [i.server_id for i in items], plan.vcdn_tag(sig.vcdn_id),
                               oscloud.timeout("boot"))

    def _rotate(self, cloud, sig, previous, record, undo, progress, regions):
        """Give the HTTPS listener of each of ``regions`` ``sig``'s certificate container
        (Octavia reloads its balancer gracefully); the undo gives the previous one back."""
        new = self.secrets.external_ref(tls_ref(sig))
        old = self.secrets.external_ref(tls_ref(previous))

        def rotate(region):
            info = record["regions"][region]
            conn = cloud.conn(info.get("vim_region"))
            ids = (conn, info["lb_id"], info["tls_listener_id"])
            undo.push(f"certificate of {region}", https.give_container, *ids, old)
            https.give_container(*ids, new)
        self._first_alone(rotate, regions, "rotate certificates", progress)

    def _change_https_policy(self, cloud, sig, previous, record, undo, progress, regions):
        """Give the balancer of each of ``regions`` ``sig``'s HTTPS policy
        (:func:`.https_policy.converge`); the undo brings back ``previous``'s."""
        def change(region):
            info = record["regions"][region]
            conn = cloud.conn(info.get("vim_region"))
            undo.push(f"HTTPS policy of {region}", self._converge_https_policy, conn,
                      previous, region, info)
            self._converge_https_policy(conn, sig, region, info)
        self._parallel(change, regions, "change HTTPS policy", progress)

    def _converge_https_policy(self, conn, sig, region, info):
        """Bring ``region``'s balancer (``info``) to ``sig``'s HTTPS policy."""
        https_policy.converge(conn, info["lb_id"], info["pool_id"],
                              self._listeners(conn, sig, region))

    def _first_alone(self, action, regions, step, progress):
        """``action(region)`` for the first of ``regions`` alone, then for the others side
        by side: taking a certificate container, Octavia's API adds its service user to
        the container's and secrets' read ACLs in Barbican, which fails two such writes
        at once (a duplicate row; Octavia answers 400 "Could not retrieve certificate").
        The other regions find the ACLs made."""
        progress(step, 0, len(regions))
        action(regions[0])
        self._parallel(action, regions[1:], step,
                       lambda _step, done, total: progress(step, done + 1, total + 1))

    def _https_on(self, cloud, sig, record, addresses, undo, progress, regions):
        """Give the balancer of each of ``regions`` the TERMINATED_HTTPS listener deploy makes
        (:func:`.plan.listeners`: ``sig``'s certificate container) and its pool, whose
        members are the region's caches (one batch call); record them as
        ``tls_listener_id`` and ``tls_pool_id``. Octavia locks the balancer during each
        call: it is waited ACTIVE between them (:func:`.https.add`). The undo deletes
        what was made. The first region alone, then the others side by side
        (:meth:`_first_alone`)."""
        def add(region):
            info = record["regions"][region]
            conn = cloud.conn(info["vim_region"])
            info["tls_listener_id"], info["tls_pool_id"] = https.add(
                conn, info["lb_id"], self._https_spec(conn, sig, region), undo)
            oscloud.batch_update_members(conn, info["tls_pool_id"],
                                         self._members(sig, region, info, addresses))
            oscloud.load_balancer_active(conn, info["lb_id"], oscloud.timeout("lb"))
        self._first_alone(add, regions, "turn HTTPS on", progress)

    def _https_off(self, cloud, record, progress):
        """Delete each region's HTTPS listener and its pool (:func:`.https.restore` to
        HTTP only: the pool first, the balancer waited ACTIVE between Octavia calls) and
        drop them from the record. Nothing undoes this: :meth:`update` does it once
        everything else succeeded.

        :raises Exception: a delete failed (:meth:`update` records what is left).
        """
        def remove(region):
            info = record["regions"][region]
            https.restore(cloud.conn(info["vim_region"]), info, None)
        self._parallel(remove, sorted(record["regions"]), "turn HTTPS off", progress)

    def _https_spec(self, conn, sig, region):
        """The HTTPS listener (with its default pool) of ``region``'s balancer as
        :func:`.plan.listeners` describes it for ``sig``; None when ``sig`` serves HTTP
        only."""
        specs = self._listeners(conn, sig, region)
        return specs[1] if len(specs) > 1 else None

    def _restore_https(self, cloud, sig, record, progress):
        """Put each recorded region's HTTPS listener and pool back as ``sig`` serves them
        (:func:`.https.restore`: what an interrupted :meth:`_https_on`, :meth:`_https_off`
        or :meth:`_rotate` changed) with ``sig``'s HTTPS policy
        (:meth:`_change_https_policy`) and record their ids; the first region alone
        (:meth:`_first_alone`: a listener may be given a certificate container).

        :raises VimError: an Octavia call failed (restoring again carries on).
        """
        def repair(region):
            info = record["regions"][region]
            conn = cloud.conn(info["vim_region"])
            https.restore(conn, info, self._https_spec(conn, sig, region))
            self._converge_https_policy(conn, sig, region, info)
        try:
            self._first_alone(repair, sorted(record["regions"]), "restore HTTPS listeners",
                              progress)
        except Exception as exc:
            raise VimError(f"{_words(exc)}; could not put the HTTPS listeners back as "
                           "recorded") from exc

    def restore(self, deployment, sig, progress=no_progress):
        """See :meth:`VimDriver.restore`: servers, then ports, that carry the vCDN's tag
        but are not in the record are deleted (what the interrupted update was adding);
        recorded servers that are gone (caches it had removed) are booted again with a
        new port at their recorded address; recorded servers the update had rebuilt
        with other user-data (their metadata's digest is not the recorded one:
        :func:`.rebuild.rebuilt_since`) are rebuilt with ``sig``'s (:meth:`_restore_user_data`);
        the balancers, security groups and networks of regions the record does not name
        are deleted (:meth:`_remove_unrecorded`: a region the update was adding), and what
        it had deleted of a recorded region is made again (:meth:`_repair_regions`: a
        region it was removing) before the servers are; a port on a recorded server that
        the record does not name (an origin shield's leg the update was adding) is
        detached before it is deleted, and the legs it had taken from the shield are made
        again (:meth:`_repair_legs`); each balancer's HTTPS is put back as ``sig`` serves
        it (:meth:`_restore_https`: an HTTPS listener and pool the update made are
        deleted, those it deleted made again, each listener given ``sig``'s certificate
        container where it has another); then
        the members of each balancer's pools are set back to the recorded caches, one
        batch call per pool. A server still rebuilding refuses a rebuild (409): the
        restore fails, and restoring again once it is ACTIVE is success. The same deletes
        what a done update could not (:class:`RemovalIncomplete`): servers, HTTPS
        listeners and regions its record no longer names.

        :returns: the deployment, with the new ids of what was made again: servers and
            ports, networks, security groups, balancers, HTTPS listeners and pools.
        :raises VimError: a step failed (what it created was undone, but rebuilds and
            HTTPS listeners and pools).
        """
        self.check_prerequisites()
        cloud = self.cloud
        record = _copy(deployment.resources)
        record.pop(_LEFTOVERS, None)  # what is not recorded goes below
        tags = f"{plan.owner_tag()},{plan.vcdn_tag(deployment.deployment_id)}"
        vim_regions = sorted({i.get("vim_region") for i in record["regions"].values()}
                             | set(cloud.regions()), key=str)
        missing, rebuilt = [], []
        progress("remove VNFs the update added", 0, len(vim_regions))
        for done, vim_region in enumerate(vim_regions, 1):
            conn = cloud.conn(vim_region)
            recorded = {name: e for name, e in record["servers"].items()
                        if record["regions"][e["region"]].get("vim_region") == vim_region}
            existing = {s.id: s for s in conn.compute.servers(tags=tags)}
            # any region's record: two names of one OpenStack region list the same servers
            strays = sorted(set(existing) - {e["server_id"] for e in record["servers"].values()})
            self._parallel(lambda sid, conn=conn: oscloud.gone(conn.compute.delete_server, sid),
                           strays)
            oscloud.servers_gone(conn, strays, oscloud.timeout("delete"))
            gone = sorted(n for n, e in recorded.items() if e["server_id"] not in existing)
            for name in gone:
                record["servers"].pop(name)
            ports = {p for e in record["servers"].values() for p in _port_ids(e)}
            servers = {e["server_id"] for e in record["servers"].values()}
            prefix = plan.resource_name(deployment.deployment_id, "")
            for port in list(conn.network.ports(tags=tags)):  # ours only, never Octavia's VIP
                if port.id not in ports and (port.name or "").startswith(prefix):
                    if port.device_id in servers:  # a shield's leg the update was adding
                        shield.detach(conn, port.device_id, port.id)
                    oscloud.gone(conn.network.delete_port, port.id)
            missing += gone
            rebuilt += [n for n, e in record["servers"].items() if n in recorded and
                        rebuild.rebuilt_since(existing[e["server_id"]].metadata, e)]
            progress("remove VNFs the update added", done, len(vim_regions))
        self._remove_unrecorded(cloud, deployment.deployment_id, record)
        addresses = plan.addresses(sig, {r: i["cidr"] for r, i in record["regions"].items()},
                                   {v.name: v.address for v in deployment.vnfs})  # + legs
        self._repair_regions(cloud, sig, record, addresses, progress)
        self._repair_legs(cloud, sig, record, addresses)
        if missing:
            vnfs = [v for v in sig.vnfs if v.name in missing]
            undo = Undo()
            try:
                self._boot(cloud, sig, vnfs, self._prepare(cloud, sig, vnfs), addresses, record,
                           undo, progress, step="restart stopped caches")
            except Exception as exc:
                undo.run()
                raise VimError(f"{_words(exc)}; could not boot {', '.join(missing)} again") \
                    from exc
        if rebuilt:
            self._restore_user_data(cloud, deployment, sig, rebuilt, record, addresses, progress)
        self._restore_https(cloud, sig, record, progress)
        restored = self._deployment(sig, record, addresses)
        self._parallel(lambda region: self._restore_members(cloud, restored, region),
                       sorted(record["regions"]), "restore load balancers", progress)
        return restored

    def _repair_legs(self, cloud, sig, record, addresses):
        """Give each recorded origin shield back the legs an interrupted update took
        (:func:`.shield.repair_legs`: it was removing their regions); what this makes is
        deleted should a step fail.

        :raises VimError: a step failed.
        """
        undo = Undo()
        try:
            for vnf in sig.vnfs_in(role="shield"):
                if vnf.name in record["servers"]:  # else booted again, legs and all
                    shield.repair_legs(cloud.conn(sig.region(vnf.region).vim_region), sig,
                                       record, vnf, addresses, undo)
        except Exception as exc:
            undo.run()
            raise VimError(f"{_words(exc)}; could not give the origin shield its legs "
                           "again") from exc

    def _restore_user_data(self, cloud, deployment, sig, names, record, addresses, progress):
        """Rebuild the servers of the VNFs ``names`` with ``sig``'s user-data, caches in
        waves (:meth:`_reconfigure`), a region's lone cache stood in for as in an update
        (:meth:`_stand_ins`, deleted afterwards), and record it. Nothing is undone should
        a step fail: a stand-in left serving is deleted by the next restore."""
        vnfs = [v for v in sig.vnfs if v.name in names]
        prepared = self._prepare(cloud, sig, vnfs)
        items = [self._rebuild_of(sig, v, record, prepared, addresses) for v in vnfs]
        stand_ins = self._stand_ins(sig, items, record, addresses)
        try:
            self._boot(cloud, sig, stand_ins, prepared, addresses, record, Undo(), progress,
                       step="boot stand-ins")
            self._reconfigure(cloud, deployment, sig, items, addresses, Undo(), progress)
        except Exception as exc:
            raise VimError(f"{_words(exc)}; could not give {', '.join(sorted(names))} their "
                           "recorded configuration again") from exc
        for item in items:
            rebuild.note(record["servers"][item.vnf.name], item.user_data)
        self._remove_servers(cloud, record["regions"], {v.name: record["servers"].pop(v.name)
                                                        for v in stand_ins}, progress,
                             step="remove stand-ins")

    def _restore_members(self, cloud, deployment, region):
        info = deployment.resources["regions"][region]
        conn = cloud.conn(info["vim_region"])
        members = [{"name": plan.resource_name(deployment.deployment_id, v.name),
                    "address": v.address, "protocol_port": plan.HTTP_PORT,
                    "subnet_id": info["subnet_id"], "tags": plan.tags(deployment.deployment_id)}
                   for v in deployment.vnfs if v.region == region and v.role == "cache"]
        _set_members(conn, info, members)

    def _remove_servers(self, cloud, infos, entries, progress, step="remove caches"):
        """Delete the servers, then the ports, of ``entries`` (VNF name -> its server
        record, out of the record and their pools already; ``infos``: region -> record):
        all asked at once, then waited for in each OpenStack region."""
        if not entries:
            return
        by_region = {}
        for entry in entries.values():
            by_region.setdefault(infos[entry["region"]].get("vim_region"), []).append(entry)
        progress(step, 0, len(entries))

        def remove(vim_region):
            conn = cloud.conn(vim_region)
            server_ids = [e["server_id"] for e in by_region[vim_region]]
            for server_id in server_ids:
                oscloud.gone(conn.compute.delete_server, server_id)
            oscloud.servers_gone(conn, server_ids, oscloud.timeout("delete"))
            for entry in by_region[vim_region]:
                for port_id in _port_ids(entry):
                    oscloud.gone(conn.network.delete_port, port_id)
        self._parallel(remove, sorted(by_region, key=str))
        progress(step, len(entries), len(entries))

    # -- terminate, health, cleanup ------------------------------------------------

    def terminate(self, deployment, progress=no_progress):
        """See :meth:`VimDriver.terminate`: what the record names and what carries the
        vCDN's tag goes; what is gone already is fine."""
        self.check_prerequisites()
        record = deployment.resources
        regions = sorted({i.get("vim_region") for i in record.get("regions", {}).values()},
                         key=str) or [None]
        progress("remove VNFs", 0, 1)
        self._sweep(self.cloud, regions, plan.vcdn_tag(deployment.deployment_id), record)
        progress("remove VNFs", 1, 1)

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
        results = []
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
                return translate.load_balancer_metrics(vnf, _asked(
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
        (:mod:`cdnaas.ro.purge`), open to ``CDNAAS_OS_MANAGEMENT_CIDR``, where RO must be."""
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
        _check_measured_vcpus(conn, vnf)

        def cpu_seconds():
            return translate.server_metrics(vnf, self._diagnostics(cloud, conn, vnf)).cpu_seconds
        try:
            return loadgen.run(conn, deployment, vnf, test,
                               lambda: _find_flavor(conn, loadgen.VCPUS, loadgen.RAM_MB),
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
            return _asked(conn.compute.get_server_diagnostics, vnf.resource_id)
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
        known = {plan.vcdn_tag(i) for i in known_ids}
        owner_tag = plan.owner_tag()
        strays = {}
        for vim_region in cloud.regions():
            conn = cloud.conn(vim_region)
            listings = (conn.compute.servers(tags=owner_tag),
                        conn.load_balancer.load_balancers(tags=owner_tag),
                        conn.network.networks(tags=owner_tag),
                        conn.network.ports(tags=owner_tag),
                        conn.network.security_groups(tags=owner_tag))
            for listing in listings:
                for resource in listing:
                    value = plan.vcdn_from_tags(translate.tags_of(resource))
                    if value is not None and f"cdnaas-vcdn:{value}" not in known:
                        strays.setdefault(value, set()).add(vim_region)
        for value, regions in sorted(strays.items()):
            LOG.info("removing stray OpenStack resources of vCDN %s", value)
            self._sweep(cloud, sorted(regions, key=str), f"cdnaas-vcdn:{value}")
        return sorted(strays)

    # -- removal -----------------------------------------------------------------

    def _sweep(self, cloud, vim_regions, vcdn_tag, record=None, keep=frozenset(),
               servers=True):
        """Remove every resource tagged ``vcdn_tag`` (and of this owner) but the ids in
        ``keep``, plus the ids of ``record``: balancers and servers, then ports, security
        groups, subnets, networks (with ``servers`` False: no tagged server or port)."""
        tags = f"{plan.owner_tag()},{vcdn_tag}"
        record = record or {}
        for vim_region in vim_regions:
            conn = cloud.conn(vim_region)
            infos = [i for i in record.get("regions", {}).values()
                     if i.get("vim_region") == vim_region]
            lb_ids = {lb.id for lb in conn.load_balancer.load_balancers(tags=tags)} - keep
            lb_ids |= {i["lb_id"] for i in infos if i.get("lb_id")}
            server_ids = {s.id for s in conn.compute.servers(tags=tags, details=False)} - keep \
                if servers else set()
            server_ids |= {e["server_id"] for e in record.get("servers", {}).values()
                           if record["regions"].get(e["region"], {}).get("vim_region")
                           == vim_region}
            for lb_id in lb_ids:
                self._delete_load_balancer(conn, lb_id, wait=False)
            self._parallel(lambda sid, conn=conn: oscloud.gone(conn.compute.delete_server, sid),
                           sorted(server_ids))
            oscloud.servers_gone(conn, server_ids, oscloud.timeout("delete"))
            for lb_id in lb_ids:
                oscloud.load_balancer_gone(conn, lb_id, oscloud.timeout("delete"))
            port_ids = {p.id for p in conn.network.ports(tags=tags)} - keep \
                if servers else set()
            port_ids |= {p for e in record.get("servers", {}).values() for p in _port_ids(e)
                         if record["regions"].get(e["region"], {}).get("vim_region")
                         == vim_region}
            for port_id in port_ids:
                oscloud.gone(conn.network.delete_port, port_id)
            for group in list(conn.network.security_groups(tags=tags)):
                if group.id not in keep:
                    oscloud.gone(conn.network.delete_security_group, group.id)
            for info in infos:
                for group_id in info.get("security_groups", {}).values():
                    oscloud.gone(conn.network.delete_security_group, group_id)
            network_ids = {n.id for n in conn.network.networks(tags=tags)} - keep
            network_ids |= {i["network_id"] for i in infos
                            if i.get("network_id") and not i.get("operator_network")}
            for network_id in network_ids:
                self._delete_network(conn, network_id)

    @staticmethod
    def _delete_load_balancer(conn, lb_id, wait=True):
        oscloud.delete_load_balancer(conn, lb_id)
        if wait:
            oscloud.load_balancer_gone(conn, lb_id, oscloud.timeout("delete"))

    @staticmethod
    def _delete_subnet(conn, subnet_id):
        oscloud.retry_conflicts(lambda: oscloud.gone(conn.network.delete_subnet, subnet_id),
                                f"deleting subnet {subnet_id}", oscloud.timeout("delete"))

    @staticmethod
    def _delete_network(conn, network_id):
        oscloud.retry_conflicts(lambda: oscloud.gone(conn.network.delete_network, network_id),
                                f"deleting network {network_id}", oscloud.timeout("delete"))

    # -- helpers -----------------------------------------------------------------

    def _parallel(self, action, items, step=None, progress=no_progress):
        """:func:`~cdnaas.ro.vim.base.run_all` in this driver's pool."""
        return run_all(self.pool, action, items, step, progress)

    @staticmethod
    def _vim_regions(sig):
        return sorted({r.vim_region for r in sig.regions}, key=str)

    def _deployment(self, sig, record, addresses):
        instances = []
        for vnf in sig.vnfs:
            info = record["regions"][vnf.region]
            if vnf.role == "load_balancer":
                instances.append(translate.vnf_instance(vnf, info["lb_id"], info["vip_address"]))
            else:
                instances.append(translate.vnf_instance(
                    vnf, record["servers"][vnf.name]["server_id"], addresses[vnf.name]))
        endpoints = {r.name: record["regions"][r.name]["vip_address"] for r in sig.regions}
        dns = [i.address for i in instances if i.role == "dns"]
        return Deployment(deployment_id=sig.vcdn_id, driver=self.name, vnfs=instances,
                          entry_point=EntryPoint(hostname=sig.hostname, dns_servers=dns),
                          region_endpoints=endpoints, resources=record)


def _balancer_gone(conn, lb_id):
    """Whether Octavia balancer ``lb_id`` is gone (or going: DELETED, PENDING_DELETE)."""
    return oscloud.load_balancer_status(conn, lb_id) in ("DELETED", "PENDING_DELETE")


def _port_ids(entry):
    """The ports of a server's record ``entry``: its own, then its legs'."""
    return [entry["port_id"], *entry.get("legs", {}).values()]


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


def _https_policy_changed(previous, sig):
    """Whether going from ``previous`` to ``sig`` changes what the balancers' listeners
    carry of the HTTPS policy: the policy, or the names its L7 redirects match, or whether
    they let ACME challenges through (:func:`.plan.http_l7_policies`)."""
    policies = [(s.service.get("https_policy"),
                 plan.http_l7_policies(s.service.get("https_policy"), served_names(s),
                                       # a pool's name alike for both: only the actions count
                                       acme_pool="http" if _acme_answered(s) else None))
                for s in (previous, sig)]
    return policies[0] != policies[1]


def _acme_answered(sig):
    """Whether the caches of ``sig`` answer ACME HTTP-01 challenges (its certificate is
    managed: :func:`cdnaas.common.challenges.thumbprint_of`).

    :raises DeploymentFailed: its thumbprint is refused.
    """
    try:
        return challenges.thumbprint_of(sig.service) is not None
    except errors.BadRequest as exc:
        raise DeploymentFailed(exc.message) from None


def _balancer_name(sig, region):
    """The name of ``region``'s Octavia balancer (and of its HTTP listener and pool)."""
    lb_vnf = sig.vnfs_in(region, "load_balancer")
    return plan.resource_name(sig.vcdn_id, lb_vnf[0].name if lb_vnf else region)


def _pools(conn, lb):
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


def _pool_ids(info):
    """The pools of a region's balancer that take its caches as members (HTTP, HTTPS)."""
    return [info[k] for k in ("pool_id", "tls_pool_id") if info.get(k)]


def _set_members(conn, info, members):
    """Make ``members`` the members of each pool of region ``info``'s balancer: one batch
    call per pool, each once the balancer is ACTIVE (Octavia locks it during a batch)."""
    oscloud.load_balancer_active(conn, info["lb_id"], oscloud.timeout("lb"))
    for pool_id in _pool_ids(info):
        oscloud.batch_update_members(conn, pool_id, members)
        oscloud.load_balancer_active(conn, info["lb_id"], oscloud.timeout("lb"))


def _rebuild(conn, sig, vnf, server_id, image_id, user_data):
    """Ask Nova to rebuild ``vnf``'s server from ``image_id`` with ``user_data``: the same
    server, ports, addresses and compute host; a fresh disk (what it cached is gone)."""
    conn.compute.rebuild_server(server_id, image_id, user_data=rebuild.encoded(user_data),
                                metadata=_metadata(sig, vnf, user_data))


def _rebuild_back(conn, sig, vnf, server_id, image_id, user_data):
    """The undo of a rebuild: :func:`_rebuild` with what the server had, then wait for it."""
    _rebuild(conn, sig, vnf, server_id, image_id, user_data)
    oscloud.servers_active(conn, [server_id], plan.vcdn_tag(sig.vcdn_id), oscloud.timeout("boot"))


def _metadata(sig, vnf, user_data):
    """Nova metadata of ``vnf``'s server booted or rebuilt with ``user_data``."""
    return {"cdnaas_vcdn": sig.vcdn_id[:255], "cdnaas_vnf": vnf.name, "cdnaas_role": vnf.role,
            rebuild.METADATA_KEY: rebuild.digest(user_data)}


def _asked(call, resource_id):
    """``call(resource_id)``, or None when the cloud cannot tell (logged); a refusal
    (403) is raised for the caller to remember."""
    from openstack import exceptions
    try:
        return call(resource_id)
    except exceptions.ForbiddenException:
        raise
    except exceptions.SDKException as exc:  # e.g. 409: the server is not running
        LOG.info("no figures for %s: %s", resource_id, _words(exc))
        return None


def _find_image(conn, name, vim_region):
    """Id of the active Glance image named (or else tagged) ``name``, the newest if several."""
    images = [i for i in conn.image.images(name=name) if i.status == "active"]
    if not images:
        images = [i for i in conn.image.images(tag=name) if i.status == "active"]
    if not images:
        raise VimError(f"image {name!r} not found in Glance (region {vim_region or 'default'}); "
                       f"register it: cdnaas image register FILE --name {name}")
    return max(images, key=lambda i: i.created_at or "").id


def _find_flavor(conn, vcpus, ram_mb):
    """Id of the smallest flavor with ``vcpus`` and ``ram_mb``; created when allowed."""
    flavors = [translate.flavor_tuple(f) for f in conn.compute.flavors(details=True)]
    chosen = plan.pick_flavor(flavors, vcpus, ram_mb)
    if chosen is not None:
        return chosen[0]
    if not config.setting("CDNAAS_OS_CREATE_FLAVORS"):
        raise VimError(f"no flavor with {vcpus} vCPUs and {ram_mb} MB of RAM; create one or "
                       "set CDNAAS_OS_CREATE_FLAVORS=1 (needs the admin role)")
    name = plan.flavor_name(vcpus, ram_mb)
    existing = oscloud.found(conn.compute.find_flavor, name)
    if existing is not None:
        return existing.id
    disk = config.setting("CDNAAS_OS_FLAVOR_DISK_GB")
    LOG.info("creating flavor %s (%d vCPUs, %d MB, %d GB)", name, vcpus, ram_mb, disk)
    return conn.compute.create_flavor(name=name, vcpus=vcpus, ram=ram_mb, disk=disk,
                                      is_public=True).id


def _check_measured_vcpus(conn, vnf):
    """Refuse to measure ``vnf`` on a server of more vCPUs than planned (the smallest flavor
    that fits may have more): a calibration's figures are per planned vCPU.

    :raises VimError: its flavor has other vCPUs, naming the flavor to create.
    """
    flavor = conn.compute.get_server(vnf.resource_id).flavor
    vcpus = getattr(flavor, "vcpus", None)
    if vcpus is not None and vcpus != vnf.vcpus:
        raise VimError(
            f"{vnf.name} runs on flavor {flavor.name} of {vcpus} vCPUs, not the {vnf.vcpus} it "
            f"is measured for (the smallest flavor that fits its RAM has more): create one of "
            f"{vnf.vcpus} vCPUs and {flavor.ram} MB (e.g. "
            f"{plan.flavor_name(vnf.vcpus, flavor.ram)}) and measure again")


def _resolve(origin):
    """The IPv4 address caches connect to for ``origin`` (an address stays as is).

    :raises VimError: the host does not resolve, resolves to a loopback address (in a
        server of the cloud, the server itself), or to one the operator's origin policy
        refuses.
    """
    host = origin.host
    try:
        address = str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        try:
            address = socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0]
        except socket.gaierror as exc:
            raise VimError(f"origin host {host} does not resolve here: {exc}") from None
    if ipaddress.ip_address(address).is_loopback:
        raise VimError(f"origin {host} is a loopback address, which a server of the cloud "
                       "reaches as itself (a calibration's sample origin is served at "
                       "CDNAAS_CALIBRATION_ORIGIN_HOST: set it to RO's address as the "
                       "cloud's servers reach it)")
    check_origin_policy(origin, [address])
    return address


def _resolve_secondary(sig):
    """:func:`_resolve` of the vCDN's secondary origin (None: it has none)."""
    secondary = origins.secondary_origin(sig.service)
    return None if secondary is None else _resolve(secondary)


def _words(exc):
    """The message of ``exc`` as an operator should read it (openstacksdk's details first)."""
    return str(oscloud.translate_error(exc, "OpenStack")) if not isinstance(exc, VimError) \
        else str(exc)


def _copy(value):
    import json
    return json.loads(json.dumps(value))
