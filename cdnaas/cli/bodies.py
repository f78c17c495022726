"""The customer API's request bodies built from command-line words, for both clients:
the ``cdnaas`` CLI (click) and the ``openstack cdn`` plugin (cliff).

Every function here is pure and raises ``ValueError`` with a message fit for the user;
each command-line library turns it into its own usage error.
"""
import datetime as dt
import re

from cdnaas.common import timeutil

NAME = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
RESPONSE_TIME = re.compile(r"^p(\d+(?:\.\d+)?)=(\d+(?:\.\d+)?)(?:ms)?$")
#: the quality of a region created without one (the paper's "acceptable" MOS)
DEFAULT_MIN_MOS = 3.6


def check_name(value, what):
    """``value`` when it is a valid ``what`` (vCDN, region, host, tenant) name."""
    if not NAME.match(value):
        raise ValueError(f"{value!r}: a {what} name is lower-case letters, digits and dashes, "
                         "starting with a letter")
    return value


def parse_quality(text):
    """``4.2`` -> ``{"min_mos": 4.2}``; ``p95=200`` -> a response-time target; else ValueError."""
    match = RESPONSE_TIME.match(text)
    if match:
        percentile, max_ms = float(match[1]), float(match[2])
        if not 0 < percentile <= 100 or max_ms <= 0:
            raise ValueError(f"{text!r}: the percentile must be in (0, 100] and the time positive")
        return {"response_time": {"percentile": percentile, "max_ms": max_ms}}
    try:
        mos = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is neither a MOS (1-5) nor a response time like p95=200")
    if not 1 <= mos <= 5:
        raise ValueError(f"MOS {text} is outside 1-5")
    return {"min_mos": mos}


def parse_region(text, update=False):
    """Parse ``NAME:DEMAND[:QUALITY]`` (for an update ``NAME[:DEMAND][:QUALITY]``).

    QUALITY is a minimum MOS (``4.0``) or a percentile response time (``p95=200``).

    :returns: the region object of ``VcdnRequest.regions`` / ``VcdnChange.regions``
        (``quality`` left out of a create when not given; see :func:`vcdn_request`).
    :raises ValueError: the text does not follow the syntax.
    """
    syntax = "NAME[:DEMAND][:QUALITY]" if update else "NAME:DEMAND[:QUALITY]"
    parts = text.split(":")
    if not 1 <= len(parts) <= 3 or (not update and len(parts) < 2):
        raise ValueError(f"{text!r} is not {syntax}, e.g. eu-west:1000:4.0")
    name, demand, quality = (parts + ["", ""])[:3]
    if not NAME.match(name):
        raise ValueError(f"region name {name!r} must be lower-case letters, digits and dashes, "
                         "starting with a letter")
    region = {"name": name}
    if demand or not update:
        if not demand.isdigit() or int(demand) < 1:
            raise ValueError(f"demand {demand!r} of {name} must be a whole number of viewers >= 1")
        region["demand"] = int(demand)
    if quality:
        region["quality"] = parse_quality(quality)
    if update and len(region) == 1:
        raise ValueError(f"{text!r} changes nothing: give a demand and/or a quality, "
                         "e.g. eu-west:2000 or eu-west::4.2")
    return region


def drop_none(mapping):
    """``mapping`` without its None values."""
    return {key: value for key, value in mapping.items() if value is not None}


def vcdn_request(name, flavor, origin, region_list, min_mos=DEFAULT_MIN_MOS, lease_start=None,
                 lease_end=None, lease_hours=None):
    """The ``VcdnRequest`` body (``POST /api/v1/vcdns``, ``/quotes``; ``name`` None for a
    quote): regions from :func:`parse_region`, those without a quality given ``min_mos``;
    the lease as an end or a length in hours from its start (default now).

    :raises ValueError: the lease or the regions are inconsistent.
    """
    if (lease_end is None) == (lease_hours is None):
        raise ValueError("give the lease as exactly one of --lease-end or --lease-hours")
    if lease_end is None:
        lease_end = (lease_start or timeutil.utcnow()) + dt.timedelta(hours=lease_hours)
    if lease_start is not None and lease_end <= lease_start:
        raise ValueError("--lease-end must come after --lease-start")
    regions = [{"quality": {"min_mos": min_mos}, **region} for region in region_list]
    names = [r["name"] for r in regions]
    if len(set(names)) != len(names):
        raise ValueError("each region may be named only once")
    lease = {"end": timeutil.isoformat(lease_end)}
    if lease_start is not None:
        lease["start"] = timeutil.isoformat(lease_start)
    return {**({"name": name} if name is not None else {}), "flavor": flavor,
            "origin": origin, "regions": regions, "lease": lease}


def vcdn_change(region_list=(), added=(), removed=(), origin=None, lease_end=None,
                hostnames=None):
    """The ``VcdnChange`` body (``PATCH /api/v1/vcdns/{id}``) of the changes given:
    regions changed (:func:`parse_region` with ``update``), added (quality default MOS
    3.6) and removed, a new origin, lease end (a datetime) and hostnames (``[]``: none)."""
    regions = [*region_list, *({"quality": {"min_mos": DEFAULT_MIN_MOS}, **r} for r in added)]
    return drop_none({
        "regions": regions or None, "remove_regions": list(removed) or None, "origin": origin,
        "lease": {"end": timeutil.isoformat(lease_end)} if lease_end else None,
        "hostnames": None if hostnames is None else list(hostnames)})
