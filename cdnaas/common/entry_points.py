"""A vCDN's entry point as every service names it: the hostname customers CNAME to, and
the stable name servers the operator's zone delegates it to, one per DNS VNF, named
after the VNF (``<vnf>.<hostname>``): a region change moves their addresses (glue),
never their names."""


def name_server(vnf_name, hostname):
    """The NS name of the DNS VNF ``vnf_name`` of the vCDN ``hostname``."""
    return f"{vnf_name}.{hostname}"


def planned(sig):
    """The entry point of a vCDN not deployed yet (SCHEDULED, DEPLOYING): its hostname
    and the names of its name servers (known from its SIG at creation), without
    addresses."""
    return {"hostname": sig.hostname, "dns_servers": [],
            "name_servers": [{"name": name_server(v.name, sig.hostname), "addresses": []}
                             for v in sig.vnfs_in(role="dns")]}
