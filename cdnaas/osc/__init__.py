"""The ``openstack cdn ...`` commands: a python-openstackclient plugin (osc-lib, cliff).

:mod:`cdnaas.osc.plugin` is the ``openstack.cli.extension`` entry point; the commands of
API version 1 (entry point group ``openstack.cdn.v1``) are in :mod:`cdnaas.osc.v1`.
"""
