"""How the CLI shows things: rich tables for people, raw JSON with ``--json``.

Tables and messages go to stdout; progress bars and notes go to stderr, so
``cdnaas --json ... | jq`` always sees JSON alone.
"""
import contextlib
import json
import os
import sys

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cdnaas.cli.client import follow_operation

STATE_STYLES = {"COMPLETED": "green", "ACTIVE": "green", "FAILED": "red", "ROLLED_BACK": "red",
                "PROCESSING": "yellow", "DEPLOYING": "yellow", "UPDATING": "yellow",
                "DELETING": "yellow", "PENDING": "dim", "SCHEDULED": "cyan", "DELETED": "dim",
                "SKIPPED": "dim"}


def _width(stream):
    """Terminal width on a terminal; else ``COLUMNS`` or 160, so piped tables stay readable."""
    try:
        if stream.isatty():
            return None
    except (AttributeError, ValueError):
        pass
    try:
        return int(os.environ.get("COLUMNS", "160"))
    except ValueError:
        return 160


def out():
    """Console on stdout (resolved at call time, so test runners can capture it)."""
    return Console(soft_wrap=True, highlight=False, width=_width(sys.stdout))


def err():
    """Console on stderr for progress and notes."""
    return Console(stderr=True, soft_wrap=True, highlight=False, width=_width(sys.stderr))


def wants_json():
    ctx = click.get_current_context(silent=True)
    return bool(ctx and ctx.find_root().obj and ctx.find_root().obj.get("json"))


def note(message):
    """A remark for people (stderr), never mixed with JSON on stdout."""
    err().print(message)


def show(data, render):
    """Print ``data`` as JSON with ``--json``, else call ``render(data)`` to draw it."""
    if wants_json():
        click.echo(json.dumps(data, indent=2, sort_keys=False))
    else:
        render(data)


def styled(state):
    if state is None:
        return "-"
    style = STATE_STYLES.get(state)
    return f"[{style}]{state}[/{style}]" if style else str(state)


def _cell(value):
    """What a table shows for ``value``: text, or a rich renderable as it is."""
    if value is None:
        return "-"
    if hasattr(value, "__rich_console__") or hasattr(value, "__rich__"):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(item) for item in value) or "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
    return str(value)


def table(rows, columns, title=None):
    """Print ``rows`` (dicts) as a table of ``columns``: ``[(heading, key or callable)]``."""
    grid = Table(title=title, title_justify="left")
    for heading, _ in columns:
        grid.add_column(heading, overflow="fold")
    for row in rows:
        grid.add_row(*[_cell(getter(row) if callable(getter) else row.get(getter))
                       for _, getter in columns])
    out().print(grid)


def fields(record, keys, title=None):
    """Print one record as a two-column table of ``keys``: ``[(label, key or callable)]``."""
    grid = Table(show_header=False, title=title, title_justify="left")
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    for label, getter in keys:
        grid.add_row(label, _cell(getter(record) if callable(getter) else record.get(getter)))
    out().print(grid)


# -- renderers of the API's objects -----------------------------------------------------------

def quality_text(quality):
    quality = quality or {}
    if "min_mos" in quality:
        return f"MOS >= {quality['min_mos']}"
    if "response_time" in quality:
        rt = quality["response_time"]
        return f"p{rt.get('percentile')} <= {rt.get('max_ms')} ms"
    return "-"


def render_flavors(flavors):
    table(flavors, [("Flavor", "name"), ("Version", "version"), ("Technology", "technology"),
                    ("Quality targets", "quality_targets"), ("Description", "description")])


def render_regions(regions):
    table(regions, [("Region", "name"), ("Default", "default"), ("Client prefixes", "client_prefixes"),
                    ("Zone", "zone"), ("VIM region", "vim_region"), ("Hosts", "hosts"),
                    ("vCPUs", "vcpus"), ("Description", "description")])


def render_region(region):
    fields(region, [("Region", "name"), ("Description", "description"), ("Default", "default"),
                    ("Client prefixes", "client_prefixes"), ("Zone", "zone"),
                    ("VIM region", "vim_region"), ("Hosts", "hosts"), ("vCPUs", "vcpus")])


