"""``openstack cdn vcdn create|list|show|set|delete|purge|usage``: one class per verb."""
from cliff import command, lister, show
from osc_lib import exceptions
from osc_lib.cli import format_columns

from cdnaas.cli import bodies
from cdnaas.cli.api_commands import VCDN_STATES
from cdnaas.common import timeutil
from cdnaas.osc.v1.base import (ApiCommand, CachesColumn, RegionsColumn, add_wait_options,
                                finish, find_vcdn, iso_time, option_type)

#: the fields of ``vcdn show`` (and create), in order: name -> how it is read from a vCDN
FIELDS = {
    "id": lambda v: v["id"],
    "name": lambda v: v["name"],
    "tenant": lambda v: v.get("tenant"),
    "flavor": lambda v: v.get("flavor"),
    "template_version": lambda v: v.get("template_version"),
    "origin": lambda v: v.get("origin"),
    "state": lambda v: v.get("state"),
    "state_reason": lambda v: v.get("state_reason"),
    "lease_start": lambda v: (v.get("lease") or {}).get("start"),
    "lease_end": lambda v: (v.get("lease") or {}).get("end"),
    "hostname": lambda v: (v.get("entry_point") or {}).get("hostname"),
    "dns_servers": lambda v: format_columns.ListColumn(
        (v.get("entry_point") or {}).get("dns_servers") or []),
    "hostnames": lambda v: format_columns.ListColumn(v.get("hostnames") or []),
    "regions": lambda v: RegionsColumn(v.get("regions") or []),
    "revision": lambda v: v.get("revision"),
    "created_at": lambda v: v.get("created_at"),
    "updated_at": lambda v: v.get("updated_at"),
}


def vcdn_fields(vcdn):
    """``(names, values)`` of a vCDN as ``ShowOne`` returns them."""
    return tuple(FIELDS), tuple(read(vcdn) for read in FIELDS.values())


def _add_region_option(parser, flag, dest, update, help_text):
    parser.add_argument(flag, dest=dest, action="append", default=[],
                        type=option_type(bodies.parse_region, update),
                        metavar="<name:demand[:quality]>" if not update
                        else "<name[:demand][:quality]>", help=help_text)


class CreateVcdn(ApiCommand, show.ShowOne):
    """Lease a vCDN"""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("name", metavar="<name>",
                            type=option_type(bodies.check_name, "vCDN"), help="Name of the vCDN.")
        parser.add_argument("--flavor", required=True, metavar="<flavor>",
                            help="Flavor (see: openstack cdn flavor list).")
        parser.add_argument("--origin", required=True, metavar="<url>",
                            help="Origin server: http(s)://host[:port].")
        _add_region_option(parser, "--region", "regions", False,
                           "Region, peak concurrent viewers and quality: a minimum MOS "
                           "(eu-west:1000:4.0) or a percentile response time in ms "
                           "(eu-west:1000:p95=200). Repeat for each region (required).")
        parser.add_argument("--min-mos", type=float, default=bodies.DEFAULT_MIN_MOS,
                            metavar="<mos>", help="Minimum MOS of the regions that name no "
                            f"quality of their own (default {bodies.DEFAULT_MIN_MOS}).")
        parser.add_argument("--lease-start", type=option_type(iso_time), metavar="<time>",
                            help="When it must serve (ISO 8601; default now).")
        lease = parser.add_mutually_exclusive_group(required=True)
        lease.add_argument("--lease-end", type=option_type(iso_time), metavar="<time>",
                           help="When it ends (ISO 8601).")
        lease.add_argument("--lease-hours", type=float, metavar="<hours>",
                           help="Lease length in hours from its start.")
        parser.add_argument("--hostname", dest="hostnames", action="append", default=[],
                            metavar="<hostname>", help="Your own name for the vCDN (a CNAME "
                            "of its hostname). Repeat for each name.")
        add_wait_options(parser)
        return parser

    def take_action(self, parsed_args):
        if not parsed_args.regions:
            raise exceptions.CommandError("give at least one --region")
        try:
            body = bodies.vcdn_request(
                parsed_args.name, parsed_args.flavor, parsed_args.origin, parsed_args.regions,
                parsed_args.min_mos, parsed_args.lease_start, parsed_args.lease_end,
                parsed_args.lease_hours)
        except ValueError as exc:
            raise exceptions.CommandError(str(exc)) from None
        if parsed_args.hostnames:
            body["hostnames"] = parsed_args.hostnames
        accepted = self.api.create_vcdn(body)
        if parsed_args.wait:
            finish(self.api, accepted, parsed_args.timeout)
        names, values = vcdn_fields(self.api.vcdn(accepted["vcdn"]["id"]))
        return names + ("operation",), values + (accepted["operation"]["id"],)


