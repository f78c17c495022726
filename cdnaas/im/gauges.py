"""Prometheus gauges of the Instance Manager (served on its ``/metrics``).

Set at the end of every pass from the points it wrote; series of vCDNs and
hosts the pass did not see are removed, so an ended vCDN leaves no stale value.
"""
from prometheus_client import Gauge

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
HOSTS_MARKED = Gauge("cdnaas_im_hosts_marked_power_down", "Hosts marked for power-down")

_ALL = (VCDN_MOS, VCDN_WATTS, VCDN_VIEWERS, REGION_MOS, HOST_WATTS, HOST_UTILISATION)


def publish(vcdn_points, host_points, marked):
    """Replace every gauge's series by this pass's figures.

    :param vcdn_points: points of scope ``vcdn`` and ``region`` (dicts of Sample columns).
    :param host_points: ``(host, region, point)`` of every host.
    :param marked: how many hosts are marked for power-down.
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
    for host, region, point in host_points:
        HOST_WATTS.labels(host, region, point["source"]).set(point["watts"])
        HOST_UTILISATION.labels(host, region).set(point["cpu"] / point["vcpus"] if point["vcpus"]
                                                  else 0.0)
    HOSTS_MARKED.set(marked)


def _set(child, value):
    if value is not None:
        child.set(value)
