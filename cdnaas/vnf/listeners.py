"""Template values of an nginx VNF's listeners: the public one for viewers, the management
one (:data:`.endpoints.MANAGEMENT_PORT`) serving only its sources, and HTTPS."""
from cdnaas.vnf import fields, generation
from cdnaas.vnf.endpoints import GENERATION_PATH, STATUS_PATH


def listeners(listen_address, listen_port, management_port, management_sources) -> dict:
    """Template values of an nginx VNF's public and management listeners on
    ``listen_address``; the status page and generation are served on the management one
    to ``management_sources`` (addresses or prefixes, at least one) only.

    :raises ConfigError: a value is refused.
    """
    address = fields.address("listen_address", listen_address)
    port = fields.port("listen_port", listen_port)
    if fields.port("management_port", management_port) == port:
        fields.refuse("management_port", management_port, "is the public listen_port")
    if not isinstance(management_sources, (list, tuple)) or not management_sources:
        fields.refuse("management_sources", management_sources,
                      "is not a non-empty list of addresses or prefixes")
    return {"listen": fields.host_port(address, port),
            "management_listen": fields.host_port(address, management_port),
            "management_sources": fields.sources("management_sources", management_sources),
            "status_path": STATUS_PATH, "generation_path": GENERATION_PATH,
            "generation": generation.SLOT}


def tls(values, listen_address, taken_ports) -> dict | None:
    """Template values of the HTTPS listener for ``values`` (``{port, certificate, key[,
    stapling]}``, or None: no HTTPS): ``{"listen", "authority_port", "certificate", "key",
    "stapling"}`` (``authority_port``: ``:<port>`` in an https URL, empty for 443).

    :raises ConfigError: a value is refused, or the port is one of ``taken_ports``.
    """
    if values is None:
        return None
    if not isinstance(values, dict) or not {"port", "certificate", "key"} <= set(values) \
            or set(values) - {"port", "certificate", "key", "stapling"}:
        fields.refuse("tls", values, "is not {port, certificate, key[, stapling]}")
    port = fields.port("tls.port", values["port"])
    if port in taken_ports:
        fields.refuse("tls.port", port, "is the HTTP or management port")
    return {"listen": fields.host_port(fields.address("listen_address", listen_address), port),
            "authority_port": "" if port == 443 else f":{port}",
            "certificate": fields.path("tls.certificate", values["certificate"]),
            "key": fields.path("tls.key", values["key"]),
            "stapling": fields.boolean("tls.stapling", values.get("stapling", False))}
