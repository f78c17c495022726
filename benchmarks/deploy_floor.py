"""The floor of a deployment: the rendered configs of a vCDN our local driver deployed,
started again in parallel network namespaces by the shortest path (no API, SO or RO).

:func:`snapshot` copies, while the vCDN runs, each VNF's files (its nginx or dnsmasq
configs and what they name, the DNS VNF's steering) and the addresses of its legs;
:func:`start` then makes the bridges, the namespaces and their veths in one ``ip`` run,
and for every VNF at once writes its files in a new folder (as a deployment writes the
configs it rendered), sets its addresses (one ``ip`` run in its namespace), starts
its daemons (nginx, or each region's dnsmasq after loading the steering) and waits
until they answer (nginx's status page, each dnsmasq a query for the vCDN's name):
what any deployment of those configs must do. Of ours it uses only the driver's way
of entering a namespace from a thread and its probes (polled as the driver polls):
no CPU groups, no process limits, no verification from a client, no records.
"""
import concurrent.futures
import dataclasses
import ipaddress
import itertools
import json
import shutil
import subprocess
import time
from pathlib import Path

from cdnaas.ro.vim import dnsprobe, management
from cdnaas.ro.vim.local import netns, network, processes

SKIPPED = ("*.pid", "*.log", "*.sock", "logs")
RUNS = itertools.count()


@dataclasses.dataclass
class Vnf:
    """One VNF as the floor starts it: its files' folder and its legs' addresses."""
    prefix: Path
    legs: list  # "address/prefixlen", in the order of its eth links
    dns_ports: dict  # {region: port} of a DNS VNF's dnsmasq; empty for nginx


@dataclasses.dataclass
class Snapshot:
    """What :func:`start` starts: the VNFs and the vCDN's name their dnsmasq answer."""
    vnfs: list
    hostname: str
    made: tuple = ({}, ())  # the bridges and namespaces of its last start
    folder: Path = None  # where its last start wrote the VNFs' files


def snapshot(ro_deployment, owner, state_dir, into):
    """Copy the running deployment ``ro_deployment`` (RO's representation) of the RO
    ``owner`` under ``state_dir`` into the folder ``into``; the paths in its configs are
    rewritten to the copy."""
    vnfs = []
    for vnf in ro_deployment.vnfs:
        source = Path(state_dir) / "local" / owner / ro_deployment.id / vnf.name
        target = Path(into) / vnf.name
        shutil.copytree(source, target, ignore=shutil.ignore_patterns(*SKIPPED))
        for conf in target.glob("*.conf"):
            conf.write_text(conf.read_text().replace(str(source), str(target)))
        (target / "logs").mkdir(exist_ok=True)
        namespace = network.namespace_name(owner, ro_deployment.id, vnf.name)
        links = json.loads(subprocess.run(["ip", "-j", "-n", namespace, "addr", "show"],
                                          capture_output=True, check=True, text=True).stdout)
        legs = [f"{i['local']}/{i['prefixlen']}"
                for link in sorted(links, key=lambda l: l["ifname"])
                if link["ifname"].startswith("eth")
                for i in link["addr_info"] if i["family"] == "inet"]
        ports = target / "dns-ports.json"
        vnfs.append(Vnf(target, legs, json.loads(ports.read_text())["ports"]
                        if ports.exists() else {}))
    return Snapshot(vnfs, ro_deployment.entry_point["hostname"])


def _names(shot, run):
    """Names of the bridges (``{subnet: name}``) and namespaces of ``run``: new ones each
    time, as veths of a namespace just deleted may linger while the kernel frees them."""
    subnets = sorted({str(ipaddress.ip_interface(leg).network)
                      for vnf in shot.vnfs for leg in vnf.legs})
    bridges = {subnet: f"fb{run}x{i}" for i, subnet in enumerate(subnets)}
    namespaces = [f"floor_{run}_{i}" for i in range(len(shot.vnfs))]
    return bridges, namespaces


def start(shot, folder):
    """Start ``shot``'s VNFs, their files written under the new folder ``folder``; return
    the seconds until every daemon answered. Call :func:`stop` afterwards, also when it
    fails."""
    bridges, namespaces = shot.made = _names(shot, next(RUNS))
    shot.folder = Path(folder)
    started = time.perf_counter()
    lines = []
    for subnet, bridge in bridges.items():
        gateway = ipaddress.ip_network(subnet).network_address + 1
        lines += [f"link add {bridge} type bridge",
                  f"addr add {gateway}/{ipaddress.ip_network(subnet).prefixlen} dev {bridge}",
                  f"link set {bridge} up"]
    for i, (vnf, namespace) in enumerate(zip(shot.vnfs, namespaces)):
        lines.append(f"netns add {namespace}")
        for j, leg in enumerate(vnf.legs):
            bridge = bridges[str(ipaddress.ip_interface(leg).network)]
            veth = f"fv{namespace[6:]}x{j}"
            lines += [f"link add {veth} type veth peer name eth{j} netns {namespace}",
                      f"link set {veth} master {bridge}", f"link set {veth} up"]
    _run(["ip", "-batch", "-"], "\n".join(lines))

    def up(pair):
        vnf, namespace = pair
        prefix = shot.folder / vnf.prefix.name
        shutil.copytree(vnf.prefix, prefix)
        for conf in prefix.glob("*.conf"):
            conf.write_text(conf.read_text().replace(str(vnf.prefix), str(prefix)))
        inside = ["link set lo up"]
        for j, leg in enumerate(vnf.legs):
            inside += [f"addr add {leg} dev eth{j}", f"link set eth{j} up"]
        _run(["ip", "-n", namespace, "-batch", "-"], "\n".join(inside))
        address = vnf.legs[0].split("/")[0]
        with netns.entered(namespace):
            if vnf.dns_ports:
                _run(["nft", "-f", str(prefix / "steering.nft")])
                for region in vnf.dns_ports:
                    _run(["dnsmasq", f"--conf-file={prefix}/dnsmasq-{region}.conf"])
            else:
                _run(["nginx", "-p", f"{prefix}/", "-c", str(prefix / "nginx.conf")])
        if vnf.dns_ports:
            for port in vnf.dns_ports.values():
                processes.wait_until(lambda p=port: dnsprobe.resolves(address, shot.hostname,
                                                                      port=p), "floor DNS")
        else:
            processes.wait_until(lambda: management.answers_http(address), "floor nginx")

    with concurrent.futures.ThreadPoolExecutor(len(shot.vnfs)) as pool:
        list(pool.map(up, zip(shot.vnfs, namespaces)))
    return time.perf_counter() - started


def _run(command, input_text=None):
    done = subprocess.run(command, input=input_text and input_text + "\n", text=True,
                          capture_output=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")


def stop(shot):
    """Remove what :func:`start` made (untimed)."""
    bridges, namespaces = shot.made
    network.delete_namespaces(namespaces)
    network.delete_bridges(list(bridges.values()))
    if shot.folder is not None:
        shutil.rmtree(shot.folder, ignore_errors=True)