class ListVcdn(ApiCommand, lister.Lister):
    """List vCDNs (an operator sees every tenant's)"""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("--state", choices=VCDN_STATES, type=str.upper,
                            metavar="<state>", help="Only vCDNs in this state: "
                            + ", ".join(VCDN_STATES) + ".")
        parser.add_argument("--name", metavar="<name>", help="Only vCDNs of this name.")
        parser.add_argument("--all", dest="everything", action="store_true",
                            help="Also DELETED vCDNs (hidden otherwise).")
        return parser

    def take_action(self, parsed_args):
        found = self.api.vcdns(state=parsed_args.state, name=parsed_args.name,
                               include_deleted=parsed_args.everything)
        return (("ID", "Name", "Tenant", "Flavor", "State", "Regions", "Hostname", "Lease end"),
                ((v["id"], v["name"], v.get("tenant"), v.get("flavor"), v.get("state"),
                  format_columns.ListColumn([r.get("name") for r in v.get("regions") or []]),
                  (v.get("entry_point") or {}).get("hostname"), (v.get("lease") or {}).get("end"))
                 for v in found))


class ShowVcdn(ApiCommand, show.ShowOne):
    """Show a vCDN: state, entry point, regions"""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("vcdn", metavar="<vcdn>", help="vCDN (name or ID).")
        return parser

    def take_action(self, parsed_args):
        return vcdn_fields(find_vcdn(self.api, parsed_args.vcdn))


class SetVcdn(ApiCommand, command.Command):
    """Change a vCDN: demand and quality of regions, regions added or removed, origin,
    lease end, hostnames (one operation)"""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("vcdn", metavar="<vcdn>", help="vCDN to change (name or ID).")
        _add_region_option(parser, "--region", "regions", True,
                           "Region to change: name:demand, name::quality or "
                           "name:demand:quality. Repeat for each region.")
        _add_region_option(parser, "--add-region", "added", False,
                           "Region to add (quality as --region of create; default MOS "
                           f"{bodies.DEFAULT_MIN_MOS}). Repeat for each region.")
        parser.add_argument("--remove-region", dest="removed", action="append", default=[],
                            type=option_type(bodies.check_name, "region"), metavar="<name>",
                            help="Region to remove (never all of them). Repeat for each.")
        parser.add_argument("--origin", metavar="<url>", help="New origin: http(s)://host[:port].")
        parser.add_argument("--lease-end", type=option_type(iso_time), metavar="<time>",
                            help="New lease end (ISO 8601; later or earlier, not past).")
        names = parser.add_mutually_exclusive_group()
        names.add_argument("--hostname", dest="hostnames", action="append", metavar="<hostname>",
                           help="Replace the vCDN's own names by these. Repeat for each name.")
        names.add_argument("--no-hostname", dest="hostnames", action="store_const", const=[],
                           help="Serve only the vCDN's hostname.")
        parser.add_argument("--if-match", metavar="<etag>", help="Change it only if its "
                            "revision (ETag) is still this one (see: vcdn show).")
        add_wait_options(parser)
        return parser

    def take_action(self, parsed_args):
        body = bodies.vcdn_change(parsed_args.regions, parsed_args.added, parsed_args.removed,
                                  parsed_args.origin, parsed_args.lease_end,
                                  parsed_args.hostnames)
        if not body:
            raise exceptions.CommandError("nothing to change: give --region, --add-region, "
                                          "--remove-region, --origin, --lease-end, "
                                          "--hostname or --no-hostname")
        vcdn = find_vcdn(self.api, parsed_args.vcdn)
        if_match = f'"{parsed_args.if_match.strip(chr(34))}"' if parsed_args.if_match else None
        accepted = self.api.update_vcdn(vcdn["id"], body, if_match=if_match)
        if parsed_args.wait:
            finish(self.api, accepted, parsed_args.timeout)


