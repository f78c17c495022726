"""Commands that mirror the customer API (``api-spec/api.yaml``) and SIDR's templates."""
import datetime as dt
import functools
import re
import sys
from pathlib import Path

import click
import yaml
from rich.markup import escape

from cdnaas.cli import bodies, client, output
from cdnaas.cli.bodies import drop_none as _drop_none
from cdnaas.cli.bodies import parse_region
from cdnaas.common import caching, charts, errors, timeutil

AGO = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
AGO_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
#: the vCDN states of api-spec/common.yaml (``vcdn list --state``)
VCDN_STATES = ("SCHEDULED", "DEPLOYING", "ACTIVE", "UPDATING", "DELETING", "DELETED", "FAILED")
#: the Kind enum of api-spec/im.yaml (the API filters on it without checking it)
DECISION_KINDS = ("terminate", "health", "reconcile", "heal", "scale_out", "scale_in",
                  "consolidate", "power_down", "power_up")
OUTCOME_STYLES = {"started": "green", "healthy": "green", "marked": "cyan", "deferred": "yellow",
                  "held": "yellow", "refused": "red", "error": "red", "unhealthy": "red"}


def api():
    """The customer API client with the settings of this invocation."""
    obj = click.get_current_context().find_root().obj or {}
    return client.api_client(obj.get("api_url"), obj.get("token"))


# -- parameter types --------------------------------------------------------------------------

class RegionSpec(click.ParamType):
    """``--region NAME:DEMAND[:QUALITY]``."""

    name = "NAME:DEMAND[:QUALITY]"

    def __init__(self, update=False):
        self.update = update
        if update:
            self.name = "NAME[:DEMAND][:QUALITY]"

    def convert(self, value, param, ctx):
        if isinstance(value, dict):
            return value
        try:
            return parse_region(value, update=self.update)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        return None  # not reached


class IsoTime(click.ParamType):
    """An ISO 8601 time; without an offset it is UTC."""

    name = "ISO-TIME"

    def convert(self, value, param, ctx):
        if isinstance(value, dt.datetime):
            return value
        try:
            return timeutil.parse(value)
        except ValueError:
            self.fail(f"{value!r} is not an ISO 8601 time such as 2030-01-31T18:00:00Z",
                      param, ctx)
        return None  # not reached


class TimeOrAgo(IsoTime):
    """An ISO 8601 time, or how long before now: ``90s``, ``15m``, ``2h``, ``1d``."""

    name = "ISO-TIME|AGO"

    def convert(self, value, param, ctx):
        match = AGO.match(value) if isinstance(value, str) else None
        if match:
            return timeutil.utcnow() - dt.timedelta(**{AGO_UNITS[match[2]]: float(match[1])})
        return super().convert(value, param, ctx)


def name_argument(value, what):
    try:
        return bodies.check_name(value, what)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


# -- catalogue --------------------------------------------------------------------------------

@click.command()
def flavors():
    """Flavors offered (a template in SIDR and its plugin installed)."""
    output.show(api().flavors(), output.render_flavors)


# -- regions and hosts ------------------------------------------------------------------------

@click.group()
def regions():
    """Regions where vCDNs can be deployed (operators register them)."""


@regions.command("list")
def regions_list():
    """Every region."""
    output.show(api().regions(), output.render_regions)


@regions.command("show")
@click.argument("name")
def regions_show(name):
    """One region."""
    output.show(api().region(name), output.render_region)


def _region_options(command):
    command = click.option("--default/--no-default", "default", default=None,
                           help="Answer clients that no prefix matches with this region.")(command)
    command = click.option("--vim-region", help="VIM region (e.g. OpenStack region).")(command)
    command = click.option("--zone", help="VIM availability zone of the data center.")(command)
    command = click.option("--description")(command)
    return command


@regions.command("create")
@click.argument("name", callback=lambda _c, _p, v: name_argument(v, "region"))
@click.option("--prefix", "prefixes", multiple=True, required=True, metavar="CIDR",
              help="Client prefix sent to this region (repeatable).")
@_region_options
def regions_create(name, prefixes, description, zone, vim_region, default):
    """Register a region (operator)."""
    body = _drop_none({"name": name, "client_prefixes": list(prefixes), "description": description,
                       "zone": zone, "vim_region": vim_region, "default": default})
    output.show(api().create_region(body), output.render_region)


@regions.command("update")
@click.argument("name")
@click.option("--prefix", "prefixes", multiple=True, metavar="CIDR",
              help="Replace the client prefixes (repeatable).")
@_region_options
def regions_update(name, prefixes, description, zone, vim_region, default):
    """Change a region (operator); only the options given change."""
    body = _drop_none({"client_prefixes": list(prefixes) or None, "description": description,
                       "zone": zone, "vim_region": vim_region, "default": default})
    if not body:
        raise click.UsageError("nothing to change: give at least one option")
    output.show(api().update_region(name, body), output.render_region)


@click.group()
def hosts():
    """Hosts of a region and their capacity (operator)."""


@hosts.command("list")
@click.argument("region")
def hosts_list(region):
    """Hosts of REGION with the vCPUs reserved on them and their power state."""
    client = api()
    found = client.hosts(region)
    try:
        power = {h["name"]: h for h in client.hosts_power().get("hosts") or []}
    except errors.CdnaasError:  # the Instance Manager does not answer: capacity only
        power = None
    for host in found:
        host["power"] = "unknown" if power is None else power_state(power.get(host["name"]))
    output.show(found, output.render_hosts)