def render_hosts(hosts):
    table(hosts, [("Host", "name"), ("Region", "region"), ("vCPUs", "vcpus"),
                  ("Reserved", "reserved_vcpus"), ("RAM MB", "ram_mb"), ("Idle W", "idle_watts"),
                  ("Peak W", "peak_watts"), ("Enabled", "enabled"),
                  *([("Power", "power")] if any("power" in h for h in hosts) else [])])


def render_host(host):
    render_hosts([host])


def render_tenants(tenants):
    table(tenants, [("Tenant", "name"), ("Role", "role"), ("Created", "created_at")])


def render_users(users):
    table(users, [("User", "name"), ("Tenant", "tenant"), ("Tokens", "tokens"),
                  ("Created", "created_at")])


def expiry_text(token):
    """When a token expires: ``never``, the time, or the time marked expired."""
    if not token.get("expires_at"):
        return "never"
    return f"[red]{token['expires_at']} (expired)[/red]" if token.get("expired") \
        else token["expires_at"]


def render_tokens(tokens):
    table(tokens, [("Token id", "id"), ("Tenant", "tenant"), ("User", "user"), ("Scope", "scope"),
                   ("Expires", expiry_text), ("Description", "description"),
                   ("Created", "created_at")])


def render_new_token(token):
    fields(token, [("Token id", "id"), ("Tenant", "tenant"), ("User", "user"), ("Scope", "scope"),
                   ("Expires", expiry_text), ("Description", "description")])
    out().print(f"Secret (shown only now): [bold]{token.get('token')}[/bold]")


def render_templates(templates):
    table(templates, [("Flavor", "flavor"), ("Version", "version"), ("Plugin", "plugin"),
                      ("Technology", "technology"),
                      ("Offered", lambda t: "deprecated" if t.get("deprecated") else "yes"),
                      ("Description", "description")])


def render_vcdns(vcdns):
    table(vcdns, [("Id", "id"), ("Name", "name"), ("Tenant", "tenant"), ("Flavor", "flavor"),
                  ("State", lambda v: styled(v.get("state"))),
                  ("Regions", lambda v: ", ".join(r.get("name", "?") for r in v.get("regions") or [])
                   or "-"),
                  ("Hostname", lambda v: (v.get("entry_point") or {}).get("hostname") or "-"),
                  ("Lease end", lambda v: (v.get("lease") or {}).get("end") or "-")])


def render_vcdn(vcdn):
    entry = vcdn.get("entry_point") or {}
    lease = vcdn.get("lease") or {}
    fields(vcdn, [("Id", "id"), ("Name", "name"), ("Tenant", "tenant"),
                  ("Flavor", lambda v: f"{v.get('flavor')} (template v{v.get('template_version')})"),
                  ("Origin", "origin"), ("State", lambda v: styled(v.get("state"))),
                  ("Reason", "state_reason"),
                  ("Lease", lambda v: f"{lease.get('start') or 'now'} -> {lease.get('end')}"),
                  ("Hostname", lambda v: entry.get("hostname") or "-"),
                  ("DNS servers", lambda v: _cell(entry.get("dns_servers")) if entry.get("dns_servers")
                   or not entry.get("hostname") else "once it is deployed"),
                  ("Name servers", lambda v: [
                      f"{ns['name']} ({', '.join(ns['addresses']) or 'once it is deployed'})"
                      for ns in entry.get("name_servers") or []]),
                  ("Hostnames", lambda v: [f"{h['hostname']} ({h['status']})"
                                           for h in v.get("custom_hostnames") or []]),
                  ("vCPUs", lambda v: vcpus_text(v.get("regions") or [])),
                  *_tls_fields(vcdn.get("tls"), vcdn.get("managed_certificate")),
                  ("HTTPS policy", lambda v: _https_policy_cell(v.get("https_policy"))),
                  ("ETag", lambda v: f'"{v["revision"]}"' if "revision" in v else None)],
           title=f"vCDN {vcdn.get('name')}")
    render_region_summaries(vcdn.get("regions") or [])


