"""A deployment's statuses, as RO keeps them and every service reads them
(``api-spec/ro.yaml``, ``Deployment.status``): spelled once, here."""

DEPLOYING = "DEPLOYING"
ACTIVE = "ACTIVE"
UPDATING = "UPDATING"
ERROR = "ERROR"
DELETING = "DELETING"
DELETED = "DELETED"

#: statuses in which a background thread is working on the deployment
BUSY = (DEPLOYING, UPDATING, DELETING)
