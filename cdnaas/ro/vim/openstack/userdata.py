"""cloud-init user-data of the VNF servers, rendered from the same ``templates/`` as the local driver.

The VNF image (``images/vnf/``) has nginx, dnsmasq, nftables and cloud-init with
their own services disabled; the user-data writes the VNF's configuration
(:mod:`cdnaas.vnf`, every value validated) and a systemd unit per
process, and starts them:

- cache: ``/etc/cdnaas/nginx.conf`` (``cache_config`` with the flavor's template and
  ``boot_config`` variables: ``flavor_config``, sized for the connections the
  plan sends it: ``planned_connections``; logging every viewer request to its usage
  log, since Octavia's balancer logs nothing RO reads; an origin shield is a cache that
  fetches from the origin for the others, listening on its legs in every region and
  logging no viewer; with a managed certificate, answering ACME HTTP-01 challenges
  from the config, as on the local driver: Octavia's balancer serves no file), unit
  ``cdnaas-cache`` with the open-file limit the config asks for (``LimitNOFILE``), which
  restarts a master that dies beside its workers and then ends those gracefully
  (``ORPHANS_SCRIPT``), a timer rotating the usage log
  past :data:`USAGE_ROTATE_BYTES` (``cdnaas-usage-rotate``) and ``/etc/sysctl.d/60-cdnaas-vnf.conf``
  raising the listen queues to its backlog and handing a closing listener's queue to
  another (as the local driver does in a VNF's namespace); its status page answers on the management port only, to the management
  prefixes (or to the VNF itself), never to viewers; the files the config refers to
  under its prefix (``cache_files``: error pages, gzip-compressed); with log streams,
  the log shipper (:mod:`cdnaas.ro.vim.logship`, one file under :data:`LOGSHIP_DIR`) as
  unit ``cdnaas-logship`` (its config, which may hold a collector's credentials,
  readable by root only and handed to the unit's own user as a systemd credential);
- DNS: one ``dnsmasq-<region>.conf`` per region (:func:`cdnaas.vnf.geodns.dns_of`, each answering
  with its region's balancer), on ports 5300+ of the VNF's address, and the
  nftables ruleset steering port 53 by client prefix (:func:`cdnaas.vnf.geodns.steering_of`);
  units ``cdnaas-steering`` and ``cdnaas-dns@<region>``;
- load generator (a calibration's, not a SIG VNF): the agent
  (:mod:`cdnaas.calibration.agent`) and the modules it runs (``loads``, ``wrk``,
  ``viewers``: the files of this package, gzip-compressed so the user-data stays far
  below Nova's 64 KB) under ``/opt/cdnaas-loadgen``, unit ``cdnaas-loadgen`` on the
  management port as a user of its own with room for a socket per viewer, and
  ``/etc/sysctl.d/60-cdnaas-loadgen.conf`` widening the ephemeral ports.
"""
import base64
import gzip
import ipaddress
import json
from pathlib import Path

import yaml

from cdnaas.calibration import agent
from cdnaas.delivery import logstreams
from cdnaas.ro.vim import logship
from cdnaas.ro.vim.openstack import plan
from cdnaas.vnf import endpoints, options, sizing
from cdnaas.vnf.cache import cache_of
from cdnaas.vnf.geodns import dns_of, steering_of
from cdnaas.vnf.generation import generation_of

PREFIX = "/var/lib/cdnaas/vnf"
CONF_DIR = "/etc/cdnaas"
NGINX_USER = "www-data"  # Debian's nginx user

_SYSCTL_FILE = "/etc/sysctl.d/60-cdnaas-vnf.conf"
#: where a load generator keeps the agent: ``cdnaas/calibration/*.py`` below it
LOADGEN_DIR = "/opt/cdnaas-loadgen"
#: the package files a load generator runs (the agent and what it imports), from this tree
LOADGEN_MODULES = ("agent", "loads", "wrk", "viewers")
_LOADGEN_SYSCTL_FILE = "/etc/sysctl.d/60-cdnaas-loadgen.conf"
_LOADGEN_SYSCTL = ("# CDNaaS load generator: an ephemeral port per viewer's connection\n"
                   "net.ipv4.ip_local_port_range = 10000 65535\n")