#: how a certificate's expiry state is shown (the API's ``tls.expiry_state``)
EXPIRY_STYLES = {"ok": "green", "expiring": "yellow", "expired": "red"}


def _tls_fields(tls, managed=False):
    """Rows of a vCDN's certificate (tenant-made text: shown, never read as markup)."""
    if not tls:
        return [("HTTPS", lambda v: "not yet (managed certificate being obtained)" if managed
                 else "no (HTTP only)")]
    state = tls.get("expiry_state")
    return [("HTTPS", lambda v: escape(f"{tls.get('subject')} ({_cell(tls.get('names'))})")),
            ("Certificate", lambda v: "managed (ACME, renewed by the service)" if managed
             else "uploaded"),
            ("Issuer", lambda v: escape(str(tls.get("issuer")))),
            ("Valid until", lambda v: f"{tls.get('not_after')} "
             f"[{EXPIRY_STYLES.get(state, 'default')}]({tls.get('days_left')} days left, "
             f"{state})[/]"),
            ("SHA-256", lambda v: tls.get("fingerprint_sha256"))]


def _https_policy_cell(policy):
    """A vCDN's HTTPS policy on one line (None: not shown, an older API)."""
    if not policy:
        return None
    hsts = policy.get("hsts")
    return (f"HTTP {policy.get('http')}, TLS {policy.get('min_tls_version')}+, unknown names "
            f"{policy.get('unknown_sni')}d, HSTS "
            + (f"max-age={hsts.get('max_age')}" + " includeSubDomains" * bool(
                hsts.get("include_subdomains")) + " preload" * bool(hsts.get("preload"))
               if hsts else "off"))


def render_quote(quote):
    price = quote.get("price") or {}
    lease = quote.get("lease") or {}
    fields(quote, [("Flavor", "flavor"), ("vCPUs", lambda q: vcpus_text(q.get("regions") or [])),
                   ("Power", lambda q: f"{q.get('power_watts')} W at peak demand"),
                   ("Lease", lambda q: f"{lease.get('start')} -> {lease.get('end')} "
                                       f"({lease.get('hours')} h)"),
                   ("Energy", lambda q: f"{q.get('energy_kwh')} kWh over the lease"),
                   ("Price", lambda q: f"{price.get('amount')} {price.get('currency')}")],
           title="Quote (nothing reserved)")
    table(quote.get("regions") or [],
          [("Region", "name"), ("Demand", "demand"), ("Caches", "caches"), *VCPU_COLUMNS,
           ("Hosts", lambda r: _cell(r.get("hosts"))),
           ("Predicted MOS", lambda r: r.get("predicted_mos") if r.get("predicted_mos") is not None
            else "-"),
           ("Power (W)", "power_watts")])


def render_region_summaries(regions):
    table(regions, [("Region", "name"), ("Demand", "demand"),
                    ("Quality", lambda r: quality_text(r.get("quality"))),
                    ("Caches", "caches"), *VCPU_COLUMNS, ("Load balancer", "load_balancer")])


#: a region's vCPUs, in a quote and a vCDN alike: its caches', then every VNF's
VCPU_COLUMNS = [("Cache vCPUs", "cache_vcpus"), ("All vCPUs", "vcpus")]


def vcpus_text(regions):
    """The vCPUs of ``regions`` (a quote's or a vCDN's): the caches' and every VNF's."""
    caches = sum(r.get("cache_vcpus") or 0 for r in regions)
    total = sum(r.get("vcpus") or 0 for r in regions)
    return f"{caches} in caches, {total} in all (caches, balancers, DNS)"


def render_operation(operation):
    fields(operation, [("Operation", "id"), ("vCDN", "vcdn_id"), ("Type", "type"),
                       ("State", lambda o: styled(o.get("state"))), ("Reason", "reason"),
                       ("Error", "error"), ("Created", "created_at"), ("Updated", "updated_at")])
    render_steps(operation.get("steps") or [])


