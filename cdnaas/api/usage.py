"""Usage, traffic, access logs and log streams of a tenant's vCDN: the Instance Manager's
per-minute rows priced by the SO's price table, the balancers' records streamed from RO,
and the counts of the log shippers RO reads.

Every view checks the vCDN is the caller's first (another tenant's is 404) and the
window it names (ISO 8601 times from 1970 to 9000, start before end, bounded length;
a 400 names the parameter). Usage and traffic come from the IM's rows, so a DELETED
vCDN's bill is still there; its access log is not (balancers keep it while they run).
"""
import datetime as dt

from flask import Response

from cdnaas.api import vcdns
from cdnaas.common import clock, errors, windows
from cdnaas.common.clients import ImClient, RoClient, SoClient
from cdnaas.common.timeutil import parse

#: the longest window of a usage report, of a traffic series, of a log export
USAGE_LONGEST = dt.timedelta(days=366)
TRAFFIC_LONGEST = dt.timedelta(days=31)
EXPORT_LONGEST = dt.timedelta(days=7)
DEFAULT_WINDOW = dt.timedelta(hours=1)
#: records an export sends by default
EXPORT_LIMIT = 100_000


def usage(caller, vcdn_id, args):
    """What the caller's vCDN used within ``from``..``to`` (default: since it was
    created), per region and in total, each with its price."""
    vcdn = vcdns.owned(caller, vcdn_id)
    since, until = windows.window(args, "from", "to", clock.now(),
                                  lambda _end: parse(vcdn.created_at), USAGE_LONGEST)
    found = ImClient().usage(vcdn_id, since, until)
    so = SoClient()
    return {"flavor": vcdn.flavor, "state": vcdn.state, **found.body,
            "regions": [priced(so, vcdn.flavor, part) for part in found.regions],
            "total": priced(so, vcdn.flavor, found.total)}


def priced(so, flavor, figures):
    """The IM's :class:`~cdnaas.common.answers.UsageFigures` of a vCDN of ``flavor`` as
    the API shows them: their JSON with their ``price`` from the SO's price table."""
    price = so.price(flavor, figures.vcpu_hours, figures.kwh, figures.gb, figures.viewer_hours)
    return {**figures.body, "price": price.body}


def traffic(caller, vcdn_id, args):
    """The caller's vCDN's traffic per region as a series (``since``, ``until``, ``step``)."""
    vcdns.owned(caller, vcdn_id)
    since, until = windows.window(args, "since", "until", clock.now(),
                                  lambda end: end - DEFAULT_WINDOW, TRAFFIC_LONGEST)
    return ImClient().traffic(vcdn_id, since, until, args.get("step", type=int))


def access_log(caller, vcdn_id, args):
    """The caller's vCDN's requests within ``from``..``to`` (default the last hour) as
    NDJSON, streamed from its balancers through RO, at most ``limit`` records."""
    vcdn = vcdns.owned(caller, vcdn_id)
    since, until = windows.window(args, "from", "to", clock.now(),
                                  lambda end: end - DEFAULT_WINDOW, EXPORT_LONGEST)
    try:
        chunks = RoClient().access_log(vcdn_id, since=since.isoformat(),
                                       until=until.isoformat(),
                                       limit=args.get("limit", EXPORT_LIMIT, type=int))
    except (errors.NotFound, errors.Conflict):
        raise errors.Conflict(f"vCDN {vcdn_id} is {vcdn.state}: its balancers keep the "
                              "access log only while it is ACTIVE; its usage stays at "
                              f"/api/v1/vcdns/{vcdn_id}/usage", field="vcdn_id") from None
    return Response(chunks, mimetype="application/x-ndjson")


def log_streams(caller, vcdn_id):
    """The caller's vCDN's log streams (as its view shows them) with what each VNF's
    shipper received, sent and dropped, and the totals."""
    vcdn = vcdns.owned(caller, vcdn_id)
    try:
        vnfs = RoClient().log_streams(vcdn_id)["vnfs"]
    except (errors.NotFound, errors.Conflict):
        raise errors.Conflict(f"vCDN {vcdn_id} is {vcdn.state}: its log shippers run "
                              "only while it is ACTIVE", field="vcdn_id") from None
    shippers = [v["shipper"] for v in vnfs if v["shipper"]]
    destinations = [d for s in shippers for d in s["destinations"]]
    return {"log_streams": vcdn.log_streams or [], "vnfs": vnfs,
            "totals": {"received": sum(s["received"] for s in shippers),
                       "sent": sum(d["sent"] for d in destinations),
                       "dropped": sum(d["dropped"] for d in destinations)}}