class DeleteVcdn(ApiCommand, command.Command):
    """End vCDNs and release everything they hold"""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("vcdns", metavar="<vcdn>", nargs="+",
                            help="vCDN(s) to end (name or ID).")
        add_wait_options(parser)
        return parser

    def take_action(self, parsed_args):
        accepted = [self.api.delete_vcdn(find_vcdn(self.api, ref)["id"])
                    for ref in parsed_args.vcdns]
        if parsed_args.wait:
            for one in accepted:
                finish(self.api, one, parsed_args.timeout)


class PurgeVcdn(ApiCommand, show.ShowOne):
    """Purge paths and prefixes from every cache of a vCDN"""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("vcdn", metavar="<vcdn>", help="vCDN (name or ID).")
        parser.add_argument("--path", dest="paths", action="append", default=[],
                            metavar="<path>", help="A path as viewers request it "
                            "(/img/a.png?v=2). Repeat for each path.")
        # (--prefix is the shell formatter's, as in every ShowOne)
        parser.add_argument("--path-prefix", dest="prefixes", action="append", default=[],
                            metavar="<prefix>", help="Purge every object whose path starts "
                            "with it (/video/). Repeat for each prefix.")
        add_wait_options(parser)
        return parser

    def take_action(self, parsed_args):
        if not parsed_args.paths and not parsed_args.prefixes:
            raise exceptions.CommandError("give at least one --path or --path-prefix")
        vcdn = find_vcdn(self.api, parsed_args.vcdn)
        accepted = self.api.invalidate(vcdn["id"], parsed_args.paths, parsed_args.prefixes)
        operation = accepted["operation"]
        if parsed_args.wait:
            operation = finish(self.api, accepted, parsed_args.timeout)
        caches = [cache for step in operation.get("steps") or []
                  for cache in step.get("detail") or []]
        return (("operation", "vcdn", "state", "paths", "prefixes", "caches"),
                (operation["id"], vcdn["id"], operation.get("state"),
                 format_columns.ListColumn(parsed_args.paths),
                 format_columns.ListColumn(parsed_args.prefixes), CachesColumn(caches)))


class UsageVcdn(ApiCommand, lister.Lister):
    """What a vCDN used, region by region and in total, and its price"""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("vcdn", metavar="<vcdn>", help="vCDN (name or ID; a DELETED one "
                            "by ID).")
        parser.add_argument("--from", dest="since", type=option_type(iso_time), metavar="<time>",
                            help="Start (ISO 8601; default when the vCDN was created).")
        parser.add_argument("--to", dest="until", type=option_type(iso_time), metavar="<time>",
                            help="End (ISO 8601; default now).")
        return parser

    def take_action(self, parsed_args):
        vcdn = find_vcdn(self.api, parsed_args.vcdn)
        found = self.api.usage(vcdn["id"], timeutil.isoformat(parsed_args.since),
                               timeutil.isoformat(parsed_args.until))
        rows = [*found["regions"], {**found["total"], "name": "total"}]
        return (("Region", "Requests", "GB", "Hit ratio", "Viewer-hours", "vCPU-hours", "kWh",
                 "Price", "Currency"),
                ((r["name"], r["requests"], r["gb"], r["hit_ratio"], r["viewer_hours"],
                  r["vcpu_hours"], r["kwh"], r["price"]["amount"], r["price"]["currency"])
                 for r in rows))
