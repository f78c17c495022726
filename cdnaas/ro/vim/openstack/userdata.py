"""cloud-init user-data of the VNF servers, rendered from the same ``templates/`` as the local driver.

The VNF image (``images/vnf/``) has nginx, dnsmasq, nftables and cloud-init with
their own services disabled; the user-data writes the VNF's configuration
(:mod:`cdnaas.ro.vnfconfig`, every value validated) and a systemd unit per
process, and starts them:

- cache: ``/etc/cdnaas/nginx.conf`` (``cache_config`` with the flavor's template and
  ``boot_config`` variables: ``flavor_config``, sized for the connections the
  plan sends it: ``planned_connections``), unit ``cdnaas-cache`` with the open-file
  limit the config asks for (``LimitNOFILE``) and ``/etc/sysctl.d/60-cdnaas-vnf.conf``
  raising the listen queues to its backlog (as the local driver does in a VNF's
  namespace); its status page answers on the management port only, to the management
  prefixes (or to the VNF itself), never to viewers;
- DNS: one ``dnsmasq-<region>.conf`` per region (``dns_config``, each answering
  with its region's balancer), on ports 5300+ of the VNF's address, and the
  nftables ruleset steering port 53 by client prefix (``steering_rules``);
  units ``cdnaas-steering`` and ``cdnaas-dns@<region>``.
"""
import yaml

from cdnaas.ro import vnfconfig
from cdnaas.ro.vim.openstack import plan

PREFIX = "/var/lib/cdnaas/vnf"
CONF_DIR = "/etc/cdnaas"
NGINX_USER = "www-data"  # Debian's nginx user

_SYSCTL_FILE = "/etc/sysctl.d/60-cdnaas-vnf.conf"

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
ExecReload=/usr/sbin/nginx -p {prefix}/ -c {conf_dir}/nginx.conf -s reload
Restart=on-failure
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


def cache(sig, vnf, address, origin_address, management=()):
    """User-data of cache ``vnf`` listening on ``address``:80, caching ``sig.origin``.

    :param origin_address: IP address the cache connects to (the driver resolved
        ``sig.origin.host``; the Host header and SNI name stay the origin's name).
    :param management: prefixes allowed to read the status page on the management port
        (:func:`.plan.management_cidrs`); none: only the VNF itself (its own address).
    :raises cdnaas.ro.vnfconfig.ConfigError: a value is refused.
    """
    nginx = vnfconfig.cache_config(
        name=vnf.name, workers=vnf.vcpus, listen_address=address, listen_port=plan.HTTP_PORT,
        origin=sig.origin, origin_address=origin_address, prefix_dir=PREFIX, daemon=False,
        planned_connections=vnfconfig.planned_connections(sig, vnf),
        user=NGINX_USER, management_sources=list(management) or [address],
        flavor=vnfconfig.flavor_config(sig, vnf), cache_rules=sig.service.get("cache_rules"))
    limits = vnfconfig.host_limits(nginx)
    sysctl = (f"# CDNaaS cache VNF: listen queues for nginx's backlog\n"
              f"net.core.somaxconn = {limits['somaxconn']}\n"
              f"net.ipv4.tcp_max_syn_backlog = {limits['somaxconn']}\n")
    return _cloud_config(sig, vnf, [
        (f"{CONF_DIR}/nginx.conf", nginx),
        (_SYSCTL_FILE, sysctl),
        ("/etc/systemd/system/cdnaas-cache.service",
         _CACHE_UNIT.format(nofile=limits["nofile"], prefix=PREFIX, conf_dir=CONF_DIR)),
    ], ["cdnaas-cache.service"], sysctl=True)


def dns(sig, vnf, address, balancers):
    """User-data of DNS ``vnf`` on ``address``: each region's clients get their region's balancer.

    :param balancers: region -> address of its load balancer (VIP).
    :raises cdnaas.ro.vnfconfig.ConfigError: a value is refused.
    """
    ports = plan.dns_ports(sig)
    files, units = [], ["cdnaas-steering.service"]
    flavor = vnfconfig.flavor_config(sig, vnf)
    for region in sig.regions:
        text = vnfconfig.dns_config(
            name=f"{vnf.name}-{region.name}", hostname=sig.hostname,
            aliases=sig.service.get("hostnames", []),
            answer_address=balancers[region.name], listen_addresses=[address],
            port=ports[region.name], prefix_dir=f"{PREFIX}/{region.name}", flavor=flavor)
        files.append((f"{CONF_DIR}/dnsmasq-{region.name}.conf", text))
        units.append(f"cdnaas-dns@{region.name}.service")
    rules = [(prefix, ports[r.name]) for r in sig.regions for prefix in r.client_prefixes]
    files.append((f"{CONF_DIR}/steering.nft", vnfconfig.steering_rules(
        table="cdnaas-geo", rules=rules, default_port=ports[sig.default_region])))
    files.append(("/etc/systemd/system/cdnaas-steering.service", _STEERING_UNIT))
    files.append(("/etc/systemd/system/cdnaas-dns@.service", _DNS_UNIT))
    mkdirs = [f"{PREFIX}/{r.name}" for r in sig.regions]
    return _cloud_config(sig, vnf, files, units, mkdirs)


def _cloud_config(sig, vnf, files, units, mkdirs=(), sysctl=False):
    document = {
        "hostname": vnf.name,
        "write_files": [{"path": path, "content": content, "owner": "root:root",
                         "permissions": "0644"} for path, content in files],
        "runcmd": [["mkdir", "-p", *mkdirs, PREFIX],
                   *([["sysctl", "-p", _SYSCTL_FILE]] if sysctl else []),
                   ["systemctl", "daemon-reload"], ["systemctl", "enable", "--now", *units]],
    }
    header = (f"#cloud-config\n# CDNaaS {vnf.role} VNF {vnf.name} of vCDN {sig.vcdn_id} "
              f"(rendered by cdnaas.ro.vim.openstack.userdata)\n")
    return header + yaml.safe_dump(document, sort_keys=False, default_flow_style=False,
                                   width=1000)
