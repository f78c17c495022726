"""Decisions of the OpenStack driver that need no cloud: subnets, addresses, flavors, tags.

RO manages the addresses: each region of a vCDN gets its own /24 out of
``CDNAAS_OS_POOL`` (default ``10.200.0.0/16``; vCDN networks are isolated, so
every vCDN may use the same pool), each VNF at its place (:mod:`cdnaas.vnf.subnet`):
gateway ``.1``, load balancer VIP ``.2``, DNS ``.3`` (more DNS VNFs ``.5``...), origin
shield ``.4`` (in every region: a leg of the one shield server, where the region's
caches fetch from), caches from ``.10``. Regions and caches that stay keep theirs.
"""
import hashlib
import ipaddress
import re

from cdnaas.common import challenges, config, errors
from cdnaas.delivery import https as https_option
from cdnaas.ro.vim.base import DeploymentFailed
from cdnaas.ro.vim.hosts import dns_host
from cdnaas.vnf.subnet import FIRST_CACHE_HOST, LB_HOST, SHIELD_HOST

HTTP_PORT = 80
HTTPS_PORT = 443
#: the Octavia API version whose listeners take ``alpn_protocols`` (HTTP/2 by ALPN)
ALPN_VERSION = (2, 20)
#: the Octavia API version whose listeners take ``hsts_max_age`` and its flags (and
#: ``tls_versions``, from 2.17)
HSTS_VERSION = (2, 27)
DNS_BASE_PORT = 5300
#: each listener tells the caches the viewer's address (their usage logs record it)
VIEWER_HEADER = {"X-Forwarded-For": "true"}

#: every resource of every vCDN carries this tag
BASE_TAG = "cdnaas"
_MAX_TAG = 60  # nova's limit (neutron: 255, octavia: 255)


def pool():
    return ipaddress.ip_network(config.setting("CDNAAS_OS_POOL"))


def owner():
    """Who owns the resources this RO creates: ``CDNAAS_OS_OWNER`` (default ``cdnaas``).

    Two ROs (or two test runs) sharing a project keep to their own resources.
    """
    return config.setting("CDNAAS_OS_OWNER")


def management_cidrs():
    """Where the caches' management port (their nginx status page,
    :data:`cdnaas.vnf.endpoints.MANAGEMENT_PORT`) may be reached from:
    ``CDNAAS_OS_MANAGEMENT_CIDR``, comma-separated prefixes of the operator's management
    network, opened in the caches' security group and allowed by their nginx. Unset (the
    default): nobody but the VNF itself, as RO reads its figures from Nova and Octavia.

    :raises DeploymentFailed: a value is not an address prefix, has a zone, or is a /0
        (the status page is never for everyone).
    """
    cidrs = []
    for item in config.setting("CDNAAS_OS_MANAGEMENT_CIDR"):  # items stripped, none empty
        try:
            prefix = ipaddress.ip_network(item, strict=False)
        except ValueError:
            prefix = None
        if (prefix is None or prefix.prefixlen == 0
                or getattr(prefix.network_address, "scope_id", None) is not None):
            raise DeploymentFailed(f"CDNAAS_OS_MANAGEMENT_CIDR {item!r} is not the "
                                   "prefix of a management network (like 10.0.0.0/24)")
        cidrs.append(str(prefix))
    return cidrs


def _tag(prefix, value):
    tag = f"{prefix}:{value}"
    if len(tag) <= _MAX_TAG and "," not in tag and "/" not in tag:
        return tag
    return f"{prefix}:sha1-{hashlib.sha1(value.encode()).hexdigest()[:40]}"


def vcdn_tag(vcdn_id):
    """The tag naming the vCDN ``vcdn_id`` on each of its resources."""
    return _tag("cdnaas-vcdn", vcdn_id)


def owner_tag(owner_name=None):
    return _tag("cdnaas-owner", owner_name or owner())