def power_state(power):
    """A host's power as ``hosts list`` shows it, from its ``hosts power`` view: ``on``,
    ``switched off``, or ``on, power-down recorded`` (a driver that only records it)."""
    mark = (power or {}).get("mark") or {}
    if mark.get("state") != "power_down":
        return "on"
    return "switched off" if mark.get("switched_off") else "on, power-down recorded"


def _host_options(required):
    def decorate(command):
        command = click.option("--enabled/--disabled", default=None,
                               help="Whether new VNFs may be placed here.")(command)
        command = click.option("--peak-watts", type=click.FloatRange(min=0),
                               help="Power at full load (default 269 W).")(command)
        command = click.option("--idle-watts", type=click.FloatRange(min=0),
                               help="Power when idle (default 115 W).")(command)
        command = click.option("--ram-mb", type=click.IntRange(min=256), required=required)(command)
        command = click.option("--vcpus", type=click.IntRange(1, 4096), required=required)(command)
        return command
    return decorate


@hosts.command("create")
@click.argument("region")
@click.argument("name", callback=lambda _c, _p, v: name_argument(v, "host"))
@_host_options(required=True)
def hosts_create(region, name, vcpus, ram_mb, idle_watts, peak_watts, enabled):
    """Register host NAME in REGION (operator)."""
    body = _drop_none({"name": name, "vcpus": vcpus, "ram_mb": ram_mb, "idle_watts": idle_watts,
                       "peak_watts": peak_watts, "enabled": enabled})
    output.show(api().create_host(region, body), output.render_host)


@hosts.command("update")
@click.argument("region")
@click.argument("name")
@_host_options(required=False)
def hosts_update(region, name, vcpus, ram_mb, idle_watts, peak_watts, enabled):
    """Change host NAME of REGION (operator); capacity cannot drop below what is reserved."""
    body = _drop_none({"vcpus": vcpus, "ram_mb": ram_mb, "idle_watts": idle_watts,
                       "peak_watts": peak_watts, "enabled": enabled})
    if not body:
        raise click.UsageError("nothing to change: give at least one option")
    output.show(api().update_host(region, name, body), output.render_host)


@hosts.command("power")
def hosts_power():
    """Every host's power, utilisation and power-down mark, as the Instance Manager last saw them
    (operator)."""
    output.show(api().hosts_power(), _render_hosts_power)


def _render_hosts_power(power):
    output.table(power.get("hosts") or [], [
        ("Host", "name"), ("Region", "region"),
        ("Utilisation", lambda h: charts.share_bar(h.get("utilisation"))),
        ("Watts", lambda h: "-" if h.get("watts") is None else f"{h['watts']:,.1f}"),
        ("Source", "source"), ("Energy Wh", "energy_wh"), ("Mark", _mark_text)])
    output.out().print(power_totals_text(power.get("totals") or {}))


def power_totals_text(totals):
    """The closing line of ``hosts power``: what the hosts draw, and what the power-down
    marks did (switched off, or only recorded by a power driver like ``log``)."""
    parts = [f"{totals.get('hosts', 0)} hosts drawing {totals.get('watts', 0):,.1f} W"]
    if totals.get("switched_off"):
        parts.append(f"{totals['switched_off']} switched off (saving "
                     f"{totals.get('saved_idle_watts', 0):,.1f} W idle)")
    if totals.get("marked_still_on"):
        parts.append(f"{totals['marked_still_on']} marked for power-down but only recorded by "
                     f"the power driver: still on and drawing "
                     f"{totals.get('marked_still_on_watts', 0):,.1f} W (counted above), which "
                     "switching them off would save")
    if not totals.get("marked_power_down"):
        parts.append("none marked for power-down")
    return "; ".join(parts)


@click.command("quality")
def quality():
    """Viewers, estimated MOS against its target and watts of every tenant's vCDNs, region by
    region, as the Instance Manager last saw them (operator)."""
    output.show(api().quality(), _render_quality)


def _render_quality(overview):
    rows = [{"vcdn": f"{v['name']} ({v['tenant']})", "state": v["state"], **region}
            for v in overview.get("vcdns") or [] for region in v.get("regions") or []]
    output.table(rows, [
        ("vCDN (tenant)", "vcdn"), ("State", lambda r: output.styled(r.get("state"))),
        ("Region", "name"),
        ("Viewers", lambda r: "-" if r.get("viewers") is None else f"{r['viewers']:,.0f}"),
        ("MOS / target", _mos_against_target), ("vCPUs", "vcpus"),
        ("Watts", lambda r: "-" if r.get("watts") is None else f"{r['watts']:,.1f}")])
    totals = overview.get("totals") or {}
    below = totals.get("regions_below_target", 0)
    count = totals.get("vcdns", 0)
    output.out().print(f"{count} vCDN{'' if count == 1 else 's'}, "
                       f"{totals.get('viewers', 0):,.0f} viewers, "
                       f"{totals.get('watts', 0):,.1f} W; "
                       + (f"[red]{below} region(s) below target[/red]" if below
                          else "every measured region meets its target"))


