"""Named states and steps of the Service Orchestrator (as Octavia's ``common/constants.py``).

Operations move ``PENDING -> PROCESSING -> COMPLETED | FAILED | ROLLED_BACK``; each
kind has its list of steps, named here so no code indexes them by position. A
rollback adds :data:`ROLL_BACK` to the steps, so an SO restarted in the middle of
one carries on undoing instead of starting the work again.
"""
from cdnaas.common import states as _deployment

#: what the SO reads of the RO's deployments (api-spec/ro.yaml): RO's own names
RO_ACTIVE, RO_ERROR = _deployment.ACTIVE, _deployment.ERROR
RO_DELETED, RO_BUSY = _deployment.DELETED, _deployment.BUSY

# -- operations -----------------------------------------------------------------------------

PENDING = "PENDING"
PROCESSING = "PROCESSING"
COMPLETED = "COMPLETED"
FAILED = "FAILED"
ROLLED_BACK = "ROLLED_BACK"
SKIPPED = "SKIPPED"  # a step that had nothing to do

#: operation states in which a runner still has work to do
OPEN = (PENDING, PROCESSING)
#: operation states that never change again
TERMINAL = (COMPLETED, FAILED, ROLLED_BACK)

INSTANTIATE = "INSTANTIATE"
UPDATE = "UPDATE"
TERMINATE = "TERMINATE"
INVALIDATE = "INVALIDATE"
PREFETCH = "PREFETCH"

# -- steps ----------------------------------------------------------------------------------

PLAN = "plan and reserve"
DEPLOY = "deploy"
APPLY = "apply"
SERVE = "serve"
UNDEPLOY = "undeploy"
RELEASE = "release"
ROLL_BACK = "roll back"
PURGE_CACHES = "purge every cache"
FILL_CACHES = "fill every cache"

#: each operation kind's steps, in order
STEPS = {
    INSTANTIATE: (PLAN, DEPLOY, SERVE),
    UPDATE: (PLAN, APPLY, SERVE),
    TERMINATE: (UNDEPLOY, RELEASE),
    INVALIDATE: (PURGE_CACHES,),
    PREFETCH: (FILL_CACHES,),
}

# -- instances (vCDNs) ----------------------------------------------------------------------

SCHEDULED = "SCHEDULED"
DEPLOYING = "DEPLOYING"
ACTIVE = "ACTIVE"
UPDATING = "UPDATING"
DELETING = "DELETING"
DELETED = "DELETED"
#: instance states while an operation works on the instance
BUSY = (DEPLOYING, UPDATING, DELETING)