#: a cache's script ending the nginx processes outside the tree of the master systemd started
ORPHANS_SCRIPT = f"{CONF_DIR}/end-orphans.sh"
_END_ORPHANS = """\
#!/bin/sh
# CDNaaS cache VNF: once the nginx master systemd started ($MAINPID) has its workers, every
# other nginx process (the workers of a master that died, which served on meanwhile: the
# unit's KillMode=process leaves them) ends gracefully, answering what it began.
tries=0
until grep -q . /proc/"$MAINPID"/task/*/children 2>/dev/null || [ "$tries" -ge 100 ]; do
  sleep 0.1; tries=$((tries + 1))
done
for stat in /proc/[0-9]*/stat; do
  read -r pid comm state parent rest < "$stat" 2>/dev/null || continue
  [ "$comm" = "(nginx)" ] && [ "$pid" != "$MAINPID" ] && [ "$parent" != "$MAINPID" ] &&
    kill -QUIT "$pid" 2>/dev/null
done
exit 0
"""

# KillMode=process: when the master dies (a crash, kill -9), systemd restarts it without
# killing its workers, which go on serving beside the new master (the listeners take
# SO_REUSEPORT) until it has its own; then they end gracefully (ORPHANS_SCRIPT), what
# their listeners had queued moving to the new ones' (tcp_migrate_req). A stop still ends
# them all: the master, told to stop, stops its workers.
_CACHE_UNIT = """\
[Unit]
Description=CDNaaS cache VNF (nginx)
After=network-online.target
Wants=network-online.target

[Service]
LimitNOFILE={nofile}
ExecStartPre=/usr/bin/mkdir -p {prefix}/logs {prefix}/temp
ExecStartPre=/usr/sbin/nginx -t -q -p {prefix}/ -c {conf_dir}/nginx.conf
ExecStart=/usr/sbin/nginx -p {prefix}/ -c {conf_dir}/nginx.conf
ExecStartPost=/bin/sh {orphans}
ExecReload=/usr/sbin/nginx -p {prefix}/ -c {conf_dir}/nginx.conf -s reload
KillMode=process
Restart=always
RestartSec=1

[Install]
WantedBy=multi-user.target
"""

#: the size past which a cache's usage log is rotated (checked every minute)
USAGE_ROTATE_BYTES = 64 << 20
_ROTATE_SCRIPT = f"{CONF_DIR}/rotate-usage.sh"
_ROTATE = """\
#!/bin/sh
# CDNaaS cache VNF: the usage log past $LIMIT bytes becomes usage.log.1 (replacing the
# one before, which RO has read, or reports as lost) and nginx reopens its logs.
size=$(stat -c %s "$LOG" 2>/dev/null || echo 0)
[ "$size" -gt "$LIMIT" ] || exit 0
mv -f "$LOG" "$LOG.1"
kill -USR1 "$(cat "$PID")"
"""
_ROTATE_UNIT = f"""\
[Unit]
Description=CDNaaS cache VNF: rotate the usage log past its size

[Service]
Type=oneshot
Environment=LOG={PREFIX}/logs/usage.log LIMIT={USAGE_ROTATE_BYTES} PID={PREFIX}/nginx.pid
ExecStart=/bin/sh {_ROTATE_SCRIPT}
"""
_ROTATE_TIMER = """\
[Unit]
Description=CDNaaS cache VNF: look at the usage log's size every minute

[Timer]
OnBootSec=1min
OnUnitActiveSec=1min

[Install]
WantedBy=timers.target
"""