def _mos_against_target(region):
    target = (region.get("quality") or {}).get("min_mos")
    mos = region.get("mos")
    if mos is None:
        return "-" if target is None else f"- / {target:.2f}"
    if target is None:
        return f"{mos:.2f}"
    shown = f"{mos:.2f} / {target:.2f}"
    return f"[red]{shown}[/red]" if region.get("below_target") else shown


def _mark_text(host):
    mark = host.get("mark")
    if not mark:
        return "-"
    state = "on" if mark.get("state") != "power_down" else "[bold]⏻ switched off[/bold]" \
        if mark.get("switched_off") else "[bold]⏻ power down recorded[/bold] (still on)"
    return f"{state} since {_short_time(mark.get('since'))}: {escape(mark.get('reason') or '')}"


def _short_time(text):
    """``2030-01-31T18:00:05.123Z`` -> ``2030-01-31 18:00:05`` (None -> ``-``)."""
    return text[:19].replace("T", " ") if text else "-"


# -- tenants and tokens -----------------------------------------------------------------------

@click.group()
def tenant():
    """Tenants (operator)."""


@tenant.command("create")
@click.argument("name", callback=lambda _c, _p, v: name_argument(v, "tenant"))
@click.option("--role", type=click.Choice(["tenant", "operator"]), default="tenant",
              show_default=True)
def tenant_create(name, role):
    """Create tenant NAME."""
    output.show(api().create_tenant(name, role), lambda t: output.render_tenants([t]))


@tenant.command("list")
def tenant_list():
    """Every tenant."""
    output.show(api().tenants(), output.render_tenants)


@click.group()
def user():
    """Named users of a tenant, who hold its tokens (operator, or the tenant itself)."""


@user.command("create")
@click.argument("tenant_name", metavar="TENANT")
@click.argument("name", callback=lambda _c, _p, v: name_argument(v, "user"))
def user_create(tenant_name, name):
    """Create user NAME of TENANT (then: cdnaas token create TENANT --user NAME)."""
    output.show(api().create_user(tenant_name, name), lambda u: output.render_users([u]))


@user.command("list")
@click.argument("tenant_name", metavar="TENANT")
def user_list(tenant_name):
    """Users of TENANT, with how many tokens each holds."""
    output.show(api().users(tenant_name), output.render_users)


@user.command("delete")
@click.argument("tenant_name", metavar="TENANT")
@click.argument("name")
def user_delete(tenant_name, name):
    """Delete user NAME of TENANT and revoke every token it holds."""
    api().delete_user(tenant_name, name)
    output.show({"deleted": name}, lambda _: output.out().print(
        f"deleted user {name} of {tenant_name} and revoked its tokens"))


@click.group()
def token():
    """API tokens of a tenant's users (operator, or the tenant itself)."""


@token.command("create")
@click.argument("tenant_name", metavar="TENANT")
@click.option("--user", "user_name", metavar="NAME", help="The user who holds it (default: "
              "the tenant's user `default`).")
@click.option("--scope", type=click.Choice(["full", "read-only", "purge-only"]),
              help="What it may do (default full): read-only only reads; purge-only only "
                   "purges a vCDN (and reads that vCDN and the purge's operation).")
@click.option("--expires-in", metavar="TIME", help="How long it is valid: 30m, 12h, 90d... "
              "(default and maximum: the operator's CDNAAS_TOKEN_MAX_DAYS).")
@click.option("--expires-at", type=IsoTime(), help="When it expires, instead of --expires-in.")
@click.option("--description", help="What the token is for.")
@click.option("--save", is_flag=True, help="Write the secret to the settings file.")
def token_create(tenant_name, user_name, scope, expires_in, expires_at, description, save):
    """Issue a token to TENANT; the secret is shown only now."""
    if expires_in and expires_at:
        raise click.UsageError("give --expires-in or --expires-at, not both")
    try:
        lifetime = caching.seconds(expires_in, "--expires-in") if expires_in else None
    except errors.BadRequest as exc:
        raise click.BadParameter(exc.message, param_hint="--expires-in") from None
    issued = api().create_token(tenant_name, description, user=user_name, scope=scope,
                                expires_in=lifetime,
                                expires_at=timeutil.isoformat(expires_at))
    if save:
        output.note(f"saved the token to {client.save_settings(token=issued['token'])}")
    output.show(issued, output.render_new_token)


@token.command("list")
@click.argument("tenant_name", metavar="TENANT")
@click.option("--user", "user_name", metavar="NAME", help="Only this user's tokens.")
def token_list(tenant_name, user_name):
    """Tokens of TENANT, without their secrets."""
    output.show(api().tokens(tenant_name, user_name), output.render_tokens)


@token.command("revoke")
@click.argument("tenant_name", metavar="TENANT")
@click.argument("token_id")
def token_revoke(tenant_name, token_id):
    """Revoke token TOKEN_ID of TENANT."""
    api().revoke_token(tenant_name, token_id)
    output.show({"revoked": token_id}, lambda _: output.out().print(f"revoked {token_id}"))


# -- service templates (SIDR, through the API) ------------------------------------------------

@click.group()
def template():
    """Service templates (operator step of registering a flavor; operator token)."""


@template.command("register")
@click.argument("path", metavar="FILE", type=click.Path(exists=True, dir_okay=False))
def template_register(path):
    """Upload the template in FILE (YAML or JSON) as a new version."""
    stored = api().register_template_file(path)
    output.show(stored, lambda t: output.out().print(
        f"registered flavor [bold]{t.get('flavor')}[/bold] version {t.get('version')}"))


