"""A host's power from its RAPL energy counters (``/sys/class/powercap``).

Each powercap zone ``intel-rapl:<n>`` (the Linux driver also serves AMD
CPUs under that name) counts the microjoules its domain used in
``energy_uj``, wrapping at ``max_energy_range_uj``. Top-level zones are CPU
packages or, on some machines, ``psys``, the whole platform. The machine's
energy is ``psys`` alone where it exists, otherwise every package plus
every ``dram`` subzone (a package's count leaves its memory out). Power is
the energy used between two readings over the time between them.

The counters are those of the machine the Instance Manager runs on, so they
are the power of one registered host: ``CDNAAS_IM_RAPL_HOST`` names it (this
machine's hostname by default). Other hosts use their power model.
"""
import dataclasses
import logging
import re
import socket
import time
from pathlib import Path

from cdnaas.common import config

LOG = logging.getLogger(__name__)

_ZONE = re.compile(r"^intel-rapl:\d+(:\d+)?$")


@dataclasses.dataclass(frozen=True)
class Zone:
    """One counter: the zone's directory name, its domain, its count and where it wraps."""

    zone: str
    name: str
    energy_uj: int
    max_energy_uj: int


def read_zones(root):
    """The zones whose sum is the machine's energy (see the module docstring); [] without RAPL.

    :raises OSError: a counter exists but cannot be read (RAPL needs root on recent kernels).
    """
    root = Path(root)
    if not root.is_dir():
        return []
    zones = []
    for path in sorted(p for p in root.iterdir() if _ZONE.match(p.name)):
        name = (path / "name").read_text().strip()
        zones.append(Zone(zone=path.name, name=name,
                          energy_uj=int((path / "energy_uj").read_text()),
                          max_energy_uj=int((path / "max_energy_range_uj").read_text())))
    platform = [z for z in zones if z.name == "psys" and z.zone.count(":") == 1]
    if platform:
        return platform
    return [z for z in zones if (z.zone.count(":") == 1 and z.name.startswith("package"))
            or (z.zone.count(":") == 2 and z.name == "dram")]


def joules_between(before, after):
    """Energy used between two readings of the same zones, counting each wrap once."""
    earlier = {z.zone: z for z in before}
    total = 0
    for zone in after:
        previous = earlier.get(zone.zone)
        if previous is None:
            continue
        used = zone.energy_uj - previous.energy_uj
        if used < 0:  # the counter wrapped
            used += zone.max_energy_uj
        total += used
    return total / 1e6


class RaplMeter:
    """Average power of this machine between successive :meth:`watts` calls.

    :param root: the powercap directory (``CDNAAS_IM_RAPL_DIR``, default
        ``/sys/class/powercap``); tests pass a fake one.
    :param clock: monotonic seconds.
    """

    def __init__(self, root=None, clock=time.monotonic):
        self.root = root or config.setting("CDNAAS_IM_RAPL_DIR")
        self.clock = clock
        self.host = config.setting("CDNAAS_IM_RAPL_HOST") or socket.gethostname()
        self._last = None  # (time, zones)

    def watts(self):
        """Watts since the previous call; None on the first call or without readable counters."""
        try:
            zones = read_zones(self.root)
        except OSError as exc:
            LOG.warning("RAPL counters under %s cannot be read: %s", self.root, exc)
            zones = []
        now = self.clock()
        last, self._last = self._last, (now, zones) if zones else None
        if not zones or last is None or now <= last[0]:
            return None
        return joules_between(last[1], zones) / (now - last[0])
