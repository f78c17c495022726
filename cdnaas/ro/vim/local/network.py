"""Regions as Linux bridges, VNFs as network namespaces, and the names that tie them
to a deployment.

Names carry the owner (which RO made them: a hash of its database URL) and the
deployment id, so a restarted RO can find its strays without touching another
RO's VNFs on the same machine. Kernel interface names are limited to 15
characters, so bridges and veths get short hashed names and the bridge keeps
its full identity in its interface alias.
"""
import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os

from cdnaas.common import config
from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.local.system import ip_batch, run

NS_PREFIX = "cdn_"
ALIAS_PREFIX = "cdnaas"
LOCK_FILE = "/run/lock/cdnaas-local-ipam.lock"
NETNS_DIR = "/run/netns"  # where ``ip netns`` keeps named namespaces
REGION_PREFIX_LEN = 24  # every region bridge's subnet is a /24 of the pool


def owner(database_url=None):
    """Short id of this RO (its database; or of the RO of ``database_url``), stamped on
    everything it creates."""
    return hashlib.sha1((database_url or config.database_url("ro")).encode()).hexdigest()[:6]


def _short(*parts):
    return hashlib.sha1("/".join(parts).encode()).hexdigest()[:10]


def namespace_name(owner_id, deployment_id, vnf):
    return f"{NS_PREFIX}{owner_id}_{deployment_id}_{vnf}"


def parse_namespace(name):
    """``(owner, deployment_id, vnf)`` of one of our namespaces, or None."""
    parts = name.split("_")
    if len(parts) != 4 or f"{parts[0]}_" != NS_PREFIX:
        return None
    return parts[1], parts[2], parts[3]


def bridge_name(owner_id, deployment_id, region):
    return f"cb{_short(owner_id, deployment_id, region)}"


def bridge_alias(owner_id, deployment_id, region):
    return f"{ALIAS_PREFIX} {owner_id} {deployment_id} {region}"


# -- bridges -------------------------------------------------------------------

def list_bridges():
    """``[(name, owner, deployment_id, region)]`` of our bridges."""
    links = json.loads(run(["ip", "-j", "-d", "link", "show", "type", "bridge"]) or "[]")
    found = []
    for link in links:
        words = (link.get("ifalias") or "").split()
        if len(words) == 4 and words[0] == ALIAS_PREFIX:
            found.append((link["ifname"], words[1], words[2], words[3]))
    return found


def find_bridge(deployment_id, region, owner_id=None):
    """``(bridge name, subnet)`` of a deployment's region: the one of RO ``owner_id``, or,
    without it, whichever RO made it.

    :raises VimError: there is none, or (no ``owner_id``) several ROs have a deployment of
        that id here (one may be a stray of an RO that has gone): which one is meant is
        then unknown.
    """
    found = [(name, own) for name, own, dep, reg in list_bridges()
             if dep == deployment_id and reg == region and owner_id in (None, own)]
    if not found:
        raise VimError(f"no bridge for region {region} of deployment {deployment_id}")
    if len(found) > 1:
        raise VimError(f"region {region} of deployment {deployment_id} has a bridge of "
                       f"each of the ROs {', '.join(sorted(own for _n, own in found))} "
                       "here: say which RO's deployment is meant")
    return found[0][0], bridge_subnet(found[0][0])


def bridge_subnet(name):
    addresses = json.loads(run(["ip", "-j", "addr", "show", "dev", name]))
    for info in addresses[0].get("addr_info", []):
        if info.get("family") == "inet":
            return ipaddress.ip_interface(f"{info['local']}/{info['prefixlen']}").network
    raise VimError(f"bridge {name} has no IPv4 subnet")


