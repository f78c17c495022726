"""What a PATCH of a vCDN asks for, checked against the vCDN as it stands.

A change may name, in any combination: a new ``origin``; ``regions`` whose demand
or quality change, or that are new to the vCDN (then with both); ``remove_regions``
(never every region); and a new ``lease.end`` (later or earlier, never past). The
result, :class:`Change`, is the vCDN after it; the SO plans the vCDN again only when
its regions, demands or qualities change, and otherwise keeps its VNFs.
Fields of the body this module does not know (the service options) are left to
their own modules.
"""
import dataclasses
import datetime as dt

from cdnaas.common import errors
from cdnaas.common.origin_policy import accepted_origin
from cdnaas.common.sig import Origin
from cdnaas.common.timeutil import isoformat
from cdnaas.common.windows import parse_time


@dataclasses.dataclass
class Change:
    """A vCDN after a change: its requested regions (``{name, demand, quality}``, in
    order: kept ones first, new ones last), origin and lease end, and what moved."""

    regions: list[dict]
    origin: Origin
    lease_end: dt.datetime
    #: demand, quality or the set of regions changed: the vCDN is planned again
    replan: bool


def check_unique(names, field):
    """Refuse a list that names one region twice; ``field`` is the list's name."""
    seen = set()
    for index, name in enumerate(names):
        if name in seen:
            raise errors.BadRequest(f"region {name} is listed twice in {field}; list it once",
                                    field=f"{field}[{index}].name" if field == "regions"
                                    else f"{field}[{index}]")
        seen.add(name)


def parse_change(body, current_regions, origin, lease_start, lease_end, known_regions, now):
    """The vCDN after ``body`` (a ``VcdnChange``), from its current requested regions,
    :class:`Origin` and lease.

    :param known_regions: names of the operator's regions.
    :raises BadRequest: a field is malformed or contradicts another (named).
    :raises Unprocessable: a region is unknown, not part of the vCDN, or every region
        would be removed.
    """
    regions, replan = _regions(body.get("regions") or [], body.get("remove_regions") or [],
                               current_regions, known_regions)
    new_origin = origin
    if "origin" in body:
        new_origin = accepted_origin(body["origin"])
    end = lease_end
    if "lease" in body:
        end = _lease_end(body["lease"]["end"], lease_start, now)
    return Change(regions=regions, origin=new_origin, lease_end=end, replan=replan)


def _regions(changes, removals, current, known):
    check_unique([c["name"] for c in changes], "regions")
    check_unique(removals, "remove_regions")
    by_name = {r["name"]: dict(r) for r in current}
    changed = {c["name"] for c in changes}
    for index, name in enumerate(removals):
        field = f"remove_regions[{index}]"
        if name in changed:
            raise errors.BadRequest(f"region {name} is both in regions and in remove_regions; "
                                    "change it or remove it", field=field)
        if name not in by_name:
            raise errors.Unprocessable(f"region {name} is not part of this vCDN (it has "
                                       f"{', '.join(by_name)}); nothing to remove", field=field)
    if removals and set(removals) == set(by_name):
        raise errors.Unprocessable("a vCDN keeps at least one region: removing "
                                   f"{', '.join(removals)} would leave none; DELETE the vCDN "
                                   "to end it", field="remove_regions")
    replan = bool(removals)
    added = []
    for index, change in enumerate(changes):
        name = change["name"]
        if name in by_name:
            update = {k: v for k, v in change.items() if k != "name"}
            replan = replan or any(by_name[name].get(k) != v for k, v in update.items())
            by_name[name].update(update)
            continue
        if name not in known:
            raise errors.Unprocessable(f"unknown region {name}; regions: "
                                       f"{', '.join(sorted(known)) or 'none'}",
                                       field=f"regions[{index}].name")
        for key, example in (("demand", "1000"), ("quality", '{"min_mos": 4.0}')):
            if key not in change:
                raise errors.BadRequest(f"region {name} is new to this vCDN: give its {key} "
                                        f"too (e.g. {example})", field=f"regions[{index}].{key}")
        added.append({"name": name, "demand": change["demand"], "quality": change["quality"]})
    kept = [by_name[r["name"]] for r in current if r["name"] not in removals]
    return kept + added, replan or bool(added)


def _lease_end(text, lease_start, now):
    end = parse_time(text, "lease.end")
    if end <= now:
        raise errors.BadRequest(f"lease.end ({isoformat(end)}) is not in the future (now is "
                                f"{isoformat(now)}); give a later end, or DELETE the vCDN to "
                                "end it now", field="lease.end")
    if end <= lease_start:
        raise errors.BadRequest(f"lease.end ({isoformat(end)}) must be after the lease start "
                                f"({isoformat(lease_start)})", field="lease.end")
    return end
