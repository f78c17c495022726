"""A tenant's monthly statement, as operators read it: what each of its vCDNs used in a
calendar month (UTC), priced, and the month's totals.

Each vCDN that lived within the month (DELETED ones too: the Instance Manager keeps their
rows) is reported over the part of the month it lived in, up to now for the current month,
by the same usage rows and price table as the tenant's own usage report
(:func:`cdnaas.api.usage.usage`).
"""
import datetime as dt

from cdnaas.api import usage
from cdnaas.common import clock, errors
from cdnaas.common.clients import ImClient, SoClient
from cdnaas.common.timeutil import isoformat, parse

#: figures of a statement's lines that add up to its total
SUMMED = ("requests", "bytes_out", "gb", "viewer_hours", "vcpu_hours", "kwh")


def month_window(month):
    """``(first instant, first instant of the next month)`` of ``month`` (``YYYY-MM``, the
    OpenAPI document has checked its form), cut at now.

    :raises Unprocessable: (field ``month``) a month that has not begun.
    """
    start = dt.datetime.strptime(month, "%Y-%m").replace(tzinfo=dt.timezone.utc)
    following = (start + dt.timedelta(days=32)).replace(day=1)
    now = clock.now()
    if start > now:
        raise errors.Unprocessable(f"month {month} has not begun (it is {now:%Y-%m} now)",
                                   field="month")
    return start, min(following, now)


def statement(tenant, month):
    """``{"tenant", "month", "from", "to", "vcdns": [...], "total": {...}}``: per vCDN of
    ``tenant`` that lived within ``month`` its usage figures and price, and their sums."""
    start, until = month_window(month)
    so, im = SoClient(), ImClient()
    lived = [v for v in so.instances(tenant=tenant) + so.instances(state="DELETED", tenant=tenant)
             if parse(v.created_at) < until
             and not (v.state == "DELETED" and parse(v.updated_at) < start)]
    lines = []
    for vcdn in sorted(lived, key=lambda v: v.created_at):
        since = max(start, parse(vcdn.created_at))
        found = usage.priced(so, vcdn.flavor, im.usage(vcdn.id, since, until).total)
        lines.append({"id": vcdn.id, "name": vcdn.name, "flavor": vcdn.flavor,
                      "state": vcdn.state, "from": isoformat(since), "to": isoformat(until),
                      **{k: found[k] for k in (*SUMMED, "price")}})
    nothing = so.price("", 0, 0, 0, 0)  # the table's currency, for a month without use
    total = {k: round(sum(line[k] for line in lines), 6) for k in SUMMED}
    total["price"] = {"amount": round(sum(line["price"]["amount"] for line in lines), 2),
                      "currency": nothing.currency}
    return {"tenant": tenant, "month": month, "from": isoformat(start), "to": isoformat(until),
            "vcdns": lines, "total": total}
