"""Commands of the CDNaaS API version 1 (``openstack.cdn.v1`` entry points)."""
