"""Sending the webhook outbox: signed POSTs, retried with backoff, each attempt logged.

:class:`Dispatcher` runs in a thread of SO (:meth:`Dispatcher.start`); each pass
(:meth:`Dispatcher.deliver_once`) claims the deliveries due (``FOR UPDATE SKIP LOCKED``:
replicas share the work), no more than it has free threads, starts one attempt of each
and never waits for them; each attempt is recorded as it ends. A receiver that holds its
request open keeps one thread for at most ``CDNAAS_WEBHOOK_TIMEOUT`` seconds and delays
no other delivery; nothing here runs on an operation's or the IM's thread. A claim is the
row's ``next_attempt_at`` moved past the attempt's timeout: a SO that dies while sending
leaves the row to be sent again once it lapses (at least once, with the event's stable
``id``).

Each request carries (the receiver checks the first, e.g. with :func:`verify`)::

    CDNaaS-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
    CDNaaS-Event-Id: <the event's id>
    CDNaaS-Event-Type: <its type>
    CDNaaS-Delivery-Attempt: <1, 2, ...>

A 2xx answer delivers; anything else (another status, a redirect, no answer within
``CDNAAS_WEBHOOK_TIMEOUT``) is retried after ``CDNAAS_WEBHOOK_BACKOFF_SECONDS``, doubled
each time, until ``CDNAAS_WEBHOOK_ATTEMPTS`` attempts were made (then FAILED).
"""
import concurrent.futures
import datetime as dt
import hashlib
import hmac
import json
import logging
import threading
import time

import requests
from cryptography.fernet import InvalidToken
from sqlalchemy import or_, select
from sqlalchemy.exc import IntegrityError

from cdnaas.common import config
from cdnaas.common.timeutil import utcnow
from cdnaas.so import reminders, webhooks
from cdnaas.so.models import Webhook, WebhookAttempt, WebhookDelivery

LOG = logging.getLogger(__name__)

SIGNATURE_HEADER = "CDNaaS-Signature"
#: deliveries one pass claims at most
BATCH = 100
#: seconds a claim outlasts the attempt's timeout
CLAIM_MARGIN = 30.0
#: how long a signature's time may be from the receiver's clock (what :func:`verify` allows)
TOLERANCE_SECONDS = 300
USER_AGENT = "cdnaas-webhooks/1"