def vcdn_from_tags(tags):
    """The vCDN tag's value among ``tags`` (the id, or ``sha1-...`` for long ids), or None."""
    for tag in tags or ():
        if tag.startswith("cdnaas-vcdn:"):
            return tag.split(":", 1)[1]
    return None


def tags(vcdn_id, *extra):
    return [BASE_TAG, owner_tag(), vcdn_tag(vcdn_id), *extra]


def subnets(sig, existing):
    """Region -> /24 CIDR: regions keep theirs, new ones take the lowest free /24 of the pool."""
    chosen = {r.name: existing[r.name] for r in sig.regions if r.name in existing}
    taken = {ipaddress.ip_network(c) for c in chosen.values()}
    free = (n for n in pool().subnets(new_prefix=24) if n not in taken)
    for region in sig.regions:
        if region.name not in chosen:
            network = next(free, None)
            if network is None:
                raise DeploymentFailed(f"no /24 left in {pool()} for region {region.name}")
            chosen[region.name] = str(network)
    return chosen


def addresses(sig, region_cidrs, kept):
    """VNF name -> address: kept VNFs keep theirs; LB .2, DNS .3 (.5... for more:
    :func:`~cdnaas.ro.vim.hosts.dns_host`), origin shield .4, caches the lowest free from
    .10; and the shield's leg in each other region (:func:`leg_name`) at that region's .4."""
    result = dict(kept)
    for region in sig.regions:
        network = ipaddress.ip_network(region_cidrs[region.name])
        used = {result[v.name] for v in sig.vnfs_in(region.name) if v.name in result}
        for vnf in sig.vnfs_in(region.name):
            if vnf.name in result:
                continue
            if vnf.role == "load_balancer":
                result[vnf.name] = str(network[LB_HOST])
            elif vnf.role == "dns":
                result[vnf.name] = str(network[dns_host(sig, vnf)])
            elif vnf.role == "shield":
                result[vnf.name] = str(network[SHIELD_HOST])
            else:
                result[vnf.name] = spare_address(network, used, vnf.name)
            used.add(result[vnf.name])
        for shield in sig.vnfs_in(role="shield"):
            if shield.region != region.name:
                result[leg_name(shield, region.name)] = str(network[SHIELD_HOST])
    return result


def leg_name(shield, region):
    """The name of origin shield ``shield``'s port on ``region``'s network (not its own
    region's, whose port is the shield's): ``<shield>-leg-<region>``."""
    return f"{shield.name}-leg-{region}"


def port_spec(sig, key, role, info, addresses, tags_):
    """The port named ``key`` (a VNF's, or a shield's leg) of a ``role`` VNF on the network
    of the region recorded as ``info``: in its ``role`` security group, at ``addresses[key]``
    where RO chose it (else Neutron picks)."""
    spec = {"name": resource_name(sig.vcdn_id, key), "network_id": info["network_id"],
            "security_group_ids": [info["security_groups"][role]], "tags": tags_,
            "fixed_ips": [{"subnet_id": info["subnet_id"]}]}
    if addresses.get(key):
        spec["fixed_ips"][0]["ip_address"] = addresses[key]
    return spec


def untagged(ports, tags_):
    """Those of ``ports`` (just created) without every one of ``tags_``: Neutron keeps tags
    given at creation only with ML2's extension driver ``tag_ports_during_bulk_creation``;
    these are to be tagged afterwards."""
    return [port for port in ports if not set(tags_) <= set(port.tags or ())]


def spare_address(network, used, name):
    """The lowest address of ``network`` from ``.10`` (a cache's) not in ``used``.

    :raises DeploymentFailed: none is left (``name``: the VNF that needed it).
    """
    address = next((str(network[n]) for n in range(FIRST_CACHE_HOST, network.num_addresses - 1)
                    if str(network[n]) not in used), None)
    if address is None:
        raise DeploymentFailed(f"no address left in {network} for {name}")
    return address


