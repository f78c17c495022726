"""Tenants' webhooks and the events put in their outbox.

A tenant registers endpoints (``url``, the event types it wants); each gets a signing
secret, shown once when it is created and kept encrypted with SO's webhook key
(:mod:`cdnaas.common.keyfiles`, ``CDNAAS_WEBHOOK_KEY_FILE``), shown back masked.

:func:`emit` puts an event in the outbox (``so_webhook_deliveries``): one row per webhook
of the tenant that wants its type, in the caller's transaction, so an event is recorded
exactly when what it reports is (an operation's end is committed with its delivery rows)
and survives a restart. :mod:`cdnaas.so.webhook_delivery` sends the rows. An event's body
is ``{id, type, created_at, vcdn_id, data}``; its ``id`` is the same in every delivery and
every attempt of it (receivers drop duplicates by it: delivery is at least once).
"""
import datetime as dt
import logging
import secrets
import urllib.parse
import uuid

import sqlalchemy
from sqlalchemy import and_, select

from cdnaas.common import clock, config, errors, keyfiles, origin_policy
from cdnaas.common.sig import Origin
from cdnaas.common.timeutil import isoformat, utcnow
from cdnaas.so import states
from cdnaas.so.models import Webhook, WebhookAttempt, WebhookDelivery

LOG = logging.getLogger(__name__)

OPERATION_ENDED = "operation.ended"
CERTIFICATE_EXPIRING = "certificate.expiring"
QUALITY_BELOW_TARGET = "quality.below_target"
LEASE_ENDING = "lease.ending"
#: every event type a webhook may ask for (api-spec/api.yaml's WebhookEvent enum)
EVENT_TYPES = (OPERATION_ENDED, CERTIFICATE_EXPIRING, QUALITY_BELOW_TARGET, LEASE_ENDING)

#: delivery states
PENDING, DELIVERED, FAILED = "PENDING", "DELIVERED", "FAILED"

#: webhooks one tenant may register
MAX_PER_TENANT = 20
#: deliveries the delivery log shows by default, and at most
LOG_LIMIT, LOG_MAX = 50, 500
SECRET_PREFIX = "whsec_"


def key_file():
    """Path of SO's webhook key file (``CDNAAS_WEBHOOK_KEY_FILE`` or the state dir's)."""
    return keyfiles.path_of("CDNAAS_WEBHOOK_KEY_FILE", "webhooks.key")


def ensure_key(path=None):
    """Create SO's webhook key file unless it exists; return its path."""
    return keyfiles.ensure(path or key_file())


def secret_of(webhook):
    """The webhook's signing secret in clear (to sign a delivery with)."""
    return keyfiles.fernet(key_file()).decrypt(webhook.secret.encode("ascii")).decode("ascii")


def check_url(url):
    """``url`` if it may receive deliveries: ``http`` or ``https``, a host, a valid port,
    no credentials, no fragment, no spaces or control characters, and a host the
    operator's origin policy allows (:mod:`cdnaas.common.origin_policy`: no loopback,
    link-local or metadata address unless allowed).

    :raises BadRequest: (field ``url``) what is wrong and what to send instead.
    """
    def refuse(why):
        return errors.BadRequest(f"url {why}; send an absolute http:// or https:// URL such "
                                 "as https://hooks.example.com/cdnaas", field="url")
    if any(ord(c) <= 32 or ord(c) == 127 for c in url):
        raise refuse("holds spaces or control characters")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise refuse(f"has scheme {parts.scheme or 'none'!r}")
    if "@" in parts.netloc:
        raise refuse("holds credentials (user:password@); the signature authenticates us")
    if not parts.hostname:
        raise refuse("names no host")
    try:
        parts.port  # pylint: disable=pointless-statement
    except ValueError:
        raise refuse("has an invalid port") from None
    if parts.fragment or url.endswith("#"):
        raise refuse("has a fragment (#...)")
    # SO connects to it from inside the operator's network, as caches to an origin
    origin_policy.check(Origin(parts.scheme, parts.hostname,
                               parts.port or (443 if parts.scheme == "https" else 80)),
                        field="url")
    return url


def masked(secret):
    """How a secret is shown back: its prefix and last four characters."""
    return f"{SECRET_PREFIX}...{secret[-4:]}"


def view(webhook, secret=None):
    """A webhook's representation; ``secret`` (at creation only) shown whole."""
    return {"id": webhook.id, "url": webhook.url, "events": webhook.events,
            "description": webhook.description, "tenant": webhook.tenant,
            "secret": secret if secret is not None else masked(secret_of(webhook)),
            "created_at": isoformat(webhook.created_at)}


def create(session, tenant, body):
    """Register a webhook of ``tenant`` (body checked by the OpenAPI document: ``url``,
    ``events``, ``description``); return its view with its secret, shown this once.

    :raises BadRequest: the URL cannot receive deliveries (field ``url``).
    :raises Conflict: the tenant has :data:`MAX_PER_TENANT` webhooks already.
    """
    url = check_url(body["url"])
    count = len(session.scalars(select(Webhook.id).where(Webhook.tenant == tenant)).all())
    if count >= MAX_PER_TENANT:
        raise errors.Conflict(f"tenant {tenant} has {count} webhooks, the most allowed; "
                              "delete one first", field="url")
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    sealed = keyfiles.fernet(ensure_key()).encrypt(secret.encode("ascii")).decode("ascii")
    webhook = Webhook(id=str(uuid.uuid4()), tenant=tenant, url=url,
                      events=sorted(set(body["events"]), key=EVENT_TYPES.index),
                      description=body.get("description", ""), secret=sealed,
                      created_at=clock.now())
    session.add(webhook)
    return view(webhook, secret)


