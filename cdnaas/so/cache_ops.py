"""Invalidations and prefetches of a vCDN's caches, as SO accepts them.

A request is checked (:mod:`cdnaas.common.caching`) and recorded as an operation
(``INVALIDATE`` or ``PREFETCH``, with the checked request in ``Operation.request``) of
an ACTIVE vCDN; the runner carries it out through RO (``OperationRunner._on_caches``),
which works on every cache at once. These operations leave the vCDN's state alone: a
vCDN being changed (UPDATING) or deployed answers 409 here, but a change may start
while one runs (the runner then waits for RO to rest before it asks the caches).
"""
from cdnaas.common import caching, errors
from cdnaas.so import instances, quotas, states

#: how each kind's body is checked
CHECKS = {states.INVALIDATE: caching.invalidation, states.PREFETCH: caching.prefetch}


def start(database, instance_id, kind, body):
    """Record an operation of ``kind`` (INVALIDATE or PREFETCH) for ``body``; return
    ``(instance, operation)``.

    :raises BadRequest: a path or prefix is refused (named).
    :raises NotFound: no such vCDN. :raises Conflict: it is not ACTIVE.
    """
    request = CHECKS[kind](body)
    with database.transaction() as session:
        instance = instances.get_instance(session, instance_id)
        if instance.state != states.ACTIVE:
            raise errors.Conflict(f"vCDN {instance_id} is {instance.state}; its caches can be "
                                  "purged or filled only while it is ACTIVE (wait for its "
                                  "operation to end)", field="vcdn_id")
        quotas.lock_tenant(session, instance.tenant)
        quotas.check(session, instance.tenant, {"purges_per_hour": 1})
        operation = instances.new_operation(instance.id, kind, reason="customer")
        operation.request = request
        session.add(operation)
    return instance, operation
