"""Clients of the internal services, one class per service."""
from cdnaas.common.http import JsonClient


class SidrClient(JsonClient):
    """Service Instance Descriptor Repository: service templates by flavor."""

    service = "sidr"

    def list_templates(self, flavor=None):
        return self.get("/sidr/v1/templates", params={"flavor": flavor} if flavor else None)["templates"]

    def get_template(self, flavor, version=None):
        path = f"/sidr/v1/templates/{flavor}" + (f"/{version}" if version else "")
        return self.get(path)

    def register_template(self, document):
        return self.post("/sidr/v1/templates", json=document)


class SoClient(JsonClient):
    """Service Orchestrator: regions, hosts, vCDN instances and operations."""

    service = "so"


class RoClient(JsonClient):
    """Resource Orchestrator: deployments of SIGs through the VIM driver."""

    service = "ro"

    def deploy(self, deployment_id, sig):
        return self.put(f"/ro/v1/deployments/{deployment_id}", json={"sig": sig})

    def get_deployment(self, deployment_id, wait=0.0):
        """The deployment; with ``wait``, RO answers at its next change (long poll)."""
        params = {"wait": wait} if wait else None
        return self.get(f"/ro/v1/deployments/{deployment_id}", params=params)

    def undeploy(self, deployment_id):
        return self.delete(f"/ro/v1/deployments/{deployment_id}")

    def health(self, deployment_id):
        return self.get(f"/ro/v1/deployments/{deployment_id}/health")


class ImClient(JsonClient):
    """Instance Manager: reconcile passes and the actions they took."""

    service = "im"

    def reconcile(self):
        return self.post("/im/v1/reconcile")

    def actions(self, instance_id=None):
        params = {"instance_id": instance_id} if instance_id else None
        return self.get("/im/v1/actions", params=params)["actions"]
