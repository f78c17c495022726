"""``cdnaas webhook``: endpoints that events are pushed to, and their delivery log."""
import click

from cdnaas.cli import output
from cdnaas.cli.api_commands import api

#: the event types of api-spec/webhooks.yaml (EventType)
EVENT_TYPES = ("operation.ended", "certificate.expiring", "quality.below_target",
               "lease.ending")


@click.group()
def webhook():
    """Webhooks: events POSTed to your endpoint, signed (CDNaaS-Signature), instead of polled."""


@webhook.command("create")
@click.argument("url")
@click.option("--event", "events", multiple=True, required=True,
              type=click.Choice(EVENT_TYPES), help="An event type to send (repeat for more).")
@click.option("--description", help="What the endpoint is.")
def webhook_create(url, events, description):
    """Register URL for the events; its signing secret is shown only now."""
    created = api().create_webhook(url, events, description)
    output.show(created, _render_new)


@webhook.command("list")
def webhook_list():
    """Your webhooks (secrets masked)."""
    output.show(api().webhooks(), _render_list)


@webhook.command("delete")
@click.argument("webhook_id")
def webhook_delete(webhook_id):
    """Delete webhook WEBHOOK_ID; its deliveries not yet sent are dropped."""
    api().delete_webhook(webhook_id)
    output.show({"deleted": webhook_id}, lambda _: output.out().print(f"deleted {webhook_id}"))


@webhook.command("deliveries")
@click.argument("webhook_id")
@click.option("--limit", type=click.IntRange(1, 500), help="At most this many (newest first).")
def webhook_deliveries(webhook_id, limit):
    """The delivery log of WEBHOOK_ID: each event, its state and every attempt."""
    output.show(api().webhook_deliveries(webhook_id, limit), _render_deliveries)


def _render_list(webhooks):
    output.table(webhooks, [("Id", "id"), ("URL", "url"), ("Events", "events"),
                            ("Secret", "secret"), ("Description", "description"),
                            ("Created", "created_at")])


def _render_new(created):
    _render_list([{**created, "secret": "(below)"}])
    output.out().print(f"Signing secret (shown only now): [bold]{created['secret']}[/bold]")


def _last(delivery, key):
    return delivery["log"][-1][key] if delivery["log"] else None


def _render_deliveries(deliveries):
    output.table(deliveries, [
        ("Event", "event_id"), ("Type", "type"), ("vCDN", lambda d: d["event"]["vcdn_id"]),
        ("State", lambda d: output.styled(d["state"])), ("Attempts", "attempts"),
        ("Last status", lambda d: _last(d, "status_code")),
        ("Last error", lambda d: _last(d, "error")),
        ("ms", lambda d: _last(d, "duration_ms")), ("Next attempt", "next_attempt_at")])
