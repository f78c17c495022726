"""The local driver's load generator: wrk and the simulated viewers in a client namespace.

The generator is a client host on the measured VNF's region bridge, with an address of
the VNF subnet (caches route only their own subnet): the last one, ``.254``. While it
runs, the VNF's processes are pinned to the first ``vcpus`` of this machine's CPUs (or
stay on their host's CPU set, where the VNF has one: :func:`.cgroups.pinned_cpus`) and
the generator to the others, so the generator never takes the cache's CPU time (with
no CPU to spare, as a 2-vCPU cache on a 2-core machine, both share every CPU and the
report says ``isolated: false``). Its own CPU time comes from the kernel's accounting
of the child process; the VNF's from its CPU group. Its host is removed once it holds no
connection (:meth:`.clients.Client.wait_closed`), as a viewer's machine that stays.
"""
import contextlib
import ipaddress
import logging
import os

from cdnaas.calibration import loads
from cdnaas.ro.vim import loadreport
from cdnaas.ro.vim.base import GeneratorLimit, VimError
from cdnaas.ro.vim.local import cgroups, clients, context, network, system

LOG = logging.getLogger(__name__)


def run(deployment, vnf, owner, test):
    """Drive ``test`` at ``vnf`` of ``deployment`` (made by RO ``owner``); see the module doc.

    :raises GeneratorLimit: the viewer simulator cannot drive that many viewers.
    :raises VimError: the test was refused, or the generator failed or printed no report.
    """
    checked = loadreport.checked(test, vnf.address)
    group = context.group(owner, deployment.deployment_id, vnf.name)
    bridge, subnet = network.find_bridge(deployment.deployment_id, vnf.region, owner)
    address = ipaddress.ip_network(subnet).broadcast_address - 1
    with clients.client(deployment.deployment_id, vnf.region, address, owner_id=owner) as host, \
            pinned(cgroups.pids(group), vnf.vcpus, cgroups.pinned_cpus(group)) \
            as generator_cpus:
        before = cgroups.cpu_usage_seconds(group)
        measured = loadreport.Run(*host.run_measured(loads.command(checked),
                                                     loads.timeout(checked), generator_cpus),
                                  tool=loads.tool(test.kind))
        after = cgroups.cpu_usage_seconds(group)
        path = _path(host, vnf.address, bridge, subnet) if measured.status else ""
        host.wait_closed()
    try:
        return loadreport.report(test, measured, None if before is None or after is None
                                 else after - before, isolated=generator_cpus is not None)
    except GeneratorLimit:
        raise
    except VimError as exc:
        raise VimError(f"{exc} ({path})") from exc


def _path(host, target, bridge, subnet):
    """Where the generator ``host`` stood and how it routed to ``target``, said with a
    failed run: a generator that cannot reach its VNF says why."""
    route = system.run(["ip", "-o", "route", "get", target], check=False,
                       namespace=host.namespace).strip() or "no route"
    return (f"generator {host.address} on bridge {bridge} ({subnet}); its route to "
            f"{target}: {route}")


@contextlib.contextmanager
def pinned(pids, vcpus, host_cpus=None):
    """Pin ``pids`` (the VNF) to the first ``vcpus`` CPUs; yield the others for the
    generator, or None when there are none to spare (then nothing is pinned).

    A VNF pinned to its host's CPUs (``host_cpus``) stays there: the generator gets
    the CPUs outside that set."""
    cpus = sorted(os.sched_getaffinity(0))
    if host_cpus:
        spare = set(cpus) - set(host_cpus)
        yield spare or None
        return
    if len(cpus) <= vcpus:
        yield None
        return
    own, spare = set(cpus[:vcpus]), set(cpus[vcpus:])
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.sched_setaffinity(pid, own)
    try:
        yield spare
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.sched_setaffinity(pid, set(cpus))