#: where a cache keeps the log shipper (``logship.py``) and its config
LOGSHIP_DIR = "/opt/cdnaas-logship"
_LOGSHIP_CONFIG = f"{CONF_DIR}/logship.json"
_LOGSHIP_UNIT = f"""\
[Unit]
Description=CDNaaS log shipper: the usage records to the vCDN's collectors
After=network-online.target
Wants=network-online.target
Before=cdnaas-cache.service

[Service]
LoadCredential=logship.json:{_LOGSHIP_CONFIG}
ExecStart=/usr/bin/python3 {LOGSHIP_DIR}/logship.py %d/logship.json
Environment=PYTHONDONTWRITEBYTECODE=1
DynamicUser=yes
MemoryMax=512M
CPUSchedulingPolicy=idle
Restart=always
RestartSec=2

[Install]
WantedBy=multi-user.target
"""

_DNS_UNIT = f"""\
[Unit]
Description=CDNaaS geo-DNS VNF, answers for region %i (dnsmasq)
After=network-online.target cdnaas-steering.service
Wants=network-online.target

[Service]
ExecStartPre=/usr/bin/mkdir -p {PREFIX}
ExecStartPre=/usr/sbin/dnsmasq --test --conf-file={CONF_DIR}/dnsmasq-%i.conf
ExecStart=/usr/sbin/dnsmasq --keep-in-foreground --conf-file={CONF_DIR}/dnsmasq-%i.conf
Restart=on-failure
RestartSec=2

[Install]
WantedBy=multi-user.target
"""

_STEERING_UNIT = f"""\
[Unit]
Description=CDNaaS geo-DNS steering: port 53 to the dnsmasq of the client's region
After=network-online.target
Wants=network-online.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/sbin/nft -f {CONF_DIR}/steering.nft

[Install]
WantedBy=multi-user.target
"""

_LOADGEN_UNIT = """\
[Unit]
Description=CDNaaS load generator agent (wrk and the viewer simulator)
After=network-online.target
Wants=network-online.target

[Service]
Environment=PYTHONPATH={dir} PYTHONDONTWRITEBYTECODE=1
ExecStart=/usr/bin/python3 -m cdnaas.calibration.agent --address {address} --port {port} \\
  --management {management} --targets {targets}
DynamicUser=yes
LimitNOFILE=1048576
Restart=on-failure
RestartSec=2

[Install]
WantedBy=multi-user.target
"""


