"""Sample SIG documents (valid against ``api-spec/sig.schema.json``) for tests.

Layout of :func:`sample_sig`: per region ``<region>-lb`` on ``<region>-host-1``
and caches ``<region>-cache-<k>`` spread round-robin over ``<region>-host-1..n``
(``n = cache_hosts``); one DNS VNF ``dns-1`` on the first region's host 1.
"""
DEFAULT_CACHES = {"north": 2, "south": 2}


def sample_sig(vcdn_id="vcdn-1", caches=None, cache_hosts=2):
    """A SIG dict for ``vcdn_id`` with ``caches`` = {region: number of caches}.

    :param cache_hosts: hosts per region the caches are spread over, so a test
        can aim a failure at the host of a cache added by an update.
    """
    caches = caches or DEFAULT_CACHES
    regions = list(caches)
    vnfs = []
    for index, region in enumerate(regions):
        vnfs.append(_vnf(f"{region}-lb", "load_balancer", region, f"{region}-host-1", "cdnaas-lb"))
        vnfs.extend(_vnf(f"{region}-cache-{k + 1}", "cache", region,
                         f"{region}-host-{k % cache_hosts + 1}", "cdnaas-cache", vcpus=2)
                    for k in range(caches[region]))
        if index == 0:
            vnfs.append(_vnf("dns-1", "dns", region, f"{region}-host-1", "cdnaas-dns"))
    return {
        "vcdn_id": vcdn_id,
        "flavor": "static",
        "template_version": 1,
        "hostname": f"{vcdn_id}.cdn.example.net",
        "origin": {"scheme": "http", "host": "origin.example.com", "port": 8080},
        "default_region": regions[0],
        "regions": [{"name": region, "zone": f"{region}-az", "vim_region": None,
                     "client_prefixes": [f"10.{i + 1}.0.0/16"], "demand": 5000,
                     "quality": {"min_mos": 4.0}}
                    for i, region in enumerate(regions)],
        "vnfs": vnfs,
    }


def _vnf(name, role, region, host, image, vcpus=1):
    return {"name": name, "role": role, "region": region, "host": host, "vcpus": vcpus,
            "ram_mb": 512, "image": image, "config_templates": []}
