"""Whether a VNF of the local driver is whole: what its health says and a restore mends.

A VNF is healthy when

- its process tree is whole: the master each of its pid files names runs (not a zombie),
  is the daemon's program and is in the VNF's CPU group; an nginx master has workers (its
  children); and the group holds no process of that program outside the masters' trees
  (orphans: the workers of a master that was killed, which go on serving on its ports);
- it runs the configuration RO last wrote: the generation its daemons report
  (:func:`cdnaas.vnf.generation.stamp`: an nginx management listener's
  :data:`~cdnaas.vnf.endpoints.GENERATION_PATH`, a dnsmasq's TXT record of
  :data:`~cdnaas.vnf.endpoints.GENERATION_NAME`) is the one in its config file;
- it answers: HTTP on its management listener (nginx), the vCDN's name (DNS).

A fault of the processes or of the configuration is *lasting*: it does not pass by itself,
unlike a slow answer.
"""
import contextlib
import dataclasses
import re
import time

from cdnaas.ro.vim import dnsprobe, management
from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.local import cgroups, network, processes
from cdnaas.ro.vim.local.context import group, vnf_root
from cdnaas.vnf import endpoints
from cdnaas.vnf.generation import generation_of

_PID_FILE = re.compile(r"^pid-file=(\S+)$", re.MULTILINE)
_PORT = re.compile(r"^port=(\d+)$", re.MULTILINE)
#: how long an nginx VNF must go on reporting another generation than the one written for
#: it to count: for a moment after a reload, a worker of the config before still accepts
CONFIRM_SECONDS = 0.5


@dataclasses.dataclass(frozen=True)
class Finding:
    """What one look at a VNF found.

    :param lasting: what is wrong in its processes or configuration (empty: nothing).
    :param silent: what does not answer (empty: everything answers).
    :param facts: what was seen, said of a healthy VNF.
    """

    lasting: tuple = ()
    silent: tuple = ()
    facts: str = ""

    @property
    def healthy(self):
        return not self.lasting and not self.silent

    @property
    def detail(self):
        """What is wrong, or the facts of a healthy VNF."""
        return "; ".join(self.lasting + self.silent) or self.facts


def nginx(prefix, group, addresses):
    """The nginx VNF whose files are under ``prefix`` (``nginx.pid``, ``nginx.conf``) and
    whose processes are in CPU group ``group``, asked at the first of ``addresses`` (its
    management listener's; a shield's legs) that answers."""
    problems, masters, workers = tree({"": prefix / "nginx.pid"}, group, "nginx")
    for master in masters.values():
        if not workers[master]:
            problems.append(f"master {master} has no workers")
    written = _read(prefix / "nginx.conf")
    running = _asked(addresses)
    deadline = time.monotonic() + CONFIRM_SECONDS
    while running is not None and _generation(running, written) and \
            time.monotonic() < deadline:  # a worker of the config before may still accept
        time.sleep(0.05)
        running = _asked(addresses)
    if running is None:
        return Finding(tuple(problems), ("no HTTP answer",))
    problems += _generation(running, written)
    facts = "; ".join(f"master {master} with {len(workers[master])} workers"
                      for master in masters.values())
    return Finding(tuple(problems), (), f"{facts}{_runs(running)}; answers HTTP")


