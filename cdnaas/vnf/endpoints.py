"""What the data plane's VNFs expose to RO and to each other: ports, paths, headers and
marks that their configs render and RO's health, purges, prefetches and log reads use."""

#: Port of the nginx VNFs' management listener (status page), never open to viewers.
MANAGEMENT_PORT = 8081
#: Where that listener serves nginx's ``stub_status`` (RO's health, metrics and drain).
STATUS_PATH = "/nginx_status"
#: Where the management listener of a VNF that logs viewer requests (a balancer; a cache
#: behind Octavia) serves its usage log (``+ ".1"``: the previous one).
USAGE_LOG_PATH = "/cdnaas/access.log"
#: seconds a balancer leaves a cache out of its rotation after a failed request to it
#: (``fail_timeout``; ``max_fails=1``): a dead cache costs one failed try per this time
#: and balancer worker. A rolling reload waits this long between a region's caches
#: (:func:`cdnaas.ro.vim.local.nginx_vnfs.roll_caches`).
MEMBER_FAIL_SECONDS = 5
#: Where an nginx VNF's management listener tells the generation of the configuration its
#: workers run (``generation <16 hex digits>``, :func:`.generation.stamp`); RO's health
#: compares it with the generation of the configuration RO last wrote
#: (:func:`.generation.generation_of`).
GENERATION_PATH = "/cdnaas/generation"
#: The name a DNS VNF's dnsmasq answers a TXT query for with the generation of the
#: configuration it runs (a reserved name, never a vCDN's).
GENERATION_NAME = "generation.cdnaas.invalid"
#: Where a cache's management listener purges the object a request path names
#: (``PURGE_PATH + path``: the cache key that path has on the public listener); a cache's
#: template declares ``{% set purge_module = true %}`` once it loads the purge module.
PURGE_PATH = "/cdnaas/purge"
#: The purge module (Debian ``libnginx-mod-http-cache-purge``) the stock cache template loads.
PURGE_MODULE = "/usr/lib/nginx/modules/ngx_http_cache_purge_module.so"
#: njs (Debian ``libnginx-mod-http-js``): a cache of a vCDN with signed URLs loads it.
JS_MODULE = "/usr/lib/nginx/modules/ngx_http_js_module.so"
#: Where a cache's management listener fetches a request path through its own public
#: listener (``PREFETCH_PATH + path``), so that the cache holds the object.
PREFETCH_PATH = "/cdnaas/prefetch"
#: Port where a cache that fetches from the vCDN's origins itself (not through a shield)
#: runs its origin fetch server, on its own address and answering it alone: the origins'
#: failover, headers and Host (:mod:`cdnaas.delivery.origins`,
#: ``nginx-cache-origins.conf.j2``).
FETCH_PORT = 8082
#: What a cache config rendering the vCDN's response rules says (nginx-cache-responses.conf.j2)
RESPONSE_RULES_MARK = "# The vCDN's response rules."
#: What a cache config rendering the vCDN's access control says (nginx-cache-access.conf.j2)
ACCESS_MARK = "# The vCDN's access control."
#: Where a cache's management listener serves its keys log: one JSON line per object
#: fetched from the origin, ``{"u": decoded path, "a": raw query string}`` (cdnaas.ro.vim.purge).
KEYS_LOG_PATH = "/cdnaas/keys.log"
#: The request header a purge of one slice of an object names the slice with (its
#: ``Range``: ``bytes=<start>-<end>``), to the management listener of a cache that slices
#: (:mod:`cdnaas.ro.vim.purge`).
PURGE_SLICE_HEADER = "X-Cdnaas-Slice"
#: The nginx variable a cache keys and fetches slices by: the slice's range where the
#: request has a Range header, empty otherwise (nginx-cache-slices.conf.j2): a request
#: without one is not sliced.
SLICE_RANGE_VARIABLE = "$cdnaas_slice_range"
