"""``cdnaas demo``: the README's main job, end to end, on the embedded default.

Starts the stack (or reuses it), makes an operator token, registers two regions
with two hosts each and the static flavor's template, creates tenant ``demo``
and leases it a vCDN in both regions, following the deployment. Everything that
already exists is kept, so a second run works; the ``demo`` vCDN is replaced.
"""
import datetime as dt
import importlib.resources
import os
from pathlib import Path

import click

from cdnaas.cli import client, output
from cdnaas.cli import stack as stacks
from cdnaas.common import config, errors, timeutil

TENANT = "demo"
VCDN = "demo"
FLAVOR = "static"
ORIGIN = "http://127.0.0.1:8080"
TOKEN_DESCRIPTION = "cdnaas demo"
HOST = {"vcpus": 16, "ram_mb": 65536, "idle_watts": 115, "peak_watts": 269}
REGIONS = (
    {"name": "eu-west", "description": "Demo region: Western Europe",
     "client_prefixes": ["10.1.0.0/16"], "zone": "az-1", "default": True},
    {"name": "us-east", "description": "Demo region: US East",
     "client_prefixes": ["10.2.0.0/16"], "zone": "az-2"},
)
DEMAND = 1000
MIN_MOS = 4.0
LEASE_HOURS = 24


def template_path() -> Path:
    """The static flavor's service template (in the source tree, or the installed package)."""
    in_tree = config.REPO_ROOT / "plugins" / "static" / "template.yaml"
    if in_tree.exists():
        return in_tree
    return Path(str(importlib.resources.files("cdnaas_plugins.static") / "template.yaml"))


def step(message):
    output.err().print(f"[bold cyan]==>[/bold cyan] {message}")


def _created_or_exists(what, call):
    """Run ``call``; a 409 means ``what`` exists already, which is fine here."""
    try:
        call()
        output.note(f"    created {what}")
    except errors.Conflict:
        output.note(f"    {what} exists already")


def ensure_stack(timeout):
    """Reuse the running stack if every service answers, else start one in the background."""
    urls = stacks.urls_of(os.environ)
    if all(stacks.healthy(url) for url in urls.values()):
        output.note("    every service answers already: reusing the running stack")
        return
    if stacks.running_pids():
        output.note("    part of a stack runs: restarting it")
        stacks.stop_recorded()
    stack = stacks.Stack()
    output.note(f"    starting the five services (state and logs in {stack.state_dir})")
    try:
        stack.start(timeout=timeout, detach=True)
    except stacks.StackError as exc:
        raise click.ClickException(str(exc)) from exc


def operator_client(api_url):
    """A client with a working operator token: the saved one, or a new one (then saved)."""
    saved = client.load_settings().get("token")
    if saved:
        candidate = client.ApiClient(base_url=api_url, token=saved)
        try:
            candidate.tenants()  # operators only
            output.note(f"    using the operator token saved in {client.config_path()}")
            return candidate
        except (errors.Unauthorized, errors.Forbidden):
            pass
    secret = client.bootstrap("admin", "operator", TOKEN_DESCRIPTION)
    path = client.save_settings(token=secret, api_url=api_url)
    output.note(f"    issued an operator token for tenant admin, saved in {path}")
    return client.ApiClient(base_url=api_url, token=secret)


def register_infrastructure(operator):
    for region in REGIONS:
        _created_or_exists(f"region {region['name']}", lambda r=region: operator.create_region(r))
        for number in (1, 2):
            host = {"name": f"{region['name']}-host-{number}", **HOST}
            _created_or_exists(f"host {host['name']}",
                               lambda r=region, h=host: operator.create_host(r["name"], h))


def register_template(sidr_url):
    sidr = client.TemplateClient(base_url=sidr_url)
    path = template_path()
    _created_or_exists(f"template {FLAVOR} ({path})", lambda: sidr.register_file(path))


def tenant_client(operator, api_url):
    """Create tenant ``demo`` if needed and a fresh token for it (revoking the demo's old ones)."""
    _created_or_exists(f"tenant {TENANT}", lambda: operator.create_tenant(TENANT, "tenant"))
    for old in operator.tokens(TENANT):
        if old.get("description") == TOKEN_DESCRIPTION:
            operator.revoke_token(TENANT, old["id"])
    issued = operator.create_token(TENANT, TOKEN_DESCRIPTION)
    output.note(f"    issued a token for tenant {TENANT}")
    return client.ApiClient(base_url=api_url, token=issued["token"]), issued["token"]


