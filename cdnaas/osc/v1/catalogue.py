"""``openstack cdn flavor list`` and ``openstack cdn region list``: what can be leased where."""
from cliff import lister
from osc_lib.cli import format_columns

from cdnaas.osc.v1.base import ApiCommand


class ListFlavor(ApiCommand, lister.Lister):
    """List the flavors offered (a template in SIDR and its plugin installed)"""

    def take_action(self, parsed_args):
        return (("Name", "Version", "Technology", "Quality targets", "Description"),
                ((f["name"], f.get("version"), f.get("technology"),
                  format_columns.ListColumn(f.get("quality_targets") or []), f.get("description"))
                 for f in self.api.flavors()))


class ListRegion(ApiCommand, lister.Lister):
    """List the regions where vCDNs can be deployed"""

    def take_action(self, parsed_args):
        return (("Name", "Default", "Client prefixes", "Zone", "VIM region", "Hosts", "vCPUs",
                 "Description"),
                ((r["name"], r.get("default"), format_columns.ListColumn(r.get("client_prefixes")
                                                                          or []),
                  r.get("zone"), r.get("vim_region"), r.get("hosts"), r.get("vcpus"),
                  r.get("description"))
                 for r in self.api.regions()))