def cache(sig, vnf, address, origin_address, management=(), behind_shield=False,
          also_listen=(), secondary_address=None, balancers=()):
    """User-data of cache (or origin shield) ``vnf`` listening on ``address``:80, caching
    ``sig.origin`` (``behind_shield``: through the vCDN's origin shield).

    :param origin_address: IP address the cache connects to (the driver resolved
        ``sig.origin.host``; the Host header and SNI name stay the origin's name).
    :param management: prefixes allowed to read the status page on the management port
        (:func:`.plan.management_cidrs`); none: only the VNF itself (its own address).
    :param also_listen: an origin shield's legs (:func:`cdnaas.vnf.cache.cache_config`);
        a shield logs no viewer (none reaches it).
    :param secondary_address: IP address of the vCDN's secondary origin (the driver
        resolved it; :mod:`cdnaas.delivery.origins`), for a VNF fetching from the origins
        (not one ``behind_shield``).
    :param balancers: prefixes of the balancer in front of the cache (its region's
        subnet), whose ``X-Forwarded-For`` names the viewer.
    :raises cdnaas.vnf.fields.ConfigError: a value is refused.
    """
    shield = vnf.role == "shield"
    nginx = cache_of(
        sig, vnf, listen_address=address, listen_port=plan.HTTP_PORT,
        origin_address=origin_address, prefix_dir=PREFIX, daemon=False, user=NGINX_USER,
        management_sources=list(management) or [address], also_listen=list(also_listen),
        usage_log=not shield, secondary_address=secondary_address,
        behind_shield=behind_shield, real_ip_from=[] if shield else list(balancers))
    # the access control's verifier and keys (root only), read by nginx's master
    secret_files = [(f"{PREFIX}/{name}", text, f"{mode:04o}")
                    for name, text, mode in options.access_files(None if shield
                                                                   else sig.service)]
    limits = sizing.host_limits(nginx)
    sysctl = (f"# CDNaaS cache VNF: listen queues for nginx's backlog; a closing listener's\n"
              f"# queue moves to another of its SO_REUSEPORT group (a restarted master's)\n"
              f"net.core.somaxconn = {limits['somaxconn']}\n"
              f"net.ipv4.tcp_max_syn_backlog = {limits['somaxconn']}\n"
              f"net.ipv4.tcp_migrate_req = 1\n")
    # the files the config refers to (error pages), gzip-compressed: Nova takes 64 KB
    pages = [{"path": f"{PREFIX}/{relative}", "encoding": "gz+b64", "content": _packed(text)}
             for relative, text in options.cache_files(sig.service).items()]
    streams = None if shield else sig.service.get(logstreams.FIELD)
    shipper = _log_shipper(vnf, streams) if streams else ([], [], [])
    return _cloud_config(vnf.name, _described(sig, vnf), [*shipper[0],
        (f"{CONF_DIR}/nginx.conf", nginx),
        (_SYSCTL_FILE, sysctl),
        ("/etc/systemd/system/cdnaas-cache.service",
         _CACHE_UNIT.format(nofile=limits["nofile"], prefix=PREFIX, conf_dir=CONF_DIR,
                            orphans=ORPHANS_SCRIPT)),
        (ORPHANS_SCRIPT, _END_ORPHANS),
        (_ROTATE_SCRIPT, _ROTATE),
        ("/etc/systemd/system/cdnaas-usage-rotate.service", _ROTATE_UNIT),
        ("/etc/systemd/system/cdnaas-usage-rotate.timer", _ROTATE_TIMER),
        *secret_files,
    ], [*shipper[1], "cdnaas-cache.service", "cdnaas-usage-rotate.timer"], sysctl=_SYSCTL_FILE,
        packed=pages + shipper[2])


def _log_shipper(vnf, streams):
    """``(files, units, packed files)`` of cache ``vnf``'s log shipper for the stored
    ``streams`` (checked again): its unit, its config (root only) and its code."""
    config = logstreams.shipper_config(
        logstreams.check(streams, f"service.{logstreams.FIELD}"), vnf.name)
    packed = [{"path": f"{LOGSHIP_DIR}/logship.py",
               "content": _packed(Path(logship.__file__).read_text()), "encoding": "gz+b64"},
              {"path": _LOGSHIP_CONFIG, "content": _packed(json.dumps(config, indent=1)),
               "encoding": "gz+b64", "permissions": "0600"}]
    return [("/etc/systemd/system/cdnaas-logship.service", _LOGSHIP_UNIT)], \
        ["cdnaas-logship.service"], packed


def dns(sig, vnf, address, balancers):
    """User-data of DNS ``vnf`` on ``address``: each region's clients get their region's balancer.

    :param balancers: region -> address of its load balancer (VIP).
    :raises cdnaas.vnf.fields.ConfigError: a value is refused.
    """
    ports = plan.dns_ports(sig)
    files, units = [], ["cdnaas-steering.service"]
    for region in sig.regions:
        text = dns_of(sig, vnf, region.name, answer_address=balancers[region.name],
                      listen_addresses=[address], port=ports[region.name],
                      prefix_dir=f"{PREFIX}/{region.name}")
        files.append((f"{CONF_DIR}/dnsmasq-{region.name}.conf", text))
        units.append(f"cdnaas-dns@{region.name}.service")
    files.append((f"{CONF_DIR}/steering.nft", steering_of(sig, ports)))
    files.append(("/etc/systemd/system/cdnaas-steering.service", _STEERING_UNIT))
    files.append(("/etc/systemd/system/cdnaas-dns@.service", _DNS_UNIT))
    mkdirs = [f"{PREFIX}/{r.name}" for r in sig.regions]
    return _cloud_config(vnf.name, _described(sig, vnf), files, units, mkdirs)


