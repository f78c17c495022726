"""What every ``openstack cdn`` command shares: API errors as OSC command errors, the
option types of the body builders (:mod:`cdnaas.cli.bodies`), finding a vCDN by name or
id, following an operation, and the columns of nested fields."""
import argparse
import uuid

from cliff import columns
from osc_lib import exceptions

from cdnaas.cli import bodies, client
from cdnaas.common import errors, timeutil


class ApiCommand:
    """Mixin before a cliff command class: an error answer of the API, or an operation that
    outlives ``--timeout``, ends the command with its message (exit status 1)."""

    def run(self, parsed_args):
        try:
            return super().run(parsed_args)
        except errors.CdnaasError as exc:
            raise exceptions.CommandError(client.error_text(exc)) from None
        except TimeoutError as exc:
            raise exceptions.CommandError(str(exc)) from None

    @property
    def api(self):
        """The customer API's client (:func:`cdnaas.osc.plugin.make_client`)."""
        return self.app.client_manager.cdn


def option_type(parse, *args):
    """An argparse ``type`` calling ``parse(text, *args)``; its ValueError is the usage error."""
    def convert(text):
        try:
            return parse(text, *args)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = parse.__name__
    return convert


def iso_time(text):
    """An ISO 8601 time (UTC without an offset)."""
    try:
        return timeutil.parse(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 time such as 2030-01-31T18:00:00Z") \
            from None


def add_wait_options(parser):
    """``--wait`` and ``--timeout``."""
    parser.add_argument("--wait", action="store_true",
                        help="Wait until the operation ends; fail unless it completes.")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="<seconds>",
                        help="Seconds to wait with --wait (default 600).")


def find_vcdn(api, ref):
    """The vCDN whose id, or else whose name (among those not deleted), is ``ref``.

    :raises osc_lib.exceptions.CommandError: none, or several of that name.
    """
    try:
        uuid.UUID(ref)
    except ValueError:
        pass
    else:
        try:
            return api.vcdn(ref)
        except errors.NotFound:
            pass
    found = api.vcdns(name=ref) if bodies.NAME.match(ref) else []
    if len(found) == 1:
        return found[0]
    if not found:
        raise exceptions.CommandError(f"no vCDN has the name or id {ref!r}")
    raise exceptions.CommandError(f"{len(found)} vCDNs are named {ref!r}: give its id")


def finish(api, accepted, timeout):
    """Wait for the operation of an accepted change (``{vcdn, operation}``) to end.

    :returns: the operation, COMPLETED.
    :raises osc_lib.exceptions.CommandError: it ended otherwise.
    :raises TimeoutError: it still runs after ``timeout`` seconds.
    """
    operation = None
    for operation in client.follow_operation(api.operation, accepted["operation"]["id"],
                                             timeout=timeout):
        pass
    if operation["state"] != "COMPLETED":
        raise exceptions.CommandError(
            f"{operation.get('type', 'operation')} {operation['id']} of vCDN "
            f"{operation.get('vcdn_id')} ended {operation['state']}: "
            f"{operation.get('error') or operation.get('reason') or 'no reason given'}")
    return operation


class RegionsColumn(columns.FormattableColumn):
    """A vCDN's regions (``RegionSummary``): one line each for people, the list for
    machines."""

    def human_readable(self):
        return "\n".join(
            f"{r.get('name')}: {r.get('demand')} viewers, {_quality_text(r.get('quality'))}, "
            f"{r.get('caches', '-')} caches, {r.get('vcpus', '-')} vCPUs"
            + (f", balancer {r['load_balancer']}" if r.get("load_balancer") else "")
            for r in self._value or [])


class CachesColumn(columns.FormattableColumn):
    """The caches of a purge's steps: one line each (name, region, state, objects done)."""

    def human_readable(self):
        return "\n".join(f"{c.get('name')} ({c.get('region')}): {c.get('state')} "
                         f"{c.get('done', 0)}/{c.get('total', 0)}"
                         + (f" {c['detail']}" if c.get("detail") else "")
                         for c in self._value or [])


def _quality_text(quality):
    quality = quality or {}
    if "min_mos" in quality:
        return f"MOS >= {quality['min_mos']}"
    target = quality.get("response_time")
    return f"p{target['percentile']:g} <= {target['max_ms']:g} ms" if target else "-"
