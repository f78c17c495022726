"""Where a vCDN's VNFs sit in each region's subnet, the same for every driver.

Gateway ``.1`` (RO's side of the region), load balancer ``.2``, the first DNS VNF ``.3``
and further ones ``.5`` to ``.9`` (a DNS VNF has an address in every region: a leg on
the local driver; on OpenStack, in its own region), the origin shield ``.4`` (a leg in
every region), caches from ``.10``.
"""

GATEWAY_HOST = 1
LB_HOST = 2
DNS_HOSTS = (3, 5, 6, 7, 8, 9)
SHIELD_HOST = 4
FIRST_CACHE_HOST = 10
