"""Addresses of a local deployment's VNFs: each region a bridge with its own /24 (gateway
.1, load balancer .2, DNS .3, origin shield .4, caches from .10), multi-homed VNFs (DNS,
origin shield) with a leg on every region's bridge, and where the VNFs reach origins
and RO (this machine, at their bridge's gateway)."""
import ipaddress
import socket
import threading
import time

from cdnaas.common import config
from cdnaas.ro.vim import hosts
from cdnaas.ro.vim.base import VimError, check_origin_policy
from cdnaas.ro.vim.local import network
from cdnaas.ro.vim.local.system import run
from cdnaas.vnf.subnet import FIRST_CACHE_HOST, LB_HOST, SHIELD_HOST

HTTP_PORT = 80
HTTPS_PORT = 443
LOCAL_ADDRESSES_SECONDS = 1.0  # how long :func:`local_addresses` keeps what it read
_LOCAL_ADDRESSES = [float("-inf"), []]
_LOCAL_ADDRESSES_LOCK = threading.Lock()


def assign(sig, layout, kept):
    """Addresses of the SIG's VNFs: kept caches stay, new ones take the lowest free."""
    addresses = {}
    for region, info in layout.items():
        subnet = ipaddress.ip_network(info["subnet"])
        # An address held by any VNF of the deployment stays taken, even if that VNF is
        # being removed: a replacement must not answer while the old one still drains.
        taken = {a for address in kept.values()
                 for a in (address if isinstance(address, list) else [address])}
        free = (str(a) for a in list(subnet.hosts())[FIRST_CACHE_HOST - 1:]
                if str(a) not in taken)
        for vnf in sig.vnfs_in(region):
            if vnf.role == "load_balancer":
                addresses[vnf.name] = str(subnet.network_address + LB_HOST)
            elif vnf.role == "cache":
                addresses[vnf.name] = kept.get(vnf.name) or next(free)
    # DNS VNFs and the shield are multi-homed: an address on every region, in SIG order
    for vnf in sig.vnfs_in(role="dns") + sig.vnfs_in(role="shield"):
        host = SHIELD_HOST if vnf.role == "shield" else hosts.dns_host(sig, vnf)
        addresses[vnf.name] = [
            str(ipaddress.ip_network(layout[r.name]["subnet"]).network_address + host)
            for r in sig.regions]
    return addresses


def leg(sig, legs, region):
    """The address of a multi-homed VNF (DNS, shield) on ``region``'s bridge (``legs`` in
    the SIG's region order)."""
    return legs[[r.name for r in sig.regions].index(region)]


def legs_of(sig, layout, addresses, routes=lambda region: []):
    """The links of a multi-homed VNF (DNS, shield) as :func:`.network.create_namespaces`
    takes them: its address (``addresses``, in the SIG's region order) on each region's
    bridge, with the on-link routes ``routes(region)`` gives."""
    return [(layout[r.name]["bridge"], cidr(address, layout[r.name]), routes(r))
            for r, address in zip(sig.regions, addresses)]


def add_legs(namespace, links):
    """Give the running multi-homed VNF in ``namespace`` a leg for each of ``links`` (as
    :func:`legs_of` makes them) whose address it lacks, numbered after its last one;
    return its legs then (:func:`.network.links_of`)."""
    legs = network.links_of(namespace)
    missing = [link for link in links if link[1].split("/")[0] not in legs]
    if not missing:
        return legs
    network.add_links(namespace, missing,
                      first=1 + max((int(name[3:]) for name in legs.values()), default=-1))
    return network.links_of(namespace)


def stale_legs(legs, kept):
    """``ip`` lines deleting those of ``legs`` (:func:`.network.links_of`) whose address is
    not one of ``kept``."""
    return [f"link del {name}" for address, name in legs.items() if address not in kept]


def managed_address(sig, vnf, addresses):
    """Where RO manages ``vnf``: its address, or a multi-homed one's leg in its region."""
    address = addresses[vnf.name]
    return leg(sig, address, vnf.region) if isinstance(address, list) else address


def cidr(address, region_layout):
    return f"{address}/{ipaddress.ip_network(region_layout['subnet']).prefixlen}"


def members(deployment, region):
    """``[(name, address)]`` of the caches ``deployment`` records in ``region``."""
    return [(v.name, v.address) for v in deployment.vnfs
            if v.region == region and v.role == "cache"]


def origin_address(origin, region_layout):
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
    local = {str(a) for a in local_addresses()}
    if any(ipaddress.ip_address(a).is_loopback or a in local for a in resolved):
        return str(network.gateway(ipaddress.ip_network(region_layout["subnet"])))
    raise VimError(f"origin {host} is not on this machine; the local driver reaches only "
                   "origins on this machine (listening on all addresses)")


def local_addresses():
    """This machine's IPv4 addresses, read again at most every :data:`LOCAL_ADDRESSES_SECONDS`
    (each of a deployment's caches asks)."""
    with _LOCAL_ADDRESSES_LOCK:
        read_at, addresses = _LOCAL_ADDRESSES
        if time.monotonic() - read_at > LOCAL_ADDRESSES_SECONDS:
            out = run(["ip", "-o", "-4", "addr", "show"])
            addresses = [ipaddress.ip_interface(line.split()[3]).ip for line in out.splitlines()]
            _LOCAL_ADDRESSES[:] = [time.monotonic(), addresses]
        return addresses


def management_sources(address):
    """Who may read the status page of the VNF at ``address``: RO, which reaches it from
    its region bridge's gateway (viewers, balancers and the DNS VNF get 403)."""
    return [str(network.region_gateway(address))]


def add_regions(owner, deployment_id, regions):
    """A bridge for each of ``regions``, on a free /24: ``{region: {bridge, subnet}}``."""
    names = {r: network.bridge_name(owner, deployment_id, r) for r in regions}
    subnets = network.create_bridges(
        [(names[r], network.bridge_alias(owner, deployment_id, r)) for r in regions],
        config.local_pool())
    return {r: {"bridge": names[r], "subnet": str(subnets[names[r]])} for r in regions}


def restore_bridges(owner, deployment_id, layout):
    """This deployment's bridges become exactly those of ``layout``'s regions: others go,
    missing ones come back on their recorded subnet."""
    present = {region: name for name, own, dep, region in network.list_bridges()
               if (own, dep) == (owner, deployment_id)}
    network.delete_bridges([name for region, name in present.items() if region not in layout])
    missing = [r for r in layout if r not in present]
    if missing:
        network.create_bridges(
            [(layout[r]["bridge"], network.bridge_alias(owner, deployment_id, r))
             for r in missing], config.local_pool(),
            subnets={layout[r]["bridge"]: layout[r]["subnet"] for r in missing})
