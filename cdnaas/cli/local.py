"""``cdnaas local``: administration of the local VIM driver on this machine."""
import click

from cdnaas.cli import output
from cdnaas.common import errors
from cdnaas.common.clients import RoClient


@click.group()
def local():
    """The local VIM driver's VNFs on this machine (namespaces, bridges, cgroups, files)."""


@local.command("cleanup")
@click.option("--all", "everything", is_flag=True,
              help="Remove every local VNF of this state dir's RO, known to it or not.")
def cleanup(everything):
    """Remove local VNFs the Resource Orchestrator no longer knows (strays of a crash).

    The RO does this itself when it starts; this is for a machine whose RO is
    down. Without --all it asks the RO which deployments are live.
    """
    from cdnaas.ro.vim.local.driver import LocalDriver

    known = set()
    if not everything:
        try:
            deployments = RoClient(timeout=5).deployments(live=True)
        except errors.UpstreamError as exc:
            raise click.ClickException(f"the Resource Orchestrator does not answer ({exc}); "
                                       "start it, or use --all to remove every local VNF") from exc
        known = {d.id for d in deployments}
    removed = LocalDriver().cleanup(known)
    output.note(f"removed {len(removed)} stray deployment(s)"
                + (f": {', '.join(removed)}" if removed else ""))
