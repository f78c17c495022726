"""An origin shield on OpenStack: one Nova server in its region, with its own port there
and a port on each other region's network (a leg, :func:`.plan.leg_name`, at host ``.4``:
:mod:`cdnaas.vnf.subnet`) where that region's caches fetch from; recorded as
``servers[shield]["legs"] = {region: port id}``.

An update that adds a region gives the running shield a leg there (:func:`add_legs`: a
port attached to its server), before the shield is rebuilt to listen on it and the
region's caches boot; one that removes a region takes the leg away (:func:`delete_leg`)
once the region's caches are gone and the shield is rebuilt without it. An update
neither adds, removes nor moves the shield itself (:func:`check_change`).
"""
import ipaddress

from cdnaas.ro.vim.base import DeploymentFailed
from cdnaas.ro.vim.openstack import cloud as oscloud
from cdnaas.ro.vim.openstack import plan
from cdnaas.vnf import subnet


def legs(sig, record, vnf):
    """``[(region, leg name)]``: the regions of ``sig`` on whose networks origin shield
    ``vnf`` has a port besides its own region's; none for another VNF, nor on the
    operator's network (``CDNAAS_OS_NETWORK``: every region's then)."""
    if vnf.role != "shield" or record["regions"][vnf.region].get("operator_network"):
        return []
    return [(r.name, plan.leg_name(vnf, r.name)) for r in sig.regions if r.name != vnf.region]


def listened(sig, record, vnf):
    """The names of the legs origin shield ``vnf`` listens on: ``sig``'s (:func:`legs`) and
    those ``record`` gives it in regions ``sig`` lacks (their caches fetch from it until
    they are gone)."""
    names = [leg for _region, leg in legs(sig, record, vnf)]
    recorded = record["servers"].get(vnf.name, {}).get("legs", {})
    return names + [plan.leg_name(vnf, r) for r in recorded
                    if plan.leg_name(vnf, r) not in names]


def leaving_addresses(sig, record):
    """``{leg name: address}`` of the legs ``record`` gives ``sig``'s origin shield in
    regions ``sig`` lacks (being removed): each at the shield's host of its region's
    recorded prefix."""
    kept = {r.name for r in sig.regions}
    return {plan.leg_name(vnf, region): str(ipaddress.ip_network(
        record["regions"][region]["cidr"])[subnet.SHIELD_HOST])
        for vnf in sig.vnfs_in(role="shield")
        for region in record["servers"].get(vnf.name, {}).get("legs", {}) if region not in kept}


def fetched_from(sig, record, addresses, region):
    """Where ``region``'s caches fetch from: the origin shield's address on its network;
    None without a shield."""
    for shield in sig.vnfs_in(role="shield"):
        return addresses[dict(legs(sig, record, shield)).get(region, shield.name)]
    return None


def add_legs(conn, sig, record, vnf, addresses, undo):
    """Give the running origin shield ``vnf`` a leg in each region of ``sig`` it has none
    in (made already, as :func:`legs` says): a port at the leg's address in that region's
    shield security group, tagged as every port, attached to its server (Nova's interface
    attach) and recorded in ``record``; ``undo`` detaches and deletes each."""
    entry = record["servers"][vnf.name]
    tags = plan.tags(sig.vcdn_id)
    for region, leg in legs(sig, record, vnf):
        if region in entry.get("legs", {}):
            continue
        port = conn.network.create_port(**plan.port_spec(
            sig, leg, "shield", record["regions"][region], addresses, tags))
        undo.push(f"port of {leg}", oscloud.gone, conn.network.delete_port, port.id)
        for untagged in plan.untagged([port], tags):
            conn.network.set_tags(untagged, tags)
        conn.compute.create_server_interface(entry["server_id"], port_id=port.id)
        undo.push(f"{leg} on its server", detach, conn, entry["server_id"], port.id)
        entry.setdefault("legs", {})[region] = port.id


def detach(conn, server_id, port_id):
    """Detach port ``port_id`` from server ``server_id`` and wait until Neutron shows it
    unbound (Nova detaches asynchronously); a server or port gone already is fine."""
    oscloud.gone(conn.compute.delete_server_interface, port_id, server=server_id)

    def unbound():
        port = oscloud.found(conn.network.find_port, port_id)
        return port is None or port.device_id != server_id
    oscloud.wait_until(unbound, f"port {port_id} detached from server {server_id}",
                       oscloud.timeout("delete"))


def delete_leg(conn, server_id, port_id):
    """Detach leg ``port_id`` from the shield's server ``server_id``, then delete it."""
    detach(conn, server_id, port_id)
    oscloud.gone(conn.network.delete_port, port_id)


def repair_legs(conn, sig, record, vnf, addresses, undo):
    """Give the recorded origin shield ``vnf`` back the legs an interrupted update took
    from it (it was removing their regions): a recorded leg that is gone or detached is
    deleted and made again (:func:`add_legs`), ``record`` taking the new port's id."""
    entry = record["servers"][vnf.name]
    for region, port_id in sorted(entry.get("legs", {}).items()):
        port = oscloud.found(conn.network.find_port, port_id)
        if port is None or port.device_id != entry["server_id"]:
            oscloud.gone(conn.network.delete_port, port_id)
            del entry["legs"][region]
    add_legs(conn, sig, record, vnf, addresses, undo)


def check(sig, outcome="nothing was created"):
    """Refuse an origin shield whose legs cannot reach every region: Neutron networks are
    an OpenStack region's (``outcome``: what the message ends with)."""
    vim_regions = {r.vim_region for r in sig.regions}
    if sig.vnfs_in(role="shield") and len(vim_regions) > 1:
        raise DeploymentFailed(
            "an origin shield has a leg on each region's network, and networks are an "
            f"OpenStack region's: these regions are in {len(vim_regions)} "
            f"({', '.join(sorted(str(v) for v in vim_regions))}); use a flavor without a "
            f"shield or regions of one OpenStack region; {outcome}")


def check_change(deployment, sig, moved, regions_changed, previous):
    """Refuse, before anything changes, what an update cannot do with an origin shield:
    add or remove it, move it to another region (the vCDN's default region changes: it
    would need a new server), change the regions of a vCDN with one without the SIG it
    serves (``previous``: the shield is rebuilt), or reach a region in another OpenStack
    region (:func:`check`)."""
    before = {v.name: v.region for v in deployment.vnfs if v.role == "shield"}
    after = {v.name: v.region for v in sig.vnfs_in(role="shield")}
    unchanged = "nothing was changed"
    if sorted(before) != sorted(after):
        raise DeploymentFailed("on OpenStack an update does not add or remove an origin "
                               "shield: deploy a new vCDN of the flavor wanted; " + unchanged)
    moving = sorted(set(after) & moved)
    if moving:
        name = moving[0]
        why = (f"region {before[name]}, where it runs, is removed: keep {before[name]} in the "
               "vCDN (with a small demand)" if before[name] not in {r.name for r in sig.regions}
               else f"the vCDN's default region becomes {after[name]} (the operator's "
               f"default, added): leave {after[name]} out")
        raise DeploymentFailed(
            "on OpenStack an update does not move an origin shield, which this change does "
            f"to {name} ({before[name]} to {after[name]}): {why}, or deploy a new vCDN with "
            f"the regions wanted; {unchanged}")
    if after and regions_changed and previous is None:
        raise DeploymentFailed("changing the regions of a vCDN with an origin shield rebuilds "
                               "the shield, which needs the SIG it serves (RO passes it); "
                               + unchanged)
    check(sig, unchanged)
