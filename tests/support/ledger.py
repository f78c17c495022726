"""The ledger on the local driver: SO's reservations = the VNFs RO reports = what runs.

Three views of a stack's vCDNs, each read from its own source:

- **SO**: the reservations of each vCDN per host, and where each VNF of every SIG the
  SO knows for it (its current one and those of its operations) was placed, read from
  SO's tables (so they can be read while SO is down);
- **RO**: the VNFs of each deployment (``GET /ro/v1/deployments``);
- **this machine**: the network namespaces, CPU groups, bridges and processes the local
  driver runs for the stack's RO (its owner id).

A stack handed to these functions has ``so_db`` (SO's :class:`~cdnaas.db.engine.Database`),
``ro`` (a :class:`~cdnaas.common.clients.RoClient`) and ``env`` (the services'
environment), as :func:`tests.support.stack.running_stack` and a fixture give them.
"""
import re
from pathlib import Path

from sqlalchemy import select

from cdnaas.cli import stack as stacks
from cdnaas.common import errors
from cdnaas.ro.vim.local import cgroups, network
from cdnaas.so import operations, states
from cdnaas.so.models import Instance, Operation, Reservation


def so_view(stack, vcdn_id):
    """``(reserved {host: vcpus}, {vnf: (host, vcpus)} of every SIG the SO knows)`` from the
    SO's own tables (readable while the SO is down)."""
    with stack.so_db.sessions() as session:
        rows = session.scalars(select(Reservation).where(Reservation.instance_id == vcdn_id))
        reserved = {}
        for row in rows:
            reserved[row.host_name] = reserved.get(row.host_name, 0) + row.vcpus
        instance = session.get(Instance, vcdn_id)
        sigs = [o.previous_sig for o in session.scalars(select(Operation).where(
            Operation.instance_id == vcdn_id).order_by(Operation.created_at)) if o.previous_sig]
        sigs += [instance.sig] if instance is not None and instance.sig else []
    # the latest SIG places a VNF: a name a scale-in freed may come back on another host
    placed = {v["name"]: (v["host"], v["vcpus"]) for sig in sigs for v in sig["vnfs"]}
    return reserved, placed


def real_vnfs(vcdn_id):
    """Names of the VNFs of ``vcdn_id`` that run here: its namespaces."""
    return {parsed[2] for parsed in map(network.parse_namespace, network.list_namespaces())
            if parsed and parsed[1] == vcdn_id}


def per_host(names, placed):
    hosts = {}
    for name in names:
        host, vcpus = placed[name]
        hosts[host] = hosts.get(host, 0) + vcpus
    return hosts


def assert_covered(stack, vcdn_id):
    """What runs is reserved: no host carries more of the vCDN than the SO holds for it."""
    reserved, placed = so_view(stack, vcdn_id)
    running = real_vnfs(vcdn_id)
    assert running <= set(placed), f"VNFs the SO never planned run: {running - set(placed)}"
    for host, vcpus in per_host(running, placed).items():
        assert vcpus <= reserved.get(host, 0), (host, vcpus, reserved)


def assert_agreed(stack, vcdn_id):
    """SO's reservations = what RO says runs = what runs; nothing left of a vCDN gone."""
    reserved, placed = so_view(stack, vcdn_id)
    try:
        deployment = stack.ro.get_deployment(vcdn_id)
    except errors.NotFound:
        deployment = operations.gone(vcdn_id)
    said = {v.name for v in deployment.vnfs}
    assert deployment.status in ("ACTIVE", "DELETED", "ERROR"), deployment
    assert real_vnfs(vcdn_id) == said
    assert reserved == per_host(said, placed)
    if not said:
        assert [g for g in cgroups.names() if vcdn_id in g] == []
        assert [b for b in network.list_bridges() if b[2] == vcdn_id] == []
    return deployment


def owner(stack):
    """The owner id the stack's RO stamps on what the local driver makes."""
    return network.owner(stacks.database_url_of(stack.env, "ro"))


