"""Prices from the operator's price table (YAML, read at each call): quotes before a
lease and usage reports after it, by the one function :func:`price`."""
from pathlib import Path

import yaml

from cdnaas.common import config

DEFAULT_TABLE = Path(__file__).with_name("prices.yaml")
#: items of the table a price is made of: (what is used, the table's unit price)
ITEMS = (("vcpu_hours", "vcpu_hour"), ("kwh", "kwh"), ("gb", "gb"),
         ("viewer_hours", "viewer_hour"))


def table():
    """The price table: ``CDNAAS_PRICE_TABLE`` or the shipped default."""
    path = Path(config.setting("CDNAAS_PRICE_TABLE") or DEFAULT_TABLE)
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def price(flavor, vcpu_hours, energy_kwh, gb=0.0, viewer_hours=0.0):
    """``{"amount", "currency", "breakdown"}`` of what a vCDN of ``flavor`` uses: vCPU-hours,
    energy, traffic (GB sent to viewers, 10^9 bytes) and viewer-hours, each at the table's
    unit price (the flavor's own where the table names one). A quote prices its reserved
    vCPUs over the lease and its estimated energy (no traffic); a usage report what was
    measured.

    ``breakdown`` has ``compute``, ``energy``, ``traffic`` and ``viewers`` amounts and the
    unit prices used (``vcpu_hour``, ``kwh``, ``gb``, ``viewer_hour``; a unit the table
    does not name costs 0).
    """
    prices = table()
    own = prices.get("flavors", {}).get(flavor, {})
    used = {"vcpu_hours": vcpu_hours, "kwh": energy_kwh, "gb": gb, "viewer_hours": viewer_hours}
    units = {unit: own.get(unit, prices.get(unit, 0.0)) for _item, unit in ITEMS}
    amounts = {item: used[item] * units[unit] for item, unit in ITEMS}
    parts = {"compute": amounts["vcpu_hours"], "energy": amounts["kwh"],
             "traffic": amounts["gb"], "viewers": amounts["viewer_hours"]}
    return {"amount": round(sum(parts.values()), 2), "currency": prices["currency"],
            "breakdown": {**{name: round(value, 2) for name, value in parts.items()}, **units}}
