"""``cdnaas demo``: the README's main job, end to end, on the embedded default.

Starts the stack (or reuses it), makes an operator token, registers two regions
with two hosts each and the static flavor's template, creates tenant ``demo``
and leases it a vCDN in both regions, following the deployment. Everything that
already exists is kept, so a second run works; the ``demo`` vCDN is replaced.
"""
import datetime as dt
import importlib.resources
import ipaddress
import os
import subprocess
import sys
import time
from pathlib import Path

import click

from cdnaas.cli import client, output
from cdnaas.cli import stack as stacks
from cdnaas.common import config, errors, timeutil
from cdnaas.common.clients import RoClient

TENANT = "demo"
VCDN = "demo"
FLAVOR = "static"
ORIGIN_PORT = 8080
ORIGIN = f"http://127.0.0.1:{ORIGIN_PORT}"
#: The origin policy refuses loopback origins; the demo's stack allows its sample origin.
ORIGIN_ALLOW = f"127.0.0.1:{ORIGIN_PORT}"
SAMPLE_OBJECT = "/video/hd/seg-1.m4s"
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


def allow_sample_origin():
    """Add :data:`ORIGIN_ALLOW` to ``CDNAAS_ORIGIN_ALLOW`` for the stack this demo starts
    (the operator's own entries are kept)."""
    allowed = config.origin_allow()
    if ORIGIN_ALLOW not in allowed:
        os.environ["CDNAAS_ORIGIN_ALLOW"] = ",".join([*allowed, ORIGIN_ALLOW])


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


def ensure_origin(timeout=10.0):
    """Run the sample origin in the background (recorded with the stack) unless it answers.

    It listens on all addresses: the local driver's caches reach this machine's
    origins at their bridge's gateway, never through loopback.
    """
    url = f"http://127.0.0.1:{ORIGIN_PORT}"
    if stacks.healthy_url(f"{url}/_stats"):
        output.note(f"    the sample origin answers on {url}")
        return
    log = open(stacks.pid_file().parent / "logs" / "origin.log", "ab")  # noqa: SIM115
    with log:
        process = subprocess.Popen(  # pylint: disable=consider-using-with
            [sys.executable, "-m", "cdnaas.origin.server", "--host", "0.0.0.0",
             "--port", str(ORIGIN_PORT)], stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
    stacks.record_process("origin", process.pid, url)
    deadline = time.monotonic() + timeout
    while not stacks.healthy_url(f"{url}/_stats"):
        if process.poll() is not None or time.monotonic() > deadline:
            raise click.ClickException(f"the sample origin did not start on port {ORIGIN_PORT}; "
                                       "is the port taken?")
        time.sleep(0.05)
    output.note(f"    started the sample origin on {url} (objects of 43 B, 73 KB, 435 KB)")


def show_from_clients(vcdn):
    """With the local driver: resolve and fetch as a viewer of each region would."""
    try:
        driver = RoClient().get_deployment(vcdn["id"]).driver
    except errors.CdnaasError:
        return
    if driver != "local":
        output.note(f"    (driver {driver}: no real clients to show)")
        return
    from cdnaas.ro.vim.local import clients

    entry = vcdn["entry_point"]
    rows = []
    for index, region in enumerate(REGIONS):
        address = ipaddress.ip_network(region["client_prefixes"][0]).network_address + 10
        dns_server = entry["dns_servers"][index]
        with clients.client(vcdn["id"], region["name"], address) as viewer:
            answer = viewer.resolve(dns_server, entry["hostname"])
            for attempt in (1, 2):
                status, headers, body = viewer.fetch(
                    f"http://{entry['hostname']}{SAMPLE_OBJECT}",
                    resolve=(entry["hostname"], answer[0]) if answer else None)
                rows.append({"region": region["name"], "client": str(address),
                             "dns": f"@{dns_server} -> {', '.join(answer) or 'no answer'}",
                             "fetch": f"#{attempt} HTTP {status}, {len(body)} B",
                             "cache": headers.get("x-cache-status", "-"),
                             "served_by": headers.get("x-served-by", "-")})
    output.table(rows, [("Region", "region"), ("Client", "client"), ("DNS answer", "dns"),
                        ("Fetch " + SAMPLE_OBJECT, "fetch"), ("X-Cache-Status", "cache"),
                        ("Served by", "served_by")])


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


def register_template(operator):
    path = template_path()
    _created_or_exists(f"template {FLAVOR} ({path})", lambda: operator.register_template_file(path))


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
        if previous.get("name") != VCDN:
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
    try:
        accepted = tenant.create_vcdn(body)
    except errors.BadRequest as exc:
        if exc.field != "origin":
            raise
        raise click.ClickException(
            f"{exc.message}\nThe running stack was started without CDNAAS_ORIGIN_ALLOW="
            f"{ORIGIN_ALLOW}: stop it (cdnaas down) and run the demo again, which starts "
            "one that allows the sample origin.") from None
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
    console.print(f"Portal: {config.service_url('api')}/portal/#token={tenant_token}")
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
    allow_sample_origin()
    ensure_stack(timeout)
    ensure_origin()
    api_url = config.service_url("api")
    step("operator token")
    operator = operator_client(api_url)
    step("regions and hosts")
    register_infrastructure(operator)
    step(f"service template of flavor {FLAVOR}")
    register_template(operator)
    step(f"tenant {TENANT}")
    tenant, tenant_token = tenant_client(operator, api_url)
    step(f"vCDN {VCDN} for {ORIGIN} in {', '.join(r['name'] for r in REGIONS)}")
    remove_previous(tenant, timeout)
    vcdn, operation = lease_vcdn(tenant, timeout)
    output.show({"vcdn": vcdn, "operation": operation, "tenant_token": tenant_token},
                lambda _: summary(vcdn, operation, tenant_token))
    if operation.get("state") != "COMPLETED":
        raise click.exceptions.Exit(1)
    step("seen from a client in each region")
    show_from_clients(vcdn)
