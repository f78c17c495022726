"""The ``openstack`` VIM driver: vCDNs on an OpenStack cloud through openstacksdk.

- ``driver``: :class:`~cdnaas.ro.vim.openstack.driver.OpenStackDriver`, the lifecycle;
- ``cloud``: connections (``clouds.yaml`` / ``OS_CLOUD``), API call counting, waits,
  Octavia's batch member update, deletes that accept what is gone;
- ``plan``: pure decisions (subnets, addresses, flavors, tags), testable without a cloud;
- ``https``: each balancer's TERMINATED_HTTPS listener and pool, made by an update and
  put back as recorded by a restore;
- ``userdata``: cloud-init user-data rendered from the same ``templates/`` as the
  local driver (through :mod:`cdnaas.vnf`);
- ``loadgen``: a calibration's load generator, a server whose agent runs wrk and the
  viewer simulator in a region's network (:meth:`OpenStackDriver.load_test`);
- ``undo``: each step's revert, run in reverse when a later step fails;
- ``translate``: openstacksdk objects in, our dataclasses out (nothing of
  openstacksdk leaves this package).
"""