def sign(secret, body: bytes, timestamp: int) -> str:
    """The ``CDNaaS-Signature`` value of ``body`` sent at ``timestamp`` (unix seconds)."""
    digest = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode("ascii") + body,
                      hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify(secret, body: bytes, header: str, now=None, tolerance=TOLERANCE_SECONDS) -> bool:
    """Whether ``header`` (a ``CDNaaS-Signature``) signs ``body`` with ``secret`` and its
    time is within ``tolerance`` seconds of ``now`` (unix seconds; default: this clock)."""
    try:
        fields = dict(part.split("=", 1) for part in header.split(","))
        timestamp = int(fields["t"])
    except (ValueError, KeyError, AttributeError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = sign(secret, body, timestamp).split("v1=", 1)[1]
    return hmac.compare_digest(expected, fields.get("v1", ""))


def backoff(attempts):
    """Seconds to wait after ``attempts`` failed attempts before the next one."""
    return config.setting("CDNAAS_WEBHOOK_BACKOFF_SECONDS") * 2 ** (attempts - 1)


class Dispatcher:
    """Sends SO's webhook outbox (see the module docstring).

    :param database: SO's :class:`~cdnaas.db.engine.Database`.
    :param workers: deliveries sent at once.
    """

    def __init__(self, database, workers=8):
        self.database = database
        self.workers = workers
        self.pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="so-hook")
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._in_flight = 0

    def deliver_once(self):
        """Start one attempt of each delivery due now, as many as threads are free, without
        waiting for them; return their futures."""
        with self._lock:
            free = self.workers - self._in_flight
        if free <= 0:
            return []
        now = utcnow()
        claim = dt.timedelta(seconds=config.setting("CDNAAS_WEBHOOK_TIMEOUT") + CLAIM_MARGIN)
        with self.database.transaction() as session:
            due = session.scalars(select(WebhookDelivery).where(
                WebhookDelivery.state == webhooks.PENDING,
                or_(WebhookDelivery.next_attempt_at.is_(None),
                    WebhookDelivery.next_attempt_at <= now))
                .order_by(WebhookDelivery.next_attempt_at).limit(min(free, BATCH))
                .with_for_update(skip_locked=True)).all()
            jobs = []
            for delivery in due:
                delivery.next_attempt_at = now + claim
                webhook = session.get(Webhook, delivery.webhook_id)
                try:
                    secret = webhooks.secret_of(webhook)
                except (InvalidToken, OSError) as exc:  # left claimed: tried again later
                    LOG.error("webhook %s: its secret cannot be decrypted with %s (%s); do "
                              "SO's replicas share one CDNAAS_WEBHOOK_KEY_FILE?", webhook.id,
                              webhooks.key_file(), type(exc).__name__)
                    continue
                jobs.append((delivery.id, webhook.url, secret, delivery.body,
                             delivery.attempts + 1))
        with self._lock:
            self._in_flight += len(jobs)
        return [self.pool.submit(self._attempt_counted, *job) for job in jobs]

    def _attempt_counted(self, *job):
        try:
            self._attempt(*job)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _attempt(self, delivery_id, url, secret, event, number):
        body = json.dumps(event, separators=(",", ":")).encode("utf-8")
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT,
                   SIGNATURE_HEADER: sign(secret, body, int(time.time())),
                   "CDNaaS-Event-Id": event["id"], "CDNaaS-Event-Type": event["type"],
                   "CDNaaS-Delivery-Attempt": str(number)}
        started, status, error = time.perf_counter(), None, None
        try:
            with requests.post(url, data=body, headers=headers, allow_redirects=False,
                               timeout=config.setting("CDNAAS_WEBHOOK_TIMEOUT"),
                               stream=True) as response:
                status = response.status_code  # (its body is never read nor shown)
                if not 200 <= status < 300:
                    error = f"HTTP {status}"
        except requests.RequestException as exc:
            error = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # pylint: disable=broad-except  (one delivery, not the loop)
            LOG.exception("webhook delivery %s", delivery_id)
            error = f"{type(exc).__name__}: {exc}"
        self._record(delivery_id, number, status, error,
                     (time.perf_counter() - started) * 1000.0)

    def _record(self, delivery_id, number, status, error, duration_ms):
        now = utcnow()
        with self.database.transaction() as session:
            delivery = session.get(WebhookDelivery, delivery_id, with_for_update=True)
            if delivery is None:  # its webhook was deleted meanwhile
                return
            delivery.attempts = number
            if error is None:
                delivery.state, delivery.next_attempt_at = webhooks.DELIVERED, None
            elif number >= config.setting("CDNAAS_WEBHOOK_ATTEMPTS"):
                delivery.state, delivery.next_attempt_at = webhooks.FAILED, None
            else:
                delivery.next_attempt_at = now + dt.timedelta(seconds=backoff(number))
            session.add(WebhookAttempt(delivery_id=delivery_id, number=number, at=now,
                                       status_code=status, error=error and error[:500],
                                       duration_ms=duration_ms,
                                       next_attempt_at=delivery.next_attempt_at))
        if error:
            LOG.info("webhook delivery %s attempt %d failed: %s", delivery_id, number, error)

    def start(self):
        """Every ``CDNAAS_WEBHOOK_INTERVAL`` seconds in a thread: send reminders due
        (:func:`cdnaas.so.reminders.scan_once`), then the deliveries due, and forget the
        deliveries past their retention (:func:`cdnaas.so.webhooks.purge`)."""
        def loop():
            while not self._stop.wait(config.setting("CDNAAS_WEBHOOK_INTERVAL")):
                for task in (lambda: reminders.scan_once(self.database), self.deliver_once,
                             lambda: webhooks.purge(self.database)):
                    try:
                        task()
                    except IntegrityError:  # a replica noticed the same reminder first
                        LOG.info("a reminder was recorded by another replica first")
                    except Exception:  # pylint: disable=broad-except  (the next pass retries)
                        LOG.exception("webhook pass failed")
        threading.Thread(target=loop, name="so-webhooks", daemon=True).start()

    def shutdown(self):
        self._stop.set()
        self.pool.shutdown(wait=False, cancel_futures=True)