@template.command("list")
@click.option("--flavor", help="Only this flavor's versions.")
def template_list(flavor):
    """Templates stored in SIDR."""
    output.show(api().templates(flavor), output.render_templates)


@template.command("deprecate")
@click.argument("flavor")
@click.argument("version", type=click.IntRange(1, 2147483647))
@click.option("--undo", is_flag=True, help="Offer the version again.")
def template_deprecate(flavor, version, undo):
    """Stop offering FLAVOR's VERSION to new vCDNs (the vCDNs made of it keep running)."""
    stored = api().deprecate_template(flavor, version, deprecated=not undo)
    output.show(stored, lambda t: output.out().print(
        f"flavor [bold]{t.get('flavor')}[/bold] version {t.get('version')} "
        f"{'deprecated' if t.get('deprecated') else 'offered'}"))


@template.command("delete")
@click.argument("flavor")
@click.argument("version", type=click.IntRange(1, 2147483647))
def template_delete(flavor, version):
    """Delete FLAVOR's VERSION (refused while a vCDN not DELETED uses it)."""
    api().delete_template(flavor, version)
    output.show({"deleted": {"flavor": flavor, "version": version}}, lambda _: output.out().print(
        f"deleted flavor [bold]{flavor}[/bold] version {version}"))


# -- vCDNs and operations ---------------------------------------------------------------------

def _wait_options(command):
    command = click.option("--timeout", default=600.0, show_default=True,
                           help="Seconds to wait with --wait.")(command)
    command = click.option("--wait", is_flag=True,
                           help="Follow the operation until it ends; exit 1 unless it completes.")(command)
    return command


def _follow(accepted, wait, timeout):
    """Show an accepted change; with ``wait``, follow its operation and show the outcome."""
    if not wait:
        output.show(accepted, output.render_accepted)
        return
    client_ = api()
    operation = output.watch_operation(client_.operation, accepted["operation"]["id"],
                                       timeout=timeout)
    vcdn = client_.vcdn(accepted["vcdn"]["id"])
    output.show({"vcdn": vcdn, "operation": operation}, _render_outcome)
    if operation.get("state") != "COMPLETED":
        raise click.exceptions.Exit(1)


def _render_outcome(result):
    operation = result["operation"]
    if operation.get("state") != "COMPLETED":
        output.render_operation(operation)
    output.render_vcdn(result["vcdn"])


@click.group()
def vcdn():
    """Lease, change and end vCDNs."""


def _request_options(name_required):
    """A decorator adding the options that describe a vCDN request (shared by create and
    quote; a quote needs no --name)."""
    return functools.partial(_add_request_options, name_required=name_required)


