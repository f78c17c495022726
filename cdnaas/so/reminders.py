"""Reminders pushed to webhooks: certificates about to expire, leases about to end.

:func:`scan_once` runs on SO's webhook thread (:mod:`cdnaas.so.webhook_delivery`) at the
services' clock (:mod:`cdnaas.common.clock`). Each reminder is emitted once per webhook
(its dedupe key):

- ``certificate.expiring``: a vCDN's uploaded certificate is within one of
  ``CDNAAS_CERT_EXPIRY_DAYS`` (30, 14, 7, 1) days of its ``not_after``; one event for
  the nearest such threshold (a certificate first seen 5 days from its end is reminded
  at 7 and at 1, not at 30 and 14);
- ``lease.ending`` (``stage: ending``): a vCDN's lease ends within 24 hours (a lease
  extended later is reminded again). Its ``stage: ended`` is emitted when the lease's
  TERMINATE ends (:func:`cdnaas.so.webhooks.operation_ended`).
"""
import datetime as dt

from sqlalchemy import select

from cdnaas.common import clock, config
from cdnaas.common.timeutil import aware, isoformat, parse
from cdnaas.so import states, tls, webhooks
from cdnaas.so.models import Instance, Webhook

LEASE_NOTICE = dt.timedelta(hours=24)
#: vCDN states whose lease and certificate still matter
LIVE = (states.SCHEDULED, states.DEPLOYING, states.ACTIVE, states.UPDATING)


def thresholds():
    """``CDNAAS_CERT_EXPIRY_DAYS`` as numbers of days, smallest first."""
    return sorted(float(days) for days in config.setting("CDNAAS_CERT_EXPIRY_DAYS"))


def scan_once(database, now=None):
    """Emit the reminders due at ``now`` (default: the services' clock); return how many
    deliveries they made."""
    now = now or clock.now()
    made = 0
    with database.transaction() as session:
        wanted = {}
        for webhook in session.scalars(select(Webhook)):
            wanted.setdefault(webhook.tenant, set()).update(webhook.events)
        tenants = [t for t, kinds in wanted.items()
                   if kinds & {webhooks.CERTIFICATE_EXPIRING, webhooks.LEASE_ENDING}]
        if not tenants:
            return 0
        for instance in session.scalars(select(Instance).where(
                Instance.tenant.in_(tenants), Instance.state.in_(LIVE))):
            made += _certificate(session, instance, now) + _lease(session, instance, now)
    return made


def _certificate(session, instance, now):
    facts = tls.tls_of(instance.service)
    if not facts or not facts.get("not_after"):
        return 0
    not_after = parse(facts["not_after"])
    left = (not_after - now).total_seconds() / 86400
    threshold = next((days for days in thresholds() if left <= days), None)
    if threshold is None or left <= 0:
        return 0
    return webhooks.emit(session, instance.tenant, webhooks.CERTIFICATE_EXPIRING, instance.id, {
        "fingerprint_sha256": facts.get("fingerprint_sha256"), "not_after": facts["not_after"],
        "days_left": round(left, 2), "threshold_days": threshold,
        "hostnames": tls.hostnames_of(instance.service)},
        dedupe_key=f"{webhooks.CERTIFICATE_EXPIRING}:{facts.get('fingerprint_sha256')}:"
                   f"{threshold:g}")


def _lease(session, instance, now):
    end = aware(instance.lease_end)
    if not end - LEASE_NOTICE <= now < end:
        return 0
    return webhooks.emit(session, instance.tenant, webhooks.LEASE_ENDING, instance.id, {
        "stage": "ending", "lease_end": isoformat(end),
        "hours_left": round((end - now).total_seconds() / 3600, 2)},
        dedupe_key=f"{webhooks.LEASE_ENDING}:ending:{instance.id}:{isoformat(end)}")
