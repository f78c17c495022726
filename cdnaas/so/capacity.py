"""Free capacity of hosts over a time window, and reservations taken from a SIG.

Callers hold the hosts' rows locked (``lock_hosts``) from reading free
capacity to writing reservations, in one transaction, so two plans can never
take the same vCPUs: ``SELECT ... FOR UPDATE`` on PostgreSQL, and on SQLite
the write lock every transaction takes at ``BEGIN IMMEDIATE``.
"""
import collections

from sqlalchemy import delete, func, select

from cdnaas.common import errors
from cdnaas.common.flavor import HostCapacity
from cdnaas.so.models import Host, Reservation


def lock_hosts(session, region_names):
    """Enabled and disabled hosts of ``region_names``, locked until the transaction ends."""
    query = select(Host).where(Host.region_name.in_(region_names)).order_by(Host.name)
    return session.scalars(query.with_for_update()).all()


def reserved(session, host_names, starts_at, ends_at, exclude_instance=None):
    """``{host: (vcpus, ram_mb)}`` reserved over any part of [starts_at, ends_at)."""
    query = (select(Reservation.host_name, func.sum(Reservation.vcpus), func.sum(Reservation.ram_mb))
             .where(Reservation.host_name.in_(host_names),
                    Reservation.starts_at < ends_at, Reservation.ends_at > starts_at)
             .group_by(Reservation.host_name))
    if exclude_instance:
        query = query.where(Reservation.instance_id != exclude_instance)
    return {name: (int(cpu), int(ram)) for name, cpu, ram in session.execute(query)}


def free_capacity(session, hosts, starts_at, ends_at, exclude_instance=None):
    """``{region: [HostCapacity]}`` of enabled ``hosts`` over the window."""
    taken = reserved(session, [h.name for h in hosts], starts_at, ends_at, exclude_instance)
    by_region = collections.defaultdict(list)
    for host in hosts:
        if not host.enabled:
            continue
        cpu, ram = taken.get(host.name, (0, 0))
        by_region[host.region_name].append(HostCapacity(
            name=host.name, free_vcpus=host.vcpus - cpu, free_ram_mb=host.ram_mb - ram,
            vcpus=host.vcpus, ram_mb=host.ram_mb, idle_watts=host.idle_watts,
            peak_watts=host.peak_watts))
    return by_region


def reserve(session, instance_id, sig, starts_at, ends_at, also=None):
    """Replace ``instance_id``'s reservations with what ``sig`` places on each host.

    :param also: the SIG that runs while ``sig`` is being applied (an update's previous
        one): its VNFs that ``sig`` drops stay reserved too, since they run until the
        update ends; the runner then reserves the SIG that serves.
    """
    release(session, instance_id)
    kept = {v.name for v in sig.vnfs}
    per_host = _per_host(list(sig.vnfs) + [v for v in (also.vnfs if also else [])
                                           if v.name not in kept])
    for host, (cpu, ram) in sorted(per_host.items()):
        session.add(Reservation(instance_id=instance_id, host_name=host, vcpus=cpu, ram_mb=ram,
                                starts_at=starts_at, ends_at=ends_at))


def _per_host(vnfs):
    """``{host: [vcpus, ram_mb]}`` the placed ``vnfs`` take."""
    per_host = collections.defaultdict(lambda: [0, 0])
    for vnf in vnfs:
        if vnf.host:
            per_host[vnf.host][0] += vnf.vcpus
            per_host[vnf.host][1] += vnf.ram_mb
    return per_host


def check_room(session, sig, starts_at, ends_at, exclude_instance):
    """Refuse unless ``sig``'s VNFs, on the hosts they run on, fit what others reserve
    over the window (a lease made longer keeps its VNFs where they are). Locks the hosts
    of ``sig``'s regions, as :func:`lock_hosts`.

    :raises Conflict: naming each region short of vCPUs or RAM, and by how much.
    """
    hosts = {h.name: h for h in lock_hosts(session, [r.name for r in sig.regions])}
    taken = reserved(session, list(hosts), starts_at, ends_at, exclude_instance)
    missing = collections.defaultdict(lambda: [0, 0])
    for name, (cpu, ram) in _per_host(sig.vnfs).items():
        host = hosts[name]
        used = taken.get(name, (0, 0))
        missing[host.region_name][0] += max(0, cpu + used[0] - host.vcpus)
        missing[host.region_name][1] += max(0, ram + used[1] - host.ram_mb)
    short = {region: lack for region, lack in sorted(missing.items()) if any(lack)}
    if short:
        problems = [f"region {region} lacks {cpu} vCPUs and {ram} MB of RAM"
                    for region, (cpu, ram) in short.items()]
        raise errors.Conflict(f"not enough capacity until the new lease end: {'; '.join(problems)}"
                              " (other vCDNs reserved it); choose an earlier end",
                              field="lease.end",
                              details=[{"field": "lease.end", "region": region,
                                        "missing_vcpus": cpu, "missing_ram_mb": ram,
                                        "problem": problem}
                                       for (region, (cpu, ram)), problem
                                       in zip(short.items(), problems)])


def release(session, instance_id):
    """Drop every reservation of ``instance_id``."""
    session.execute(delete(Reservation).where(Reservation.instance_id == instance_id))


def check_fits(hosts_capacity, sig):
    """Raise ``ValueError`` if ``sig`` puts more on a host than is free (a plugin bug)."""
    free = {h.name: [h.free_vcpus, h.free_ram_mb]
            for hosts in hosts_capacity.values() for h in hosts}
    for vnf in sig.vnfs:
        if vnf.host not in free:
            raise ValueError(f"plugin placed {vnf.name} on unknown or disabled host {vnf.host}")
        free[vnf.host][0] -= vnf.vcpus
        free[vnf.host][1] -= vnf.ram_mb
        if free[vnf.host][0] < 0 or free[vnf.host][1] < 0:
            raise ValueError(f"plugin over-committed host {vnf.host} with {vnf.name}")