def dns(prefix, group, address, hostname):
    """The DNS VNF whose dnsmasq configs are ``prefix/dnsmasq-<region>.conf`` (each names
    its pid file and port) and whose processes are in CPU group ``group``: each region's
    running dnsmasq asked for its generation at ``address`` on its port, the vCDN's
    ``hostname`` on port 53 (as a client; the steering sends RO's queries to one of
    them)."""
    configs = {path.name[len("dnsmasq-"):-len(".conf")]: _read(path) or ""
               for path in sorted(prefix.glob("dnsmasq-*.conf"))
               if not path.name.endswith("-spare.conf")}
    pid_files = {region: prefix / (match.group(1) if (match := _PID_FILE.search(text))
                                   else f"{region}.pid")
                 for region, text in configs.items()}
    problems, masters, _children = tree(pid_files, group, "dnsmasq")
    silent, generations = [], set()
    for region, text in configs.items():
        if region not in masters:  # gone: nothing answers there, no need to wait for it
            continue
        port = _PORT.search(text)
        answer = dnsprobe.texts(address, endpoints.GENERATION_NAME,
                                port=int(port.group(1)) if port else 53)
        if answer is None:
            silent.append(f"{region}: no DNS answer")
            continue
        running = next(filter(None, map(generation_of, answer)), "")
        problems += [f"{region}: {p}" for p in _generation(running, text)]
        generations.add(running)
    if not configs:
        problems.append("no dnsmasq configuration")
    if not dnsprobe.resolves(address, hostname):
        silent.append("no DNS answer")
    facts = ", ".join(f"dnsmasq {pid} ({region})" for region, pid in masters.items())
    return Finding(tuple(problems), tuple(silent),
                   f"{facts}{_runs(' '.join(sorted(generations)))}; answers DNS")


def tree(pid_files, group, program):
    """The process trees of daemons of ``program`` in CPU group ``group``.

    :param pid_files: ``{label: path}`` of each daemon's pid file (the label prefixes what
        is said of that daemon; "" for a VNF of one daemon).
    :returns: ``(problems, {label: master pid}, {master pid: [descendant pids]})``: masters
        that are not running (gone, or a zombie not yet reaped), not ``program`` or not in
        the group are problems, and so
        are processes of ``program`` in the group outside every running master's tree.
    """
    members = set(cgroups.pids(group))
    problems, masters, descendants = [], {}, {}
    for label, pid_file in pid_files.items():
        said = f"{label}: " if label else ""
        try:
            master = processes.pid_in(pid_file)
        except VimError:
            problems.append(f"{said}no master process id in {pid_file.name}")
            continue
        if not processes.running(master) or master not in members \
                or processes.program(master) != program:  # a zombie has exited too
            problems.append(f"{said}master {master} is gone")
        else:
            masters[label] = master
            descendants[master] = _descendants(master)
    owned = set(masters.values()).union(*descendants.values())
    orphans = [pid for pid in members
               if pid not in owned and processes.program(pid) == program]
    if orphans:
        what = "worker" if program == "nginx" else f"{program} process"
        problems.append(f"{len(orphans)} orphan {what}{'s' if len(orphans) > 1 else ''}")
    return problems, masters, descendants


def _asked(addresses):
    """The generation the first of ``addresses`` that answers reports (None: none does)."""
    return next((found for found in map(management.generation, addresses) if found is not None),
                None)


def _generation(running, written):
    """The problem of a daemon running generation ``running`` ("" none) when RO wrote the
    config ``written`` (its text, or None when it has no generation: not compared)."""
    wanted = generation_of(written or "")
    if wanted is None or running == wanted:
        return []
    return [f"runs configuration generation {running or 'none'}, RO wrote {wanted}"]


def _runs(generation):
    return f" runs generation {generation}" if generation else ""


def _descendants(pid):
    found, pending = [], cgroups.children(pid)
    while pending:
        child = pending.pop()
        found.append(child)
        pending += cgroups.children(child)
    return found


def _read(path):
    with contextlib.suppress(OSError):
        return path.read_text(encoding="utf-8")
    return None


def recorded(owner, deployment, vnf):
    """What the driver finds of ``deployment``'s recorded VNF ``vnf``: an nginx VNF asked
    at its recorded address, or the shield at any of its legs (an update that failed may
    have moved it to another region's); one without its own namespace does not answer
    (after a restore of the databases, another deployment's VNF may hold its address)."""
    deployment_id = deployment.deployment_id
    prefix = vnf_root(owner, deployment_id) / vnf.name
    own_group = group(owner, deployment_id, vnf.name)
    if vnf.role == "dns":
        return dns(prefix, own_group, vnf.address, deployment.entry_point.hostname)
    namespace = network.namespace_name(owner, deployment_id, vnf.name)
    addresses = []
    if namespace in network.list_namespaces():
        addresses = list(network.links_of(namespace)) if vnf.role == "shield" \
            else [vnf.address]
    return nginx(prefix, own_group, addresses)
