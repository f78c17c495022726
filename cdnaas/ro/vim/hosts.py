"""A DNS VNF's place in its region's subnet (:mod:`cdnaas.vnf.subnet`), or the refusal of
one too many."""
from cdnaas.ro.vim.base import DeploymentFailed
from cdnaas.vnf.subnet import DNS_HOSTS


def dns_host(sig, vnf):
    """The host number of DNS VNF ``vnf``: by its place among ``sig``'s DNS VNFs.

    :raises DeploymentFailed: ``sig`` has more DNS VNFs than :data:`DNS_HOSTS`.
    """
    index = [v.name for v in sig.vnfs_in(role="dns")].index(vnf.name)
    if index >= len(DNS_HOSTS):
        raise DeploymentFailed(f"{vnf.name}: a vCDN has at most {len(DNS_HOSTS)} DNS VNFs")
    return DNS_HOSTS[index]
