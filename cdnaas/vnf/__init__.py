"""VNF configurations: sized for the plan, validated, rendered from ``templates/`` (or the
flavor plugin's own ``templates/`` first) and checked by the real tools.

The same renderers serve the local driver (files under a VNF's prefix directory), the
OpenStack driver (cloud-init), the SIDR's checks of a flavor's templates and the
calibration of a flavor's models. Below RO, SIDR and calibration; above ``common``,
``delivery`` and ``planning`` (the layers: ``.importlinter``).

- :mod:`.fields`: one grammar per field, :class:`~.fields.ConfigError`;
- :mod:`.endpoints`: the ports, paths and headers the VNFs expose;
- :mod:`.sizing`: connections, files and backlog for the planned load;
- :mod:`.templates`: the flavor's templates and extra variables;
- :mod:`.options`: the vCDN's service options in nginx's terms;
- :mod:`.listeners`, :mod:`.generation`: pieces every nginx config renders;
- :mod:`.cache`, :mod:`.balancer`, :mod:`.geodns`: one renderer per role, each built from
  ``(sig, vnf)`` and what the driver placed;
- :mod:`.tools`: ``nginx -t``, ``dnsmasq --test``, ``nft -c``.
"""