def owned(session, webhook_id, tenant):
    """The webhook ``webhook_id`` of ``tenant`` (None: any tenant's).

    :raises NotFound: none (or another tenant's).
    """
    webhook = session.get(Webhook, webhook_id)
    if webhook is None or (tenant and webhook.tenant != tenant):
        raise errors.NotFound(f"no webhook {webhook_id}; GET /api/v1/webhooks lists yours",
                              field="webhook_id")
    return webhook


def list_(session, tenant):
    """The views of ``tenant``'s webhooks (None: every tenant's), oldest first."""
    query = select(Webhook).order_by(Webhook.created_at, Webhook.id)
    if tenant:
        query = query.where(Webhook.tenant == tenant)
    return [view(w) for w in session.scalars(query)]


def delete(session, webhook_id, tenant):
    """Delete a webhook with its deliveries (those not sent are never sent)."""
    webhook = owned(session, webhook_id, tenant)
    _delete_deliveries(session, WebhookDelivery.webhook_id == webhook.id)
    session.delete(webhook)


def _delete_deliveries(session, where):
    """Delete the deliveries ``where`` selects with their attempts; return how many."""
    chosen = select(WebhookDelivery.id).where(where)
    session.execute(sqlalchemy.delete(WebhookAttempt).where(
        WebhookAttempt.delivery_id.in_(chosen)))
    return session.execute(sqlalchemy.delete(WebhookDelivery).where(
        WebhookDelivery.id.in_(chosen))).rowcount


def purge(database, now=None):
    """Delete deliveries that ended (DELIVERED, FAILED) more than ``CDNAAS_WEBHOOK_LOG_DAYS``
    ago, with their attempts: the outbox and its log stay bounded. Return how many."""
    now = now or utcnow()
    cutoff = now - dt.timedelta(days=config.setting("CDNAAS_WEBHOOK_LOG_DAYS"))
    with database.transaction() as session:
        return _delete_deliveries(session, and_(
            WebhookDelivery.state.in_((DELIVERED, FAILED)), WebhookDelivery.created_at < cutoff))


def deliveries(session, webhook_id, tenant, limit=None):
    """The webhook's delivery log, newest first: each delivery with its event and every
    attempt (``status_code``, ``error``, ``duration_ms``, ``next_attempt_at``)."""
    owned(session, webhook_id, tenant)
    found = session.scalars(select(WebhookDelivery).where(
        WebhookDelivery.webhook_id == webhook_id)
        .order_by(WebhookDelivery.created_at.desc(), WebhookDelivery.id)
        .limit(min(limit or LOG_LIMIT, LOG_MAX))).all()
    attempts = {}
    if found:
        for attempt in session.scalars(select(WebhookAttempt).where(
                WebhookAttempt.delivery_id.in_([d.id for d in found]))
                .order_by(WebhookAttempt.number)):
            attempts.setdefault(attempt.delivery_id, []).append({
                "number": attempt.number, "at": isoformat(attempt.at),
                "status_code": attempt.status_code, "error": attempt.error,
                "duration_ms": round(attempt.duration_ms, 1),
                "next_attempt_at": isoformat(attempt.next_attempt_at)})
    return [{"id": d.id, "event_id": d.event_id, "type": d.type, "state": d.state,
             "attempts": d.attempts,
             "next_attempt_at": isoformat(d.next_attempt_at) if d.state == PENDING else None,
             "event": d.body, "log": attempts.get(d.id, [])} for d in found]


def emit(session, tenant, kind, vcdn_id, data, dedupe_key=None):
    """Put an event in the outbox of every webhook of ``tenant`` that wants ``kind``, in
    ``session``'s transaction; return how many deliveries it made.

    :param dedupe_key: an event that may be noticed more than once (a reminder): a webhook
        that had one of this key gets no other.
    """
    hooks = [w for w in session.scalars(select(Webhook).where(Webhook.tenant == tenant))
             if kind in w.events]
    if dedupe_key and hooks:
        known = set(session.scalars(select(WebhookDelivery.webhook_id).where(
            WebhookDelivery.dedupe_key == dedupe_key,
            WebhookDelivery.webhook_id.in_([w.id for w in hooks]))))
        hooks = [w for w in hooks if w.id not in known]
    if not hooks:
        return 0
    now = clock.now()
    event_id = str(uuid.uuid4())
    body = {"id": event_id, "type": kind, "created_at": isoformat(now), "vcdn_id": vcdn_id,
            "data": data}
    for webhook in hooks:
        session.add(WebhookDelivery(id=str(uuid.uuid4()), webhook_id=webhook.id,
                                    event_id=event_id, type=kind, body=body,
                                    dedupe_key=dedupe_key, state=PENDING, attempts=0,
                                    next_attempt_at=utcnow()))
    LOG.info("event %s %s of vCDN %s for %d webhook(s)", kind, event_id, vcdn_id, len(hooks))
    return len(hooks)


#: the reason the Instance Manager gives the TERMINATE that ends a lease
LEASE_EXPIRED = "lease expired"


def operation_ended(session, tenant, operation):
    """Emit :data:`OPERATION_ENDED` for ``operation`` (an :class:`Operation` in a terminal
    state, in ``session``), and :data:`LEASE_ENDING` (``stage: ended``) when it is the
    TERMINATE that ended its vCDN's lease."""
    emit(session, tenant, OPERATION_ENDED, operation.instance_id, {
        "operation_id": operation.id, "type": operation.type, "state": operation.state,
        "error": operation.error, "reason": operation.reason})
    if operation.type == states.TERMINATE and operation.reason == LEASE_EXPIRED:
        emit(session, tenant, LEASE_ENDING, operation.instance_id, {
            "stage": "ended", "operation_id": operation.id, "state": operation.state},
            dedupe_key=f"{LEASE_ENDING}:ended:{operation.instance_id}")
