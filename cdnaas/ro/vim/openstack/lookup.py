"""What the ``openstack`` driver looks up before it makes anything: the SIG's images and
flavors in each OpenStack region, the addresses its origins resolve to (checked against
the operator's origin policy), and an operator's words for what the cloud answered."""
import ipaddress
import logging
import socket

from cdnaas.common import config
from cdnaas.delivery import origins
from cdnaas.ro.vim.base import DeploymentFailed, RetryableVimError, VimError, check_origin_policy
from cdnaas.ro.vim.openstack import cloud as oscloud
from cdnaas.ro.vim.openstack import plan, translate

LOG = logging.getLogger(__name__)

#: the roles the driver runs as Nova servers (a load balancer is Octavia's)
SERVER_ROLES = ("cache", "shield", "dns")


def prepare(cloud, sig, vnfs):
    """Look up what the servers of ``vnfs`` need (image, flavor, origin address); create
    nothing.

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
                prepared["images"][key] = find_image(conn, vnf.image, vim_region)
            key = (vim_region, vnf.vcpus, vnf.ram_mb)
            if key not in prepared["flavors"]:
                prepared["flavors"][key] = find_flavor(conn, vnf.vcpus, vnf.ram_mb)
        if any(v.role in ("cache", "shield") for v in vnfs):
            prepared["origin_address"] = resolve(sig.origin)
            prepared["secondary_address"] = resolve_secondary(sig)
    except RetryableVimError:
        raise
    except Exception as exc:
        raise DeploymentFailed(f"{words(exc)}; nothing was created") from exc
    return prepared


def find_image(conn, name, vim_region):
    """Id of the active Glance image named (or else tagged) ``name``, the newest if several."""
    images = [i for i in conn.image.images(name=name) if i.status == "active"]
    if not images:
        images = [i for i in conn.image.images(tag=name) if i.status == "active"]
    if not images:
        raise VimError(f"image {name!r} not found in Glance (region {vim_region or 'default'}); "
                       f"register it: cdnaas image register FILE --name {name}")
    return max(images, key=lambda i: i.created_at or "").id


def find_flavor(conn, vcpus, ram_mb):
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


def check_measured_vcpus(conn, vnf):
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


def resolve(origin):
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


def resolve_secondary(sig):
    """:func:`resolve` of the vCDN's secondary origin (None: it has none)."""
    secondary = origins.secondary_origin(sig.service)
    return None if secondary is None else resolve(secondary)


def words(exc):
    """The message of ``exc`` as an operator should read it (openstacksdk's details first)."""
    return str(oscloud.translate_error(exc, "OpenStack")) if not isinstance(exc, VimError) \
        else str(exc)


def asked(call, resource_id):
    """``call(resource_id)``, or None when the cloud cannot tell (logged); a refusal
    (403) is raised for the caller to remember."""
    from openstack import exceptions
    try:
        return call(resource_id)
    except exceptions.ForbiddenException:
        raise
    except exceptions.SDKException as exc:  # e.g. 409: the server is not running
        LOG.info("no figures for %s: %s", resource_id, words(exc))
        return None