def pick_flavor(flavors, vcpus, ram_mb):
    """The smallest flavor with at least ``vcpus`` and ``ram_mb``.

    :param flavors: ``(id, name, vcpus, ram_mb, disk_gb)`` of each flavor on offer.
    :returns: the chosen tuple, or None when none fits.
    """
    fitting = [f for f in flavors if f[2] >= vcpus and f[3] >= ram_mb]
    return min(fitting, key=lambda f: (f[2], f[3], f[4], f[1]), default=None)


def flavor_name(vcpus, ram_mb):
    """Name of a flavor the driver creates when allowed (``CDNAAS_OS_CREATE_FLAVORS=1``)."""
    return f"cdnaas.{vcpus}c{ram_mb}m"


def dns_ports(sig):
    """Region -> port of its dnsmasq on the DNS VNF (port 53 is steered to it by client prefix)."""
    return {r.name: DNS_BASE_PORT + i for i, r in enumerate(sig.regions)}


def resource_name(vcdn_id, name):
    return f"cdnaas-{vcdn_id}-{name}"


def listeners(name, tags_, container_ref=None, alpn=False, policy_api=False, policy=None,
              names=(), acme=False):
    """The listeners of a region's Octavia balancer ``name``, each with its own default pool
    (Octavia lets a pool be one listener's default only): HTTP on :data:`HTTP_PORT` and,
    with ``container_ref`` (a Barbican certificate container), TERMINATED_HTTPS on
    :data:`HTTPS_PORT`, offering HTTP/2 by ALPN where ``alpn`` (the API takes it); both
    add the viewer's address to ``X-Forwarded-For`` (:data:`VIEWER_HEADER`). With HTTPS,
    the vCDN's HTTPS ``policy`` (stored ``https_policy``; None: the defaults) is the HTTPS
    listener's TLS versions and HSTS (:func:`tls_listener_policy`; ``policy_api``: the
    API takes them) and the HTTP listener's L7 policies (:func:`http_l7_policies` for
    the served ``names``; ``acme``: the certificate is managed, so ACME HTTP-01
    challenges go to the HTTP pool's caches whatever the policy)."""
    specs = [{"name": name, "protocol": "HTTP", "protocol_port": HTTP_PORT, "tags": tags_,
              "insert_headers": VIEWER_HEADER,
              "default_pool": {"name": name, "protocol": "HTTP", "lb_algorithm": "SOURCE_IP",
                               "tags": tags_}}]
    if container_ref:
        https = f"{name}-https"
        specs.append({"name": https, "protocol": "TERMINATED_HTTPS",
                      "protocol_port": HTTPS_PORT, "tags": tags_, "insert_headers": VIEWER_HEADER,
                      "default_tls_container_ref": container_ref,
                      "default_pool": {"name": https, "protocol": "HTTP",
                                       "lb_algorithm": "SOURCE_IP", "tags": tags_},
                      **tls_listener_policy(policy, policy_api)})
        if alpn:
            specs[-1]["alpn_protocols"] = ["h2", "http/1.1"]
        l7 = http_l7_policies(policy, names, tags_, acme_pool=name if acme else None)
        if l7:
            specs[0]["l7policies"] = l7
    return specs


def _policy(policy):
    """A stored ``https_policy`` (None: the defaults) checked again, defaults filled in.

    :raises DeploymentFailed: it is refused.
    """
    try:
        checked = None if policy is None else https_option.check(policy, "service.https_policy")
    except errors.BadRequest as exc:
        raise DeploymentFailed(exc.message) from None
    return checked or dict(https_option.DEFAULTS)


