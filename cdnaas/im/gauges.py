"""Prometheus gauges of the Instance Manager (served on its ``/metrics``).

Set at the end of every pass from the points it wrote; series of vCDNs and
hosts the pass did not see are removed, so an ended vCDN leaves no stale value.
"""
from prometheus_client import Counter, Gauge, Summary

VCDN_MOS = Gauge("cdnaas_im_vcdn_mos", "Smoothed MOS estimate of a vCDN's viewers", ["vcdn"])
VCDN_WATTS = Gauge("cdnaas_im_vcdn_watts", "Power attributed to a vCDN's VNFs", ["vcdn"])
VCDN_VIEWERS = Gauge("cdnaas_im_vcdn_viewers", "Concurrent viewers of a vCDN", ["vcdn"])
REGION_MOS = Gauge("cdnaas_im_region_mos", "Smoothed MOS estimate of a vCDN region",
                   ["vcdn", "region"])
HOST_WATTS = Gauge("cdnaas_im_host_watts", "Power of a host (RAPL or its model)",
                   ["host", "region", "source"])
HOST_UTILISATION = Gauge("cdnaas_im_host_utilisation",
                         "Busy share of a host's CPUs, technology overhead included",
                         ["host", "region"])
PASS_SECONDS = Summary("cdnaas_im_pass_seconds", "Wall time of this replica's passes")
PASS_VCDNS = Counter("cdnaas_im_pass_vcdns", "vCDNs observed by this replica's passes")
SHARES_HELD = Gauge("cdnaas_im_shares_held", "Shares of the vCDNs this replica observes")
PERIODS_MISSED = Counter("cdnaas_im_periods_missed", "Periods in which this replica started "
                         "no pass, its previous one still running")
HOSTS_MARKED = Gauge("cdnaas_im_hosts_marked_power_down", "Hosts marked for power-down")

_ALL = (VCDN_MOS, VCDN_WATTS, VCDN_VIEWERS, REGION_MOS, HOST_WATTS, HOST_UTILISATION)


def publish(vcdn_points, host_points, marked):
    """Replace every gauge's series by this pass's figures.

    :param vcdn_points: points of scope ``vcdn`` and ``region`` (dicts of Sample columns).
    :param host_points: ``(host, region, point)`` of every host; None: the pass did not
        look at hosts (another replica leads and publishes them; here none, and NaN
        hosts marked).
    :param marked: how many hosts are marked for power-down (None with ``host_points``).
    """
    for gauge in _ALL:
        gauge.clear()
    for point in vcdn_points:
        if point["scope"] == "vcdn":
            _set(VCDN_MOS.labels(point["vcdn_id"]), point["mos"])
            _set(VCDN_WATTS.labels(point["vcdn_id"]), point["watts"])
            _set(VCDN_VIEWERS.labels(point["vcdn_id"]), point["viewers"])
        elif point["scope"] == "region":
            _set(REGION_MOS.labels(point["vcdn_id"], point["key"]), point["mos"])
    if host_points is None:
        HOSTS_MARKED.set(float("nan"))
        return
    for host, region, point in host_points:
        HOST_WATTS.labels(host, region, point["source"]).set(point["watts"])
        HOST_UTILISATION.labels(host, region).set(point["cpu"] / point["vcpus"] if point["vcpus"]
                                                  else 0.0)
    HOSTS_MARKED.set(marked)


def _set(child, value):
    if value is not None:
        child.set(value)


def passed(seconds, vcdns, held):
    """Count one pass of this replica: its wall ``seconds``, the ``vcdns`` it observed and
    the shares it ``held``."""
    PASS_SECONDS.observe(seconds)
    PASS_VCDNS.inc(vcdns)
    SHARES_HELD.set(held)
