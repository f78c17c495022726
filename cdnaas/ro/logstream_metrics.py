"""RO's Prometheus view of the vCDNs' log shippers: the last counts RO read of each
(:meth:`cdnaas.ro.service.DeploymentService.log_streams`), per vCDN, VNF and destination. Each
shipper also answers its own counters on its VNF's management listener
(:data:`cdnaas.delivery.logstreams.STATUS_PATH` ``/metrics``)."""
from prometheus_client import Gauge

SENT = Gauge("cdnaas_ro_log_stream_records_sent", "Records a VNF's log shipper delivered to "
             "a collector (as last read)", ["vcdn", "vnf", "destination"])
DROPPED = Gauge("cdnaas_ro_log_stream_records_dropped", "Records a VNF's log shipper dropped "
                "for a collector that did not take them (as last read)",
                ["vcdn", "vnf", "destination"])


def record(vcdn_id, vnfs):
    """Set the gauges from ``vnfs`` (:meth:`VimDriver.log_stream_status`'s answer)."""
    for vnf in vnfs:
        for destination in (vnf["shipper"] or {}).get("destinations", []):
            labels = (vcdn_id, vnf["name"], destination["name"])
            SENT.labels(*labels).set(destination["sent"])
            DROPPED.labels(*labels).set(destination["dropped"])