def tls_listener_policy(policy, policy_api=False) -> dict:
    """The TERMINATED_HTTPS listener's attributes for an HTTPS ``policy`` (stored; None:
    the defaults): ``tls_versions`` where its minimum version is not the default (Octavia's
    own default is TLS 1.2 and 1.3) and, where it asks HSTS, ``hsts_max_age``,
    ``hsts_include_subdomains``, ``hsts_preload`` (Octavia sends the header on HTTPS
    answers only). The defaults send nothing new, so any Octavia API takes them.

    :param policy_api: the Octavia API takes HSTS and TLS versions (:data:`HSTS_VERSION`).
    :raises DeploymentFailed: the policy asks them of an API that has neither, or is
        refused.
    """
    checked = _policy(policy)
    out = {}
    for asked, key in ((checked["min_tls_version"] != https_option.DEFAULTS["min_tls_version"],
                        "min_tls_version"), (checked["hsts"] is not None, "hsts")):
        if asked and not policy_api:
            raise DeploymentFailed(f"https_policy.{key} needs Octavia API 2.27 or later; this "
                                   f"cloud's is older: remove {key} from the vCDN's HTTPS "
                                   "policy")
    if checked["min_tls_version"] != https_option.DEFAULTS["min_tls_version"]:
        out["tls_versions"] = [f"TLSv{v}" for v in https_option.TLS_VERSIONS
                               if float(v) >= float(checked["min_tls_version"])]
    if checked["hsts"] is not None:
        out.update(hsts_max_age=checked["hsts"]["max_age"],
                   hsts_include_subdomains=checked["hsts"]["include_subdomains"],
                   hsts_preload=checked["hsts"]["preload"])
    return out


def http_l7_policies(policy, names, tags_=(), acme_pool=None) -> list:
    """The HTTP listener's L7 policies for an HTTPS ``policy`` (stored; None: the
    defaults): ``redirect``, one REDIRECT_PREFIX (301) to ``https://<name>`` per served
    name (a rule HOST_NAME equal to it; path and query kept); ``refuse``, one REJECT of
    every path; ``allow``, none. Octavia's L7 rules do not test the method: a redirect is
    301 for every method there (the local driver answers 308 to non-GET/HEAD).

    :param acme_pool: the name of the HTTP listener's default pool where the vCDN's
        certificate is managed: ahead of a redirect or refusal, a REDIRECT_TO_POOL to it
        of the ACME HTTP-01 path (:data:`cdnaas.common.challenges.PATH_PREFIX`), so the
        CA's validation reaches the caches over plain HTTP as RFC 8555 8.3 has it (Octavia
        takes a pool's name in the load balancer's one-call create).
    """
    checked = _policy(policy)
    if checked["http"] == "redirect":
        policies = [{"name": f"redirect-{index}", "action": "REDIRECT_PREFIX",
                     "redirect_prefix": f"https://{host}", "redirect_http_code": 301,
                     "tags": list(tags_),
                     "rules": [{"type": "HOST_NAME", "compare_type": "EQUAL_TO", "value": host}]}
                    for index, host in enumerate(names, start=1)]
    elif checked["http"] == "refuse":
        policies = [{"name": "refuse-http", "action": "REJECT", "tags": list(tags_),
                     "rules": [{"type": "PATH", "compare_type": "STARTS_WITH", "value": "/"}]}]
    else:
        return []
    if acme_pool is not None:
        policies.insert(0, {"name": "acme-http01", "action": "REDIRECT_TO_POOL",
                            "redirect_pool": {"name": acme_pool}, "tags": list(tags_),
                            "rules": [{"type": "PATH", "compare_type": "STARTS_WITH",
                                       "value": challenges.PATH_PREFIX}]})
    return [{**spec, "position": position} for position, spec in enumerate(policies, start=1)]


def octavia_supports(versions, wanted):
    """Whether an Octavia API listing ``versions`` (the ``id``s of its root document,
    ``v2.0`` ... ``v2.27``) is at ``wanted`` (``(major, minor)``) or later."""
    found = []
    for version in versions:
        match = re.fullmatch(r"v(\d+)\.(\d+)", str(version))
        if match:
            found.append((int(match.group(1)), int(match.group(2))))
    return bool(found) and max(found) >= wanted


def alpn_supported(versions):
    """Whether an Octavia API listing ``versions`` takes a listener's ``alpn_protocols``."""
    return octavia_supports(versions, ALPN_VERSION)