def _described(sig, vnf):
    return f"{vnf.role} VNF {vnf.name} of vCDN {sig.vcdn_id}"


def load_generator(vcdn_id, name, address, targets, management):
    """User-data of load generator ``name`` of vCDN ``vcdn_id`` on ``address``: the agent on
    the management port, answering ``management`` prefixes only, loading addresses of
    ``targets`` (prefixes) only.

    :raises ValueError: an address or prefix is refused.
    """
    try:  # the unit's command line takes them: each checked, written as Python reads it
        listen = ipaddress.ip_address(address)
    except ValueError:
        raise ValueError(f"{address!r} is not an IP address") from None
    if getattr(listen, "scope_id", None):
        raise ValueError(f"{address!r} has a zone")
    unit = _LOADGEN_UNIT.format(
        dir=LOADGEN_DIR, address=listen, port=endpoints.MANAGEMENT_PORT,
        management=" ".join(map(str, agent.prefixes(management))),
        targets=" ".join(map(str, agent.prefixes(targets))))
    package = Path(agent.__file__).resolve().parent
    sources = [(f"{LOADGEN_DIR}/cdnaas/{module}", "") for module in
               ("__init__.py", "calibration/__init__.py")]
    sources += [(f"{LOADGEN_DIR}/cdnaas/calibration/{module}.py",
                 (package / f"{module}.py").read_text()) for module in LOADGEN_MODULES]
    files = [{"path": path, "encoding": "gz+b64", "content": _packed(text)}
             for path, text in sources]
    return _cloud_config(name, f"load generator {name} of vCDN {vcdn_id}", [
        (_LOADGEN_SYSCTL_FILE, _LOADGEN_SYSCTL),
        ("/etc/systemd/system/cdnaas-loadgen.service", unit),
    ], ["cdnaas-loadgen.service"], sysctl=_LOADGEN_SYSCTL_FILE, packed=files)


def _packed(text):
    """``text`` as cloud-init's ``gz+b64`` content (the same bytes every time)."""
    return base64.b64encode(gzip.compress(text.encode(), mtime=0)).decode()


def _cloud_config(hostname, what, files, units, mkdirs=(), sysctl=None, packed=()):
    """A ``#cloud-config`` document for ``what``: write ``files`` (``(path, text)``, or
    ``(path, text, permissions)`` where not 0644) and ``packed`` (cloud-init
    ``write_files`` entries), make ``mkdirs``, load the ``sysctl`` file and start ``units``."""
    document = {
        "hostname": hostname,
        "write_files": [{"path": path, "content": content, "owner": "root:root",
                         "permissions": mode[0] if mode else "0644"}
                        for path, content, *mode in files] + [
                             {"owner": "root:root", "permissions": "0644", **entry}
                             for entry in packed],
        "runcmd": [["mkdir", "-p", *mkdirs, PREFIX],
                   *([["sysctl", "-p", sysctl]] if sysctl else []),
                   ["systemctl", "daemon-reload"], ["systemctl", "enable", "--now", *units]],
    }
    header = f"#cloud-config\n# CDNaaS {what} (rendered by cdnaas.ro.vim.openstack.userdata)\n"
    return header + yaml.safe_dump(document, sort_keys=False, default_flow_style=False,
                                   width=1000)


def generation(user_data):
    """The generation of the nginx config the cache user-data ``user_data`` writes, which
    its guest's management listener reports (:data:`cdnaas.vnf.endpoints.GENERATION_PATH`);
    None for a VNF without one (a DNS server)."""
    document = yaml.safe_load(user_data)
    text = next((f["content"] for f in document["write_files"]
                 if f["path"] == f"{CONF_DIR}/nginx.conf"), "")
    return generation_of(text)
