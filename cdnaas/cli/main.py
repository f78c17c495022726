"""``cdnaas``: run the stack locally and drive the customer API.

Local commands (``up``, ``down``, ``status``, ``db``, ``admin``, ``demo``) act on
this machine; the others mirror ``api-spec/api.yaml``. The token comes from
``--token``, ``CDNAAS_TOKEN`` or the settings file (see :mod:`cdnaas.cli.client`).
"""
import json
import logging
import os
import signal
import sys
import time

import click

from cdnaas.cli import client, output
from cdnaas.cli import stack as stacks
from cdnaas.common import config, errors, keyfiles, service_auth


class ApiError(click.ClickException):
    """An error answer of a service, shown with its message, field and details."""

    exit_code = 1

    def __init__(self, exc: errors.CdnaasError):
        super().__init__(client.error_text(exc))
        self.error = exc


class CdnaasGroup(click.Group):
    """A group that turns service errors into a message and exit status 1."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except errors.CdnaasError as exc:
            if (ctx.obj or {}).get("json"):  # machine readers get the error answer too
                click.echo(json.dumps(exc.to_dict(), indent=2))
            raise ApiError(exc) from exc


@click.group(cls=CdnaasGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--json", "as_json", is_flag=True, help="Print raw JSON instead of tables.")
@click.option("--api-url", metavar="URL", help="Customer API URL (default: CDNAAS_API_URL, "
              "the settings file's api_url, http://127.0.0.1:8700).")
@click.option("--token", metavar="TOKEN", help="Bearer token (default: CDNAAS_TOKEN, "
              "the settings file's token).")
@click.option("-v", "--verbose", is_flag=True, help="Log what the CLI does.")
@click.version_option(package_name="cdnaas")
@click.pass_context
def cli(ctx, as_json, api_url, token, verbose):
    """CDN-as-a-Service: lease vCDNs on demand, and run the services that make them."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    ctx.ensure_object(dict)
    ctx.obj.update(json=as_json, api_url=api_url, token=token)


# -- the local stack --------------------------------------------------------------------------