def create_bridges(wanted, pool, subnets=None):
    """Create one bridge per ``(name, alias)`` in ``wanted``, each with a free /24 of ``pool``
    (or the one ``subnets`` gives it by name: a bridge put back where it was).

    Allocation looks at every address on this machine under a file lock, so two
    RO processes never pick the same subnet. Returns ``{name: subnet}``.
    """
    given = {name: ipaddress.ip_network(net) for name, net in (subnets or {}).items()}
    os.makedirs(os.path.dirname(LOCK_FILE), exist_ok=True)
    with open(LOCK_FILE, "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        used = _used_networks() + list(given.values())
        free = (net for net in ipaddress.ip_network(pool).subnets(new_prefix=REGION_PREFIX_LEN)
                if not any(net.overlaps(u) for u in used))
        subnets, lines = {}, []
        for name, alias in wanted:
            try:
                subnet = given.get(name) or next(free)
            except StopIteration:
                raise VimError(f"address pool {pool} is exhausted") from None
            subnets[name] = subnet
            # A fixed MAC: a bridge otherwise takes its lowest port's MAC, and changes it
            # as VNFs join, leaving their cached ARP entry for the gateway stale.
            lines += [f"link add {name} address {_mac(name)} type bridge",
                      f'link set {name} alias "{alias}"',
                      f"addr add {gateway(subnet)}/{subnet.prefixlen} dev {name}",
                      f"link set {name} up"]
        ip_batch(lines)
    return subnets


def _mac(name):
    """A locally administered, unicast MAC derived from ``name``."""
    digest = hashlib.sha1(name.encode()).digest()[:5]
    return ":".join(f"{b:02x}" for b in (0x02, *digest))


def delete_bridges(names):
    """Remove the bridges ``names`` (one ``ip`` run); one that is gone is fine."""
    ip_batch([f"link del {name}" for name in names], check=False)


def gateway(subnet):
    """The root namespace's address on a region bridge (also where local origins are reached)."""
    return subnet.network_address + 1


def region_gateway(address):
    """:func:`gateway` of the region subnet holding the VNF ``address``: the source address
    RO (in the root namespace) reaches that VNF from, its only management source."""
    return gateway(ipaddress.ip_interface(f"{address}/{REGION_PREFIX_LEN}").network)


def _used_networks():
    used = []
    for link in json.loads(run(["ip", "-j", "addr", "show"]) or "[]"):
        for info in link.get("addr_info", []):
            if info.get("family") == "inet":
                used.append(ipaddress.ip_interface(f"{info['local']}/{info['prefixlen']}").network)
    return used


# -- namespaces ----------------------------------------------------------------

def list_namespaces():
    return [line.split()[0] for line in run(["ip", "netns", "list"]).splitlines() if line.strip()]


def create_namespace(namespace, links):
    """Create ``namespace`` plugged into bridges (see :func:`create_namespaces`)."""
    create_namespaces([(namespace, links)])
    configure_namespace(namespace, links)


def create_namespaces(specs):
    """Create many namespaces and plug each into its bridges, in ONE ``ip`` process.

    :param specs: ``[(namespace, links)]``; links are ``[(bridge, address/prefix,
        [on-link routes])]`` and the n-th link becomes ``eth<n>`` inside. The veth
        peer is created directly in the namespace (no move afterwards). Addresses
        and routes are set by :func:`configure_namespace`.
    """
    lines = []
    for namespace, links in specs:
        lines.append(f"netns add {namespace}")
        lines += _veth_lines(namespace, links)
    ip_batch(_without_stale_veths(lines))


def add_links(namespace, links, first):
    """Plug the running ``namespace`` into more bridges (links as :func:`create_namespaces`):
    the k-th becomes ``eth<first + k>``, configured as :func:`configure_namespace` does."""
    ip_batch(_without_stale_veths(_veth_lines(namespace, links, first)))
    ip_batch(inside_commands(links, first), namespace=namespace)


def links_of(namespace):
    """``{IPv4 address: interface}`` of the ``eth`` links inside ``namespace``."""
    found = {}
    for link in json.loads(run(["ip", "-j", "-n", namespace, "addr", "show"]) or "[]"):
        for info in link.get("addr_info", []):
            if info.get("family") == "inet" and link["ifname"].startswith("eth"):
                found[info["local"]] = link["ifname"]
    return found


def _without_stale_veths(lines):
    """``lines`` preceded by the deletion of every host-side veth they add that exists
    already: a namespace of the same name deleted a moment ago (a deployment undone and
    deployed again) still has its veths while the kernel frees it, in the background or
    once its last process has exited, and ``link add`` would fail on them ("File exists")."""
    adding = [line.split()[2] for line in lines if line.startswith("link add ")]
    if not adding:
        return lines
    present = {line.split(":")[1].strip().split("@")[0]
               for line in run(["ip", "-o", "link", "show"]).splitlines() if ":" in line}
    return [f"link del {name}" for name in adding if name in present] + lines


def _veth_lines(namespace, links, first=0):
    lines = []
    for index, (bridge, address, _routes) in enumerate(links, first):
        host_side = f"cv{_short(namespace, str(index))}"
        # The MAC follows the address, so a VNF put back on its address (a restart)
        # keeps answering to the ARP entries its clients hold.
        mac = _mac(f"{bridge}/{address.split('/')[0]}")
        lines += [f"link add {host_side} type veth peer name eth{index} "
                  f"address {mac} netns {namespace}",
                  f"link set {host_side} master {bridge}", f"link set {host_side} up"]
    return lines


def configure_namespace(namespace, links):
    """Addresses, links up and on-link routes inside ``namespace`` (one ``ip`` process)."""
    ip_batch(inside_commands(links), namespace=namespace)


def inside_commands(links, first=0):
    """``ip -batch`` lines that configure a namespace's links from the inside (the k-th
    of ``links`` is ``eth<first + k>``).

    A route ``default`` is allowed: the bridges have no uplink, so nothing leaves
    the machine.
    """
    inside = ["link set lo up"]
    for index, (_bridge, address, routes) in enumerate(links, first):
        inside += [f"addr add {address} dev eth{index}", f"link set eth{index} up"]
        inside += [f"route add {route} dev eth{index}" for route in routes]
    return inside


def delete_namespaces(namespaces):
    """Kill what still runs in ``namespaces`` and remove them, their veths with them
    (one ``ip`` run); one that is gone is fine."""
    for pid in _pids_in(namespaces):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
    ip_batch([f"netns del {namespace}" for namespace in namespaces], check=False)


def delete_namespace(namespace):
    """See :func:`delete_namespaces`."""
    delete_namespaces([namespace])


def _pids_in(namespaces):
    """Processes whose network namespace is one of ``namespaces`` (as ``ip netns pids``:
    the same nsfs inode as ``/run/netns/<name>``)."""
    wanted = set()
    for namespace in namespaces:
        with contextlib.suppress(FileNotFoundError):
            found = os.stat(f"{NETNS_DIR}/{namespace}")
            wanted.add((found.st_dev, found.st_ino))
    if not wanted:
        return []
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(FileNotFoundError, ProcessLookupError, PermissionError):
                found = os.stat(f"/proc/{entry.name}/ns/net")
                if (found.st_dev, found.st_ino) in wanted:
                    pids.append(int(entry.name))
    return pids
