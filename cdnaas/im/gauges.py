"""Prometheus gauges of the Instance Manager (served on its ``/metrics``).

Set at the end of every pass from the points it wrote; series of vCDNs and
hosts the pass did not see are removed, so an ended vCDN leaves no stale value.
"""
import threading

from prometheus_client import REGISTRY, Counter, Gauge, Summary
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

PASS_SECONDS = Summary("cdnaas_im_pass_seconds", "Wall time of this replica's passes")
PASS_VCDNS = Counter("cdnaas_im_pass_vcdns", "vCDNs observed by this replica's passes")
PASS_CPU = Counter("cdnaas_im_pass_cpu_seconds", "CPU time of this replica's process during "
                   "its passes")
SHARES_HELD = Gauge("cdnaas_im_shares_held", "Shares of the vCDNs this replica observes")
PERIODS_MISSED = Counter("cdnaas_im_periods_missed", "Periods in which this replica started "
                         "no pass, its previous one still running")
HOSTS_MARKED = Gauge("cdnaas_im_hosts_marked_power_down", "Hosts marked for power-down")

#: (name, help, labels, figure of a point) of each vCDN and region gauge
_VCDN = (("cdnaas_im_vcdn_mos", "Smoothed MOS estimate of a vCDN's viewers", "mos"),
         ("cdnaas_im_vcdn_watts", "Power attributed to a vCDN's VNFs", "watts"),
         ("cdnaas_im_vcdn_viewers", "Concurrent viewers of a vCDN", "viewers"))


class LatestPass(Collector):
    """The gauges of the latest pass's points, made when scraped (setting a labelled gauge
    per vCDN each pass cost a quarter of a millisecond per vCDN)."""

    def __init__(self):
        self._guard = threading.Lock()
        self._vcdn_points, self._host_points = [], []

    def replace(self, vcdn_points, host_points):
        with self._guard:
            self._vcdn_points, self._host_points = vcdn_points, host_points

    def collect(self):
        with self._guard:
            vcdn_points, host_points = self._vcdn_points, self._host_points
        families = [GaugeMetricFamily(name, text, labels=["vcdn"]) for name, text, _f in _VCDN]
        region = GaugeMetricFamily("cdnaas_im_region_mos",
                                   "Smoothed MOS estimate of a vCDN region",
                                   labels=["vcdn", "region"])
        for point in vcdn_points:
            if point["scope"] == "vcdn":
                for family, (_n, _t, figure) in zip(families, _VCDN):
                    if point[figure] is not None:
                        family.add_metric([point["vcdn_id"]], point[figure])
            elif point["scope"] == "region" and point["mos"] is not None:
                region.add_metric([point["vcdn_id"], point["key"]], point["mos"])
        watts = GaugeMetricFamily("cdnaas_im_host_watts", "Power of a host (RAPL or its model)",
                                  labels=["host", "region", "source"])
        busy = GaugeMetricFamily("cdnaas_im_host_utilisation",
                                 "Busy share of a host's CPUs, technology overhead included",
                                 labels=["host", "region"])
        for host, host_region, point in host_points:
            watts.add_metric([host, host_region, point["source"]], point["watts"])
            busy.add_metric([host, host_region],
                            point["cpu"] / point["vcpus"] if point["vcpus"] else 0.0)
        yield from (*families, region, watts, busy)


LATEST = LatestPass()
REGISTRY.register(LATEST)


def publish(vcdn_points, host_points, marked):
    """Replace every gauge's series by this pass's figures.

    :param vcdn_points: points of scope ``vcdn`` and ``region`` (dicts of Sample columns).
    :param host_points: ``(host, region, point)`` of every host; None: the pass did not
        look at hosts (another replica leads and publishes them; here none, and NaN
        hosts marked).
    :param marked: how many hosts are marked for power-down (None with ``host_points``).
    """
    LATEST.replace(vcdn_points, host_points or [])
    HOSTS_MARKED.set(float("nan") if host_points is None else marked)


def passed(seconds, cpu_seconds, vcdns, held):
    """Count one pass of this replica: its wall ``seconds``, its process's ``cpu_seconds``
    meanwhile, the ``vcdns`` it observed and the shares it ``held``."""
    PASS_SECONDS.observe(seconds)
    PASS_CPU.inc(cpu_seconds)
    PASS_VCDNS.inc(vcdns)
    SHARES_HELD.set(held)