def remove_previous(tenant, timeout):
    """Delete the ``demo`` vCDNs a previous run left, waiting for them to go."""
    for previous in tenant.vcdns():
        if previous.get("name") != VCDN or previous.get("state") == "DELETED":
            continue
        output.note(f"    removing the previous demo vCDN {previous['id']} ({previous.get('state')})")
        operations = tenant.vcdn_operations(previous["id"])
        last = operations[-1] if operations else None
        if last and last.get("state") not in client.TERMINAL_STATES:
            output.watch_operation(tenant.operation, last["id"], timeout=timeout)
            if last.get("type") == "TERMINATE":
                continue
        if tenant.vcdn(previous["id"]).get("state") == "DELETED":
            continue
        accepted = tenant.delete_vcdn(previous["id"])
        done = output.watch_operation(tenant.operation, accepted["operation"]["id"], timeout=timeout)
        if done.get("state") != "COMPLETED":
            raise click.ClickException(f"could not delete the previous demo vCDN "
                                       f"{previous['id']}: {done.get('error')}")


def lease_vcdn(tenant, timeout):
    body = {"name": VCDN, "flavor": FLAVOR, "origin": ORIGIN,
            "regions": [{"name": r["name"], "demand": DEMAND, "quality": {"min_mos": MIN_MOS}}
                        for r in REGIONS],
            "lease": {"end": timeutil.isoformat(timeutil.utcnow() + dt.timedelta(hours=LEASE_HOURS))}}
    accepted = tenant.create_vcdn(body)
    operation = output.watch_operation(tenant.operation, accepted["operation"]["id"],
                                       timeout=timeout)
    return tenant.vcdn(accepted["vcdn"]["id"]), operation


def summary(vcdn, operation, tenant_token):
    output.render_vcdn(vcdn)
    entry = vcdn.get("entry_point") or {}
    console = output.out()
    if operation.get("state") != "COMPLETED":
        output.render_operation(operation)
        console.print(f"[red]the deployment ended {operation.get('state')}: "
                      f"{operation.get('error')}[/red]")
        return
    console.print(f"\n[bold green]vCDN {vcdn['name']} is {vcdn.get('state')}[/bold green]")
    console.print(f"Entry point: [bold]{entry.get('hostname', '-')}[/bold]; delegate it to "
                  f"DNS server(s) {', '.join(entry.get('dns_servers') or []) or '-'}")
    console.print("\nNext steps:")
    console.print(f"  export CDNAAS_TOKEN={tenant_token}   # tenant {TENANT}'s token")
    console.print(f"  cdnaas vcdn show {vcdn['id']}")
    console.print(f"  cdnaas vcdn delete {vcdn['id']} --wait   # end the vCDN")
    console.print("  cdnaas down                     # stop the stack")


@click.command()
@click.option("--timeout", default=300.0, show_default=True,
              help="Seconds to wait for the stack and for each operation.")
def demo(timeout):
    """Run the whole job on this machine: stack, regions, hosts, template, tenant and a vCDN."""
    step("stack")
    ensure_stack(timeout)
    api_url, sidr_url = config.service_url("api"), config.service_url("sidr")
    step("operator token")
    operator = operator_client(api_url)
    step("regions and hosts")
    register_infrastructure(operator)
    step(f"service template of flavor {FLAVOR}")
    register_template(sidr_url)
    step(f"tenant {TENANT}")
    tenant, tenant_token = tenant_client(operator, api_url)
    step(f"vCDN {VCDN} for {ORIGIN} in {', '.join(r['name'] for r in REGIONS)}")
    remove_previous(tenant, timeout)
    vcdn, operation = lease_vcdn(tenant, timeout)
    output.show({"vcdn": vcdn, "operation": operation, "tenant_token": tenant_token},
                lambda _: summary(vcdn, operation, tenant_token))
    if operation.get("state") != "COMPLETED":
        raise click.exceptions.Exit(1)
