"""The ``small-objects`` flavor: a vCDN for web assets (styles, scripts, images, fonts).

Sizing is the ``qoe-video`` flavor's (caches per region sized from a performance model
to meet a response-time target, placed to save energy), read from this package's own
model (``models/vm.yaml``: many small objects rather than video chunks). The service
differs: each cache runs ``templates/nginx-small-objects.conf.j2`` (short cache times,
revalidation with the origin, gzip of compressible types, long browser caching of
fingerprinted assets, a key zone sized for many small objects), with the values of
:meth:`SmallObjectsFlavor.boot_config`. Balancers and geo-DNS are the project's.
"""
from pathlib import Path

from cdnaas_plugins.qoe_video.plugin import QoeVideoFlavor

#: nginx keeps about 8,000 cache keys per MB of key zone (nginx docs, proxy_cache_path)
KEYS_PER_MB = 8000
#: objects a cache is sized to index per MB of its RAM (a 1 GB cache: 128 MB of keys)
OBJECTS_PER_RAM_MB = 1000
#: compressible types gzip is applied to (text/html is always compressed by nginx)
GZIP_TYPES = ["text/css", "text/plain", "text/javascript", "application/javascript",
              "application/json", "application/xml", "image/svg+xml"]


class SmallObjectsFlavor(QoeVideoFlavor):
    """Web assets: the qoe-video flavor's sizing, this package's model and cache config."""

    name = "small-objects"
    model_folder = Path(__file__).resolve().parent

    def boot_config(self, vnf, sig) -> dict:
        """RO hook: the cache config's values (balancers and DNS VNFs get none).

        ``keys_zone_mb``: room for :data:`OBJECTS_PER_RAM_MB` keys per MB of the cache's
        RAM, 16 to 512 MB; ``cache_valid``: how long an answer the origin gives no
        lifetime stays fresh; ``asset_max_age``: browser caching of fingerprinted
        assets; ``gzip_types``: what is compressed.
        """
        if vnf.role != "cache":
            return {}
        keys_zone = -(-vnf.ram_mb * OBJECTS_PER_RAM_MB // KEYS_PER_MB)
        return {"keys_zone_mb": max(16, min(512, keys_zone)), "cache_valid": "1m",
                "asset_max_age": "7d", "gzip_types": GZIP_TYPES}