def running(stack):
    """``{vcdn id: {vnf names}}`` of what runs here for the stack's RO, from each source:
    ``namespaces``, ``cgroups``, ``processes`` (nginx masters and dnsmasq, by the VNF
    folder in their command line; a VNF counts once one of its processes lives in its CPU
    group), and ``bridges`` (``{vcdn id: {regions}}``)."""
    own = owner(stack)
    found = {"namespaces": {}, "cgroups": {}, "processes": {}, "bridges": {}}
    for parsed in map(network.parse_namespace, network.list_namespaces()):
        if parsed and parsed[0] == own:
            found["namespaces"].setdefault(parsed[1], set()).add(parsed[2])
    for group in cgroups.names():
        parts = group.split("_")
        if len(parts) == 3 and parts[0] == own:
            found["cgroups"].setdefault(parts[1], set()).add(parts[2])
    for pid, vcdn_id, vnf in vnf_processes(stack):
        if pid in cgroups.pids(f"{own}_{vcdn_id}_{vnf}"):
            found["processes"].setdefault(vcdn_id, set()).add(vnf)
    for _name, bridge_owner, deployment_id, region in network.list_bridges():
        if bridge_owner == own:
            found["bridges"].setdefault(deployment_id, set()).add(region)
    return found


def vnf_processes(stack):
    """``[(pid, vcdn id, vnf name)]`` of the processes whose command line names a VNF folder
    of the stack's RO (nginx masters and dnsmasq), in a CPU group or not."""
    root = re.escape(str(Path(stack.env["CDNAAS_STATE_DIR"]) / "local" / owner(stack)))
    folder = re.compile(rf"{root}/([^/\s]+)/([^/\s]+)/")
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile
            continue
        match = folder.search(text)
        if match:
            found.append((int(cmdline.parent.name), match[1], match[2]))
    return found


def leftovers(stack):
    """What runs here of the stack's RO, whatever RO says: ``{"namespaces", "cgroups",
    "bridges", "processes"}``, each a sorted list of names (processes: ``pid vcdn/vnf``).
    Empty lists once every vCDN is deleted: anything else leaked."""
    own = owner(stack)
    return {"namespaces": sorted(ns for ns in network.list_namespaces()
                                 if (parsed := network.parse_namespace(ns)) and parsed[0] == own),
            "cgroups": sorted(g for g in cgroups.names() if g.startswith(f"{own}_")),
            "bridges": sorted(b[0] for b in network.list_bridges() if b[1] == own),
            "processes": sorted(f"{pid} {vcdn_id}/{vnf}"
                                for pid, vcdn_id, vnf in vnf_processes(stack))}


def assert_ledger(stack):
    """For every vCDN of the stack: SO's reservations, per host, are those of the VNFs RO
    reports, and exactly those VNFs run here (namespace, CPU group, a live process), on
    the bridges of their regions; nothing runs of a vCDN RO reports nothing of.

    vCDNs ``SCHEDULED`` (capacity reserved, nothing deployed yet) are left out.

    :returns: ``{vcdn id: {vnf names}}`` RO reports.
    """
    said = {d.id: d for d in stack.ro.deployments(live=True) if d.vnfs}
    with stack.so_db.sessions() as session:
        reserving = set(session.scalars(
            select(Reservation.instance_id).join(Instance, Instance.id == Reservation.instance_id)
            .where(Instance.state != states.SCHEDULED).distinct()))
    assert reserving == set(said), (f"reserved without VNFs: {reserving - set(said)}; "
                                    f"VNFs without reservations: {set(said) - reserving}")
    here = running(stack)
    vnfs = {vcdn_id: {v.name for v in d.vnfs} for vcdn_id, d in said.items()}
    for source in ("namespaces", "cgroups", "processes"):
        assert here[source] == vnfs, f"{source} here differ from RO's VNFs: {here[source]} != {vnfs}"
    assert here["bridges"] == {vcdn_id: set(d.region_endpoints) for vcdn_id, d in said.items()}
    for vcdn_id, deployment in said.items():
        reserved, placed = so_view(stack, vcdn_id)
        assert reserved == per_host(vnfs[vcdn_id], placed), (
            f"{vcdn_id}: SO reserves {reserved}, RO's VNFs take "
            f"{per_host(vnfs[vcdn_id], placed)}", deployment.vnfs)
    return vnfs
