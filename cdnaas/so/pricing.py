"""Prices of quotes, from the operator's price table (YAML, read at each call)."""
from pathlib import Path

import yaml

from cdnaas.common import config

DEFAULT_TABLE = Path(__file__).with_name("prices.yaml")


def table():
    """The price table: ``CDNAAS_PRICE_TABLE`` or the shipped default."""
    path = Path(config.setting("CDNAAS_PRICE_TABLE") or DEFAULT_TABLE)
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def price(flavor, vcpus, hours, energy_kwh):
    """``{"amount", "currency", "breakdown"}`` for ``vcpus`` over ``hours`` using ``energy_kwh``."""
    prices = table()
    vcpu_hour = prices.get("flavors", {}).get(flavor, {}).get("vcpu_hour", prices["vcpu_hour"])
    compute = vcpus * hours * vcpu_hour
    energy = energy_kwh * prices["kwh"]
    return {"amount": round(compute + energy, 2), "currency": prices["currency"],
            "breakdown": {"compute": round(compute, 2), "energy": round(energy, 2),
                          "vcpu_hour": vcpu_hour, "kwh": prices["kwh"]}}
