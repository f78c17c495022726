"""``cdnaas quota``: a tenant's quotas and what it uses; operators set limits and defaults."""
import re

import click

from cdnaas.cli import output
from cdnaas.cli.api_commands import api

#: ``NAME=LIMIT`` (``default``: back to the default)
LIMIT = re.compile(r"^([a-z_]+)=(\d+|default)$")


@click.group()
def quota():
    """Quotas: how much a tenant may hold (operators set them)."""


@quota.command("show")
@click.option("--tenant", help="The tenant (operators; a tenant always sees its own).")
@click.option("--defaults", is_flag=True, help="The operator's defaults instead.")
def quota_show(tenant, defaults):
    """The quotas with what counts against each now."""
    if defaults:
        output.show(api().quota_defaults(), render_quotas)
    else:
        output.show(api().quotas(tenant), render_quotas)


@quota.command("set")
@click.argument("limits", nargs=-1, required=True, metavar="NAME=LIMIT...")
@click.option("--tenant", help="The tenant whose limits to set.")
@click.option("--defaults", is_flag=True, help="Set the defaults of every tenant instead.")
def quota_set(limits, tenant, defaults):
    """Set limits, e.g. ``vcdns=10 vcpus_per_region=64`` (``NAME=default``: back to the
    default) of --tenant or, with --defaults, of every tenant without its own (operator)."""
    if bool(tenant) == defaults:
        raise click.UsageError("name a --tenant, or give --defaults")
    body = {}
    for text in limits:
        found = LIMIT.match(text)
        if not found:
            raise click.BadParameter(f"{text!r} is not NAME=LIMIT (a whole number or default)",
                                     param_hint="LIMITS")
        body[found[1]] = None if found[2] == "default" else int(found[2])
    answer = api().set_quota_defaults(body) if defaults else api().set_quotas(tenant, body)
    output.show(answer, render_quotas)


def render_quotas(answer):
    """A table of the quotas: limit, use and the share of it taken."""
    def share(row):
        if "in_use" not in row:
            return None
        return f"{row['in_use'] / row['limit']:.0%}" if row["limit"] else "-"
    title = f"Quotas of {answer['tenant']}" if answer.get("tenant") else "Default quotas"
    output.table(answer["quotas"], [("Quota", "name"), ("Limit", "limit"), ("In use", "in_use"),
                                    ("Taken", share), ("What it limits", "description")],
                 title=title)