@cli.command()
@click.option("--detach", "-d", is_flag=True, help="Return once every service answers.")
@click.option("--timeout", default=60.0, show_default=True, help="Seconds to wait for the services.")
def up(detach, timeout):
    """Run the five services on this machine (SQLite in the state dir by default).

    In the foreground, Ctrl-C (or SIGTERM) stops them all; with --detach they
    keep running until `cdnaas down`. When some services of a stack died and others
    still run, only those that are down are started.
    """
    down = stacks.down_services()
    if down == []:
        raise click.ClickException(f"a stack is already running (pid file {stacks.pid_file()}); "
                                   "see `cdnaas status`, stop it with `cdnaas down`")
    if down:  # some services died: start only those, beside the ones that still run
        alive = [svc for svc in config.SERVICES if svc not in down]
        output.note(f"{', '.join(alive)} still run; starting only {', '.join(down)}")
    stack = stacks.Stack(services=down or config.SERVICES)
    output.note(f"starting {', '.join(stack.services)} (state and logs in {stack.state_dir}, "
                f"VIM driver {stack.env.get('CDNAAS_VIM_DRIVER') or config.vim_driver_name()})")

    def on_signal(_signum, _frame):
        raise KeyboardInterrupt  # stop as on Ctrl-C

    # SIGINT too: a process started in the background of a script inherits it ignored,
    # and would then never stop on one
    previous = {signum: signal.signal(signum, on_signal)
                for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        stack.start(timeout=timeout, detach=detach)
        _status_table({svc: {"url": url, "answers": True, "pid": stack.processes[svc].pid}
                       for svc, url in stack.urls.items()})
        if detach:
            output.note("running in the background; stop it with `cdnaas down`")
            return
        output.note("running; press Ctrl-C to stop")
        code = _supervise(stack)
    except stacks.StackError as exc:
        raise click.ClickException(str(exc)) from exc
    except KeyboardInterrupt:
        output.note("stopping...")
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # let the stop finish (SIGKILL after 10 s)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stack.stop()
        output.note("stopped")
        code = 0
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    sys.exit(code)


def _supervise(stack, grace=15.0):
    """Wait while the services run; return the exit status once they have all ended.

    Services stopped by SIGTERM (``cdnaas down`` from another shell) end the wait
    quietly; one that crashes stops the others and gives status 1.
    """
    first_stop = None
    while True:
        exited = stack.exited()
        crashed = {svc: code for svc, code in exited.items()
                   if code not in (0, -signal.SIGTERM, -signal.SIGKILL)}
        if crashed or (exited and time.monotonic() - (first_stop or time.monotonic()) > grace):
            for svc, code in (crashed or exited).items():
                output.note(f"[red]{svc} exited with status {code}[/red]; last lines of "
                            f"{stack.log_path(svc)}:\n{stacks.tail(stack.log_path(svc), 15)}")
            stack.stop()
            return 1
        if exited and len(exited) == len(stack.processes):
            output.note("all services stopped")
            stack.stop()
            return 0
        if exited and first_stop is None:
            first_stop = time.monotonic()
        time.sleep(0.3)


@cli.command()
@click.option("--timeout", default=10.0, show_default=True,
              help="Seconds to wait after SIGTERM before SIGKILL.")
def down(timeout):
    """Stop the stack that `cdnaas up` started."""
    path = stacks.pid_file()
    if not path.exists():
        output.note(f"no stack is running here (no {path})")
        return
    stopped = stacks.stop_recorded(timeout=timeout)
    output.note(f"stopped {', '.join(stopped)}" if stopped else "nothing was running; "
                f"removed the stale {path}")


@cli.command()
@click.pass_context
def status(ctx):
    """Which services answer GET /healthz (exit status 1 unless all do)."""
    pids = stacks.running_pids()
    report = {svc: {"url": url, "answers": stacks.healthy(url), "pid": pids.get(svc)}
              for svc, url in stacks.urls_of(os.environ).items()}
    output.show(report, _status_table)
    if not all(entry["answers"] for entry in report.values()):
        ctx.exit(1)


def _status_table(report):
    output.table([{"service": svc, **entry} for svc, entry in report.items()],
                 [("Service", "service"), ("URL", "url"),
                  ("Answers", lambda e: "[green]yes[/green]" if e["answers"] else "[red]no[/red]"),
                  ("Pid", "pid")])


# -- local administration ---------------------------------------------------------------------

@cli.group()
def db():
    """The services' databases."""


@db.command("upgrade")
def db_upgrade():
    """Create or migrate every service's tables (CDNAAS_DATABASE_URL or SQLite files)."""
    from sqlalchemy.exc import SQLAlchemyError

    from cdnaas.db import migrate
    from cdnaas.so import webhooks

    try:
        migrate.upgrade_all()
    except SQLAlchemyError as exc:
        raise click.ClickException(f"migration failed: {exc}") from exc
    migrated = [svc for svc in config.SERVICES if (migrate.PACKAGE_ROOT / svc / "migrations").is_dir()]
    output.note(f"migrated {', '.join(migrated)}")
    output.note(f"service key: {service_auth.ensure_key()}")
    output.note(f"secret key (RO, tenants' TLS keys): {keyfiles.ensure_secret_key()}")
    output.note(f"webhook key (SO, webhook signing secrets): {webhooks.ensure_key()}")


@cli.group()
def secret():
    """The installation's service key, which SO, SIDR, RO and IM require of their callers."""


@secret.command("rotate")
@click.option("--finish", is_flag=True,
              help="Drop the previous key (once every service has read the new one).")
def secret_rotate(finish):
    """Put a new signing key first, keeping the previous one valid until --finish.

    Services re-read the key file when it changes: no restart is needed.
    """
    keys = service_auth.rotate(finish=finish)
    output.show({"key_file": str(service_auth.key_file()), "keys": keys},
                lambda data: output.note(f"{data['key_file']}: signing with {keys[0]}"
                                         + (f", still accepting {', '.join(keys[1:])}"
                                            if keys[1:] else "")))


@secret.command("metrics-token")
@click.option("--days", type=click.IntRange(1, service_auth.METRICS_TOKEN_MAX_DAYS), default=90,
              show_default=True, help="How long the token is valid.")
def secret_metrics_token(days):
    """A token that reads only /metrics of the internal services (for a Prometheus scraper)."""
    click.echo(service_auth.token(service_auth.METRICS_CALLER, ttl=days * 86400))


@cli.group()
def admin():
    """Operator tasks done on the machine itself, without a token."""


@admin.command("create-token")
@click.option("--tenant", default="admin", show_default=True, help="Tenant to issue the token to "
              "(created if missing).")
@click.option("--role", type=click.Choice(["operator", "tenant"]), default="operator",
              show_default=True, help="Role of the tenant, if it is created.")
@click.option("--description", default="cdnaas admin create-token", show_default=True)
@click.option("--save", is_flag=True, help="Write the token to the settings file.")
@click.pass_context
def create_token(ctx, tenant, role, description, save):
    """Issue a token straight in the API's database (the first operator token): a full
    token of the tenant's user `default`, valid CDNAAS_TOKEN_MAX_DAYS.

    Prints only the secret, so `export CDNAAS_TOKEN=$(cdnaas admin create-token)` works.
    """
    secret = client.bootstrap(tenant, role, description)
    if save:
        path = client.save_settings(token=secret, api_url=client.api_url(ctx.obj.get("api_url")))
        output.note(f"saved the token to {path}")
    output.show({"tenant": tenant, "role": role, "token": secret},
                lambda data: click.echo(data["token"]))


def _register_commands():
    from cdnaas.cli import (api_commands, backup, calibrate, catalog, demo, image, local,
                            quota_commands, webhook)

    for command in api_commands.COMMANDS:
        cli.add_command(command)
    cli.add_command(quota_commands.quota)
    cli.add_command(demo.demo)
    cli.add_command(local.local)
    cli.add_command(image.image)
    cli.add_command(calibrate.calibrate)
    cli.add_command(webhook.webhook)
    admin.add_command(catalog.register_service)
    for command in (backup.backup, backup.restore, backup.reconciliations):
        db.add_command(command)


_register_commands()

if __name__ == "__main__":  # python -m cdnaas.cli.main
    cli()  # pylint: disable=no-value-for-parameter