def render_steps(steps):
    table(steps, [("Step", "name"), ("State", lambda s: styled(s.get("state"))),
                  ("Done", lambda s: f"{s.get('done', 0)}/{s.get('total', 0)}")])


def render_accepted(accepted):
    vcdn, operation = accepted.get("vcdn") or {}, accepted.get("operation") or {}
    out().print(f"vCDN [bold]{vcdn.get('name')}[/bold] ({vcdn.get('id')}): "
                f"{styled(vcdn.get('state'))}; operation {operation.get('id')} "
                f"{styled(operation.get('state'))}")
    out().print(f"Follow it with: cdnaas op watch {operation.get('id')}")


# -- progress of local work -------------------------------------------------------------------

@contextlib.contextmanager
def steps(title, quiet=False):
    """Draw a bar per step on stderr; yield ``progress(step, done, total)`` to report with."""
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err(), transient=False,
                  disable=quiet or wants_json()) as bars:
        header = bars.add_task(title, total=None)
        tasks = {}

        def progress(step, done, total):
            if step not in tasks:
                tasks[step] = bars.add_task(f"  {step}", total=max(total, 1))
            bars.update(tasks[step], total=max(total, 1), completed=min(done, total))

        yield progress
        bars.update(header, total=1, completed=1)


# -- following an operation -------------------------------------------------------------------

class OperationTimeout(click.ClickException):
    """The operation did not finish in the time allowed."""


def watch_operation(fetch, operation_id, interval=0.5, timeout=600.0, quiet=False):
    """Poll ``fetch(operation_id)`` until the operation ends; draw a bar per step on stderr.

    :returns: the operation in its terminal state.
    :raises OperationTimeout: it is still running after ``timeout`` seconds.
    """
    console = err()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[state]}"), TimeElapsedColumn(),
                  console=console, transient=False, disable=quiet) as progress:
        header = progress.add_task(f"operation {operation_id}", total=None, state="")
        tasks = {}
        try:
            for operation in follow_operation(fetch, operation_id, interval, timeout):
                progress.update(header, description=f"{operation.get('type', 'operation')} "
                                f"{operation_id}", state=styled(operation.get("state")))
                for step in operation.get("steps") or []:
                    name = step.get("name", "?")
                    total = max(int(step.get("total") or 0), 1)
                    done = int(step.get("done") or 0)
                    if step.get("state") in ("COMPLETED", "SKIPPED"):
                        done = total
                    if name not in tasks:
                        tasks[name] = progress.add_task(f"  {name}", total=total, state="")
                    progress.update(tasks[name], total=total, completed=min(done, total),
                                    state=styled(step.get("state")))
        except TimeoutError as exc:
            raise OperationTimeout(f"{exc}; follow it with: cdnaas op watch "
                                   f"{operation_id}") from None
        progress.update(header, total=1, completed=1)
        return operation


def render_log_streams(found):
    """A vCDN's log streams (``GET /api/v1/vcdns/{id}/log-streams``): each destination of
    each VNF's shipper with what it sent, dropped and holds, then the totals."""
    streams = found.get("log_streams") or []
    if not streams:
        out().print("No log streams.")
    targets = [s.get("address") or s.get("url") for s in streams]
    rows = [{"vnf": vnf.get("name"), "region": vnf.get("region"), **destination}
            for vnf in found.get("vnfs") or []
            for destination in ((vnf.get("shipper") or {}).get("destinations")
                                or [{"name": "-", "last_error": "no shipper answers"}])]
    table(rows, [("VNF", "vnf"), ("Region", "region"), ("Destination", "name"),
                 ("Target", "target"), ("Sent", "sent"), ("Dropped", "dropped"),
                 ("Queued", "queued"), ("Failures", "failures"), ("Last error", "last_error")],
          title=f"Log streams: {', '.join(targets) or 'none'}")
    totals = found.get("totals") or {}
    out().print(f"received {totals.get('received', 0):,}, sent {totals.get('sent', 0):,}, "
                f"dropped {totals.get('dropped', 0):,}")
