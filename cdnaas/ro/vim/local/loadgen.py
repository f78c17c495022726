"""The local driver's load generator: wrk and the simulated viewers in a client namespace.

The generator is a client host on the measured VNF's region bridge, with an address of
the VNF subnet (caches route only their own subnet): the last one, ``.254``. While it
runs, the VNF's processes are pinned to the first ``vcpus`` of this machine's CPUs (or
stay on their host's CPU set, where the VNF has one: :func:`.cgroups.pinned_cpus`) and
the generator to the others, so the generator never takes the cache's CPU time (with
no CPU to spare, as a 2-vCPU cache on a 2-core machine, both share every CPU and the
report says ``isolated: false``). Its own CPU time comes from the kernel's accounting
of the child process; the VNF's from its CPU group.
"""
import contextlib
import ipaddress
import json
import logging
import os
import sys
import time

from cdnaas.calibration import viewers, wrk
from cdnaas.ro.vim.base import GeneratorLimit, LoadReport, VimError
from cdnaas.ro.vim.local import cgroups, clients, network

LOG = logging.getLogger(__name__)
#: a generator may overrun its load by this many seconds before it is killed
GRACE_SECONDS = 30


def run(deployment, vnf, group, test):
    """Drive ``test`` at ``vnf`` of ``deployment`` (its CPU group ``group``); see the module doc.

    :raises VimError: the generator failed or printed no report.
    """
    if test.kind not in ("http", "viewers"):
        raise VimError(f"unknown load kind {test.kind!r} (http or viewers)")
    _bridge, subnet = network.find_bridge(deployment.deployment_id, vnf.region)
    address = ipaddress.ip_network(subnet).broadcast_address - 1
    with clients.client(deployment.deployment_id, vnf.region, address) as host, \
            _pinned(cgroups.pids(group), vnf.vcpus, cgroups.pinned_cpus(group)) \
            as generator_cpus:
        before = cgroups.cpu_usage_seconds(group)
        started = time.monotonic()
        if test.kind == "http":
            command, tool = wrk.command(f"http://{vnf.address}{test.path}", test.connections,
                                        test.seconds), wrk.version()
        else:
            command, tool = _viewers_command(vnf.address, test), viewers.TOOL
        status, out, err, cpu = host.run_measured(command, test.seconds + GRACE_SECONDS,
                                                  generator_cpus)
        elapsed = time.monotonic() - started
        after = cgroups.cpu_usage_seconds(group)
    if test.kind == "viewers" and status == viewers.LIMIT_STATUS:
        raise GeneratorLimit((err or out).strip()[-500:])
    if status != 0:
        raise VimError(f"{tool} failed (status {status}): {(err or out).strip()[-500:]}")
    try:
        figures = wrk.parse(out) if test.kind == "http" else json.loads(out)
    except ValueError as exc:
        raise VimError(f"{tool} printed no report: {exc}") from exc
    seconds = figures["seconds"] or elapsed
    return LoadReport(kind=test.kind, seconds=seconds, requests=figures["requests"],
                      errors=figures["errors"], non_2xx=figures["non_2xx"],
                      requests_per_second=round(figures["requests"] / seconds, 1),
                      latency_ms=figures["latency_ms"], generator_cpu_seconds=round(cpu, 3),
                      target_cpu_seconds=None if before is None or after is None
                      else round(after - before, 3),
                      isolated=generator_cpus is not None, tool=tool,
                      windows=figures.get("windows"))


def _viewers_command(address, test):
    return [sys.executable, viewers.__file__, "--address", address, "--path", test.path,
            "--viewers", str(test.connections), "--seconds", str(test.seconds),
            "--chunk-seconds", str(test.chunk_seconds), "--segments", str(test.segments),
            "--window-seconds", str(test.window_seconds),
            "--buffer-chunks", str(test.buffer_chunks)]


@contextlib.contextmanager
def _pinned(pids, vcpus, host_cpus=None):
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