def _add_request_options(command, name_required):
    options = [
        click.option("--name", required=name_required,
                     help=None if name_required else "Optional: a quote needs no name.",
                     callback=lambda _c, _p, v: None if v is None else name_argument(v, "vCDN")),
        click.option("--flavor", required=True, help="See `cdnaas flavors`."),
        click.option("--origin", required=True, metavar="URL",
                     help="Origin server: http(s)://host[:port]."),
        click.option("--region", "region_list", type=RegionSpec(), multiple=True, required=True,
                     help="Region, peak concurrent viewers and quality: a minimum MOS "
                          "(eu-west:1000:4.0) or a percentile response time in ms "
                          "(eu-west:1000:p95=200). Repeatable."),
        click.option("--min-mos", type=click.FloatRange(1, 5), default=bodies.DEFAULT_MIN_MOS, show_default=True,
                     help="Minimum MOS of the regions that name no quality of their own "
                          "(3.6 is the paper's 'acceptable')."),
        click.option("--lease-start", type=IsoTime(), help="When it must serve (default now)."),
        click.option("--lease-end", type=IsoTime(), help="When it ends (or --lease-hours)."),
        click.option("--lease-hours", type=click.FloatRange(min=0, min_open=True),
                     help="Lease length in hours from the start."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _request_body(**request):
    """The ``VcdnRequest`` body the options describe (:func:`bodies.vcdn_request`).

    :raises click.UsageError: the lease or the regions are inconsistent.
    """
    try:
        return bodies.vcdn_request(**request)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def _tls_options(command):
    """--hostname, --certificate, --private-key and --managed-certificate (create and
    update)."""
    pem = click.Path(exists=True, dir_okay=False, readable=True)
    command = click.option("--managed-certificate", "managed", is_flag=True,
                           help="Have the service obtain the certificate of the hostnames "
                                "from the operator's ACME CA and renew it (instead of "
                                "--certificate).")(command)
    command = click.option("--private-key", type=pem, metavar="FILE",
                           help="PEM file of the certificate's unencrypted key.")(command)
    command = click.option("--certificate", type=pem, metavar="FILE",
                           help="PEM file: the server certificate, then each issuer in order. "
                                "HTTPS (HTTP/2) on the balancers for every name.")(command)
    return click.option("--hostname", "hostnames", multiple=True, metavar="NAME",
                        help="Your own name for the vCDN (a CNAME of its hostname); "
                             "repeatable.")(command)


def _tls_body(hostnames, certificate, private_key, managed=False):
    """The ``hostnames`` and ``certificate`` of a body, from the TLS options given.

    :raises click.UsageError: only one of --certificate and --private-key, or one of them
        with --managed-certificate.
    """
    if (certificate is None) != (private_key is None):
        raise click.UsageError("give --certificate and --private-key together")
    if managed and certificate:
        raise click.UsageError("--managed-certificate and --certificate contradict each "
                               "other: give one")
    body = {"hostnames": list(hostnames)} if hostnames else {}
    if managed:
        body["certificate"] = {"managed": True}
    if certificate:
        body["certificate"] = {"certificate": Path(certificate).read_text(encoding="ascii",
                                                                          errors="replace"),
                               "private_key": Path(private_key).read_text(encoding="ascii",
                                                                          errors="replace")}
    return body


def _yaml_file_option(flag, help_text):
    """A click option naming a YAML (or JSON) file whose content is a body field."""
    return click.option(flag, type=click.Path(exists=True, dir_okay=False, readable=True),
                        metavar="FILE", help=help_text)


_cache_rules_option = _yaml_file_option(
    "--cache-rules", "YAML (or JSON) file of cache rules: ttl (a list of match: "
    "prefix|suffix|exact, path, ttl), default_ttl, query_string (include, ignore or a "
    "list of argument names), origin_cache_control (honour or ignore). An update "
    "replaces the rules whole; an empty file restores the defaults.")
_origins_option = _yaml_file_option(
    "--origins", "YAML (or JSON) file of the vCDN's origins beyond --origin: secondary "
    "(URL), failover (statuses, connect_timeout, read_timeout), paths (prefix, origin: "
    "primary|secondary, ttl), headers (name, value, secret), host. An update replaces "
    "them whole (a secret header's value is sent again); an empty file restores the "
    "defaults.")
_https_policy_option = _yaml_file_option(
    "--https-policy", "YAML (or JSON) file of the HTTPS policy: http (allow, redirect or "
    "refuse), hsts (max_age, include_subdomains, preload), min_tls_version (1.2 or 1.3), "
    "unknown_sni (refuse or serve). An update replaces it whole; an empty file restores "
    "the defaults.")
_response_rules_option = _yaml_file_option(
    "--response-rules", "YAML (or JSON) file of response rules: add_headers (name, value), "
    "remove_headers, cors (allow_origins, allow_methods, max_age), error_pages (status, "
    "body), compression (gzip, brotli, types). An update replaces them whole; an empty "
    "file restores the defaults.")
_log_streams_option = _yaml_file_option(
    "--log-streams", "YAML (or JSON) file of at most 2 log-stream destinations: "
    "type syslog (address host:port, transport tcp|tls, ca_certificate PEM) or https "
    "(url, headers, batch_records, batch_seconds). An update replaces them whole; an "
    "empty file removes them.")
_access_option = _yaml_file_option(
    "--access", "YAML (or JSON) file of access control: signed_urls (paths, keys: a list "
    "of id, secret), regions (allow), clients (allow or deny: prefixes), rate_limit "
    "(requests_per_second, burst). An update replaces it whole (send every secret again); "
    "an empty file removes it.")


def _yaml_file_body(path, field, flag, empty=None):
    """``{field: ...}`` read from the YAML (or JSON) file ``path`` of option ``flag``
    (nothing without one; ``empty``, default ``{}``, for an empty file).

    :raises click.BadParameter: a file is not YAML (or JSON).
    """
    if path is None:
        return {}
    try:
        value = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"{path} is not YAML or JSON: {exc}",
                                 param_hint=flag) from None
    return {field: ({} if empty is None else empty) if value is None else value}


def _files_body(cache_rules, origins, response_rules, log_streams, access, https_policy):
    """The body fields of the file options of create and update."""
    return {**_yaml_file_body(cache_rules, "cache_rules", "--cache-rules"),
            **_yaml_file_body(origins, "origins", "--origins"),
            **_yaml_file_body(response_rules, "response_rules", "--response-rules"),
            **_yaml_file_body(log_streams, "log_streams", "--log-streams", empty=[]),
            **_yaml_file_body(access, "access", "--access"),
            **_yaml_file_body(https_policy, "https_policy", "--https-policy")}


@vcdn.command("create")
@_request_options(name_required=True)
@_tls_options
@_cache_rules_option
@_origins_option
@_response_rules_option
@_log_streams_option
@_access_option
@_https_policy_option
@_wait_options
def vcdn_create(wait, timeout, hostnames, certificate, private_key, managed, cache_rules,
                origins, response_rules, log_streams, access, https_policy, **request):
    """Lease a vCDN; --wait follows its deployment with a progress bar."""
    body = {**_request_body(**request), **_tls_body(hostnames, certificate, private_key, managed),
            **_files_body(cache_rules, origins, response_rules, log_streams, access,
                          https_policy)}
    _follow(api().create_vcdn(body), wait, timeout)


@vcdn.command("quote")
@_request_options(name_required=False)
def vcdn_quote(**request):
    """What a vCDN would take, predicted quality, power, energy and price; reserves nothing."""
    output.show(api().quote(_request_body(**request)), output.render_quote)


@vcdn.command("list")
@click.option("--state", type=click.Choice(VCDN_STATES, case_sensitive=False),
              help="Only vCDNs in this state.")
@click.option("--name", help="Only vCDNs of this name.")
@click.option("--all", "everything", is_flag=True, help="Also DELETED vCDNs (hidden otherwise).")
def vcdn_list(state, name, everything):
    """Your vCDNs, oldest first (operators see every tenant's)."""
    output.show(api().vcdns(state=state.upper() if state else None, name=name,
                            include_deleted=everything), output.render_vcdns)


@vcdn.command("show")
@click.argument("vcdn_id", metavar="ID")
def vcdn_show(vcdn_id):
    """State, entry point and per-region summary of one vCDN."""
    output.show(api().vcdn(vcdn_id), output.render_vcdn)


@vcdn.command("update")
@click.argument("vcdn_id", metavar="ID")
@click.option("--region", "region_list", type=RegionSpec(update=True), multiple=True,
              help="Region to change: NAME:DEMAND, NAME::QUALITY or NAME:DEMAND:QUALITY. Repeatable.")
@click.option("--add-region", "added", type=RegionSpec(), multiple=True,
              help="Region to add: NAME:DEMAND[:QUALITY] (quality as --region; default "
                   "MOS 3.6). Repeatable.")
@click.option("--remove-region", "removed", multiple=True, metavar="NAME",
              callback=lambda _c, _p, v: [name_argument(n, "region") for n in v],
              help="Region to remove (never all of them). Repeatable.")
@click.option("--origin", metavar="URL", help="New origin server: http(s)://host[:port].")
@click.option("--lease-end", type=IsoTime(), help="New lease end (later or earlier, not past).")
@click.option("--if-match", metavar="ETAG",
              help='Change it only if its ETag is still this one (e.g. "3"; see show --json).')
@_tls_options
@click.option("--no-hostnames", is_flag=True, help="Serve only the vCDN's own hostname.")
@click.option("--no-tls", is_flag=True, help="Stop serving HTTPS (the key is deleted).")
@_cache_rules_option
@_origins_option
@_response_rules_option
@_log_streams_option
@_access_option
@_https_policy_option
@_wait_options
def vcdn_update(vcdn_id, region_list, added, removed, origin, lease_end, if_match, wait, timeout,
                hostnames, certificate, private_key, managed, no_hostnames, no_tls, cache_rules,
                origins, response_rules, log_streams, access, https_policy):
    """Change a vCDN: demand and quality of regions, regions added or removed, the
    origin, the lease end, its hostnames and certificate (a new one is a rotation that
    drops no request), in any combination (one operation)."""
    body = bodies.vcdn_change(region_list, added, removed, origin, lease_end)
    body.update(_tls_body(hostnames, certificate, private_key, managed))
    body.update(_files_body(cache_rules, origins, response_rules, log_streams, access,
                            https_policy))
    if (no_hostnames and hostnames) or (no_tls and (certificate or managed)):
        raise click.UsageError("--no-hostnames and --hostname, or --no-tls and --certificate, "
                               "contradict each other: give one")
    if no_hostnames:
        body["hostnames"] = []
    if no_tls:
        body["certificate"] = None
    if not body:
        raise click.UsageError("nothing to change: give --region, --add-region, "
                               "--remove-region, --origin, --lease-end, --hostname, "
                               "--certificate, --managed-certificate, --no-tls, "
                               "--cache-rules, --origins, --response-rules, --log-streams, "
                               "--access and/or --https-policy")
    _follow(api().update_vcdn(vcdn_id, body, if_match=if_match), wait, timeout)


@vcdn.command("purge")
@click.argument("vcdn_id", metavar="ID")
@click.option("--path", "paths", multiple=True, metavar="PATH",
              help="A path to purge, as viewers request it (/img/a.png?v=2). Repeatable.")
@click.option("--prefix", "prefixes", multiple=True, metavar="PREFIX",
              help="Purge every object whose path starts with PREFIX (/video/). Repeatable.")
@_wait_options
def vcdn_purge(vcdn_id, paths, prefixes, wait, timeout):
    """Purge paths and prefixes from every cache; --wait shows each cache's result."""
    if not paths and not prefixes:
        raise click.UsageError("give at least one --path or --prefix")
    _follow_caches(api().invalidate(vcdn_id, list(paths), list(prefixes)), wait, timeout)


@vcdn.command("sign-url")
@click.argument("vcdn_id", metavar="ID")
@click.argument("path")
@click.option("--expires", default="1h", show_default=True, metavar="TIME",
              help="How long the URL is valid: 30s, 10m, 12h, 7d...")
@click.option("--prefix", metavar="PREFIX",
              help="Sign every path under PREFIX (a prefix of PATH; HLS/DASH: the folder of "
                   "the playlist and segments; the token then also works as a cookie).")
@click.option("--client", metavar="CIDR", help="Only viewers in this IPv4 prefix.")
@click.option("--key-id", metavar="ID", help="The key to sign with (default: the last listed).")
def vcdn_sign_url(vcdn_id, path, expires, prefix, client, key_id):
    """A signed URL of a vCDN with signed URLs, made by the API with one of its keys; its
    query (exp, kid, [prefix], [ip], sig) is also the value of a CDNaaS-Token cookie."""
    try:
        lifetime = caching.seconds(expires, "--expires")
    except errors.BadRequest as exc:
        raise click.BadParameter(exc.message, param_hint="--expires") from None
    answer = api().sign_url(vcdn_id, _drop_none({"path": path, "expires_in": lifetime,
                                                 "prefix": prefix, "client": client,
                                                 "key_id": key_id}))
    output.show(answer, lambda a: click.echo(a["url"]))


@vcdn.command("prefetch")
@click.argument("vcdn_id", metavar="ID")
@click.option("--path", "paths", multiple=True, required=True, metavar="PATH",
              help="A path every cache fetches from the origin now. Repeatable.")
@_wait_options
def vcdn_prefetch(vcdn_id, paths, wait, timeout):
    """Have every cache fetch paths now, so viewers' first requests are HITs."""
    _follow_caches(api().prefetch(vcdn_id, list(paths)), wait, timeout)


def _follow_caches(accepted, wait, timeout):
    """Show an accepted purge or prefetch; with ``wait``, its outcome cache by cache."""
    if not wait:
        output.show(accepted, output.render_accepted)
        return
    operation = output.watch_operation(api().operation, accepted["operation"]["id"],
                                       timeout=timeout)
    output.show(operation, _render_caches)
    if operation.get("state") != "COMPLETED":
        raise click.exceptions.Exit(1)


def _render_caches(operation):
    output.render_operation(operation)
    for step in operation.get("steps") or []:
        output.table(step.get("detail") or [], [
            ("Cache", "name"), ("Region", "region"),
            ("State", lambda c: output.styled(c.get("state"))),
            ("Done", lambda c: f"{c.get('done', 0)}/{c.get('total', 0)}"),
            ("Seconds", "seconds"), ("Detail", lambda c: escape(c.get("detail") or ""))])


@vcdn.command("delete")
@click.argument("vcdn_id", metavar="ID")
@click.option("--if-match", metavar="ETAG", help="End it only if its ETag is still this one.")
@_wait_options
def vcdn_delete(vcdn_id, if_match, wait, timeout):
    """End a vCDN and release everything it holds."""
    _follow(api().delete_vcdn(vcdn_id, if_match=if_match), wait, timeout)


@vcdn.command("operations")
@click.argument("vcdn_id", metavar="ID")
def vcdn_operations(vcdn_id):
    """Operations of one vCDN, oldest first."""
    output.show(api().vcdn_operations(vcdn_id), lambda ops: output.table(
        ops, [("Operation", "id"), ("Type", "type"), ("State", lambda o: output.styled(o.get("state"))),
              ("Reason", "reason"), ("Created", "created_at"), ("Error", "error")]))


@vcdn.command("metrics")
@click.argument("vcdn_id", metavar="ID")
@click.option("--since", type=TimeOrAgo(), help="Start of the window: an ISO time or how long "
              "ago (15m, 2h, 1d); default an hour before --until.")
@click.option("--until", type=TimeOrAgo(), help="End of the window (default now).")
@click.option("--width", type=click.IntRange(min=1), default=60, show_default=True,
              help="Most bars per sparkline; longer series are averaged down to it.")
def vcdn_metrics(vcdn_id, since, until, width):
    """Viewers, estimated MOS and watts of each region over time, as sparklines.

    With --json, the API's region series as they are (every figure of every point).
    """
    metrics = api().metrics(vcdn_id, since=timeutil.isoformat(since),
                            until=timeutil.isoformat(until), scope="region")
    output.show(metrics, lambda m: _render_metrics(m, width))


def _render_metrics(metrics, width):
    rows = charts.region_rows(metrics, width)
    window = f"{_short_time(metrics.get('since'))} -> {_short_time(metrics.get('until'))} UTC"
    if not rows:
        output.out().print(f"no samples between {window} (the Instance Manager records one "
                           "per pass)")
        return
    output.table(rows, [("Region", "region"), ("Samples", "samples"), ("Series", "figure"),
                        ("Over time", "chart"), ("Latest", "latest"), ("Min", "min"),
                        ("Max", "max")],
                 title=f"vCDN {metrics.get('vcdn_id')}, {window}")


@vcdn.command("decisions")
@click.argument("vcdn_id", metavar="ID")
@click.option("--since", type=TimeOrAgo(), help="Only decisions taken since: an ISO time or how "
              "long ago (15m, 2h, 1d).")
@click.option("--kind", type=click.Choice(DECISION_KINDS), help="Only decisions of this kind.")
@click.option("--region", help="Only decisions about this region.")
def vcdn_decisions(vcdn_id, since, kind, region):
    """What the Instance Manager decided about one vCDN and why, oldest first.

    With --json, each decision with the figures that caused it (its details).
    """
    found = api().decisions(vcdn_id, since=timeutil.isoformat(since), kind=kind, region=region)
    output.show(found, lambda decisions: output.table(decisions, [
        ("Time (UTC)", lambda d: _short_time(d.get("created_at"))), ("Kind", "kind"),
        ("Region", lambda d: d.get("region") or d.get("host") or "-"),
        ("Outcome", _styled_outcome), ("Reason", lambda d: escape(d.get("reason") or "-"))]))


@vcdn.command("usage")
@click.argument("vcdn_id", metavar="ID")
@click.option("--from", "since", type=TimeOrAgo(), help="Start: an ISO time or how long ago "
              "(15m, 2h, 1d); default when the vCDN was created.")
@click.option("--to", "until", type=TimeOrAgo(), help="End (default now).")
def vcdn_usage(vcdn_id, since, until):
    """What a vCDN used per region and in total (requests, GB, hit ratio, status classes,
    viewer-, vCPU-hours, kWh) and its price; a DELETED vCDN's too.

    With --json, the API's answer with each price's breakdown.
    """
    found = api().usage(vcdn_id, timeutil.isoformat(since), timeutil.isoformat(until))
    output.show(found, _render_usage)


def _render_usage(found):
    total = dict(found["total"], name="[bold]Total[/bold]")
    window = f"{_short_time(found.get('from'))} -> {_short_time(found.get('to'))} UTC"
    output.table(found["regions"] + [total], [
        ("Region", "name"), ("Requests", lambda r: f"{r['requests']:,}"),
        ("GB", lambda r: f"{r['gb']:,.3f}"),
        ("Hit ratio", lambda r: "-" if r["hit_ratio"] is None else f"{r['hit_ratio']:.1%}"),
        ("2xx/3xx/4xx/5xx", lambda r: "/".join(f"{r['status'][k]:,}" for k in
                                               ("2xx", "3xx", "4xx", "5xx"))),
        ("Viewer-h", lambda r: f"{r['viewer_hours']:,.2f}"),
        ("vCPU-h", lambda r: f"{r['vcpu_hours']:,.2f}"), ("kWh", lambda r: f"{r['kwh']:,.3f}"),
        ("Price", lambda r: f"{r['price']['amount']:,.2f} {r['price']['currency']}")],
        title=f"vCDN {found.get('vcdn_id')} ({found.get('state')}), {window}")
    parts = found["total"]["price"]["breakdown"]
    output.out().print(f"Price {found['total']['price']['amount']:,.2f} "
                       f"{found['total']['price']['currency']}: compute {parts['compute']:,.2f}, "
                       f"energy {parts['energy']:,.2f}, traffic {parts['traffic']:,.2f}, "
                       f"viewers {parts['viewers']:,.2f}")


@vcdn.command("traffic")
@click.argument("vcdn_id", metavar="ID")
@click.option("--since", type=TimeOrAgo(), help="Start of the window: an ISO time or how long "
              "ago (15m, 2h, 1d); default an hour before --until.")
@click.option("--until", type=TimeOrAgo(), help="End of the window (default now).")
@click.option("--step", type=click.IntRange(min=60), help="Seconds per point, a multiple of 60.")
@click.option("--width", type=click.IntRange(min=1), default=60, show_default=True,
              help="Most bars per sparkline; longer series are averaged down to it.")
def vcdn_traffic(vcdn_id, since, until, step, width):
    """Requests/s, bytes/s and hit ratio of each region over time, as sparklines.

    With --json, the API's series as they are.
    """
    found = api().traffic(vcdn_id, since=timeutil.isoformat(since),
                          until=timeutil.isoformat(until), step=step)
    output.show(found, lambda t: output.table(
        charts.traffic_rows(t, width),
        [("Region", "region"), ("Series", "figure"), ("Over time", "chart"),
         ("Latest", "latest"), ("Min", "min"), ("Max", "max")],
        title=f"vCDN {t.get('vcdn_id')}, {_short_time(t.get('since'))} -> "
              f"{_short_time(t.get('until'))} UTC, {t.get('step')} s per point"))


@vcdn.command("logs")
@click.argument("vcdn_id", metavar="ID")
@click.option("--from", "since", type=TimeOrAgo(), help="Start: an ISO time or how long ago "
              "(15m, 2h, 1d); default an hour before --to.")
@click.option("--to", "until", type=TimeOrAgo(), help="End (default now).")
@click.option("--limit", type=click.IntRange(1, 1_000_000), help="Most records (API default "
              "100,000).")
def vcdn_logs(vcdn_id, since, until, limit):
    """The vCDN's requests as NDJSON on stdout, streamed (`> file.ndjson`); while ACTIVE."""
    written, stdout = 0, sys.stdout.buffer
    for chunk in api().access_log(vcdn_id, since=timeutil.isoformat(since),
                                  until=timeutil.isoformat(until), limit=limit):
        stdout.write(chunk)
        written += chunk.count(b"\n")
    stdout.flush()
    output.err().print(f"{written:,} records")


@vcdn.command("log-streams")
@click.argument("vcdn_id", metavar="ID")
def vcdn_log_streams(vcdn_id):
    """The vCDN's log streams and what each VNF's shipper sent and dropped; while ACTIVE."""
    output.show(api().log_streams(vcdn_id), output.render_log_streams)


def _styled_outcome(decision):
    outcome = decision.get("outcome") or "-"
    style = OUTCOME_STYLES.get(outcome)
    return f"[{style}]{outcome}[/{style}]" if style else escape(outcome)


@click.group()
def op():
    """Operations (instantiate, update, terminate) and their steps."""


@op.command("show")
@click.argument("operation_id", metavar="ID")
def op_show(operation_id):
    """One operation with its steps and progress."""
    output.show(api().operation(operation_id), output.render_operation)


@op.command("watch")
@click.argument("operation_id", metavar="ID")
@click.option("--interval", default=0.5, show_default=True, help="Seconds between polls.")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds to wait at most.")
def op_watch(operation_id, interval, timeout):
    """Follow an operation until it ends; exit 1 unless it COMPLETED."""
    operation = output.watch_operation(api().operation, operation_id, interval=interval,
                                       timeout=timeout)
    output.show(operation, output.render_operation)
    if operation.get("state") != "COMPLETED":
        raise click.exceptions.Exit(1)


COMMANDS = (flavors, regions, hosts, quality, tenant, user, token, template, vcdn, op)
