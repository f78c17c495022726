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

    def register_raw(self, body, content_type):
        """Register a template sent as it was written (YAML or JSON bytes)."""
        return self.post("/sidr/v1/templates", data=body, headers={"Content-Type": content_type})


class SoClient(JsonClient):
    """Service Orchestrator: regions, hosts, vCDN instances and operations
    (``api-spec/so.yaml``); one method per call."""

    service = "so"

    # catalogue, regions and hosts
    def flavors(self):
        return self.get("/so/v1/flavors")

    def regions(self):
        return self.get("/so/v1/regions")["regions"]

    def region(self, name):
        return self.get(f"/so/v1/regions/{name}")

    def create_region(self, body):
        return self.post("/so/v1/regions", json=body)

    def update_region(self, name, body):
        return self.patch(f"/so/v1/regions/{name}", json=body)

    def hosts(self, region):
        return self.get(f"/so/v1/regions/{region}/hosts")["hosts"]

    def create_host(self, region, body):
        return self.post(f"/so/v1/regions/{region}/hosts", json=body)

    def update_host(self, region, host, body):
        return self.patch(f"/so/v1/regions/{region}/hosts/{host}", json=body)

    # vCDN instances
    def instances(self, state=None, tenant=None):
        """vCDNs, only those in ``state`` and/or of ``tenant`` when given."""
        params = {k: v for k, v in (("state", state), ("tenant", tenant)) if v}
        return self.get("/so/v1/instances", params=params or None)["vcdns"]

    def instance(self, instance_id):
        return self.get(f"/so/v1/instances/{instance_id}")

    def sig(self, instance_id):
        return self.get(f"/so/v1/instances/{instance_id}/sig")

    def create_instance(self, tenant, request):
        """Lease a vCDN for ``tenant``; returns ``{vcdn, operation}`` (202)."""
        return self.post("/so/v1/instances", json={"tenant": tenant, "request": request})

    def quote(self, tenant, request):
        return self.post("/so/v1/quotes", json={"tenant": tenant, "request": request})

    def update_instance(self, instance_id, body):
        return self.patch(f"/so/v1/instances/{instance_id}", json=body)

    def delete_instance(self, instance_id, reason):
        return self.delete(f"/so/v1/instances/{instance_id}", params={"reason": reason})

    def scale(self, instance_id, region, caches, reason=None):
        """Set ``region``'s number of caches (an UPDATE operation)."""
        body = {"region": region, "caches": caches}
        if reason:
            body["reason"] = reason
        return self.post(f"/so/v1/instances/{instance_id}/scale", json=body)

    def heal(self, instance_id, vnf, reason=None):
        """Replace the cache ``vnf`` (an UPDATE operation)."""
        body = {"vnf": vnf}
        if reason:
            body["reason"] = reason
        return self.post(f"/so/v1/instances/{instance_id}/heal", json=body)

    def operations(self, instance_id):
        return self.get(f"/so/v1/instances/{instance_id}/operations")

    def operation(self, operation_id):
        return self.get(f"/so/v1/operations/{operation_id}")


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

    def deployments(self, live=False):
        """Every deployment (``live``: those not DELETED), oldest first
        (``GET /ro/v1/deployments``)."""
        params = {"live": "true"} if live else None
        return self.get("/ro/v1/deployments", params=params)["deployments"]

    def power_host(self, host, action, reason=None):
        """Switch ``host`` ``"off"`` or ``"on"`` through RO's host power driver; returns
        ``{host, action, state, applied, steps, driver}``. 409: VNFs run on it."""
        body = {"action": action}
        if reason:
            body["reason"] = reason[:500]
        return self.post(f"/ro/v1/hosts/{host}/power", json=body)


class ImClient(JsonClient):
    """Instance Manager: reconcile passes and the actions they took."""

    service = "im"

    def reconcile(self):
        return self.post("/im/v1/reconcile")

    def actions(self, **filters):
        """Decisions, filtered by ``instance_id``, ``kind``... (``api-spec/im.yaml``)."""
        return self.get("/im/v1/actions", params={k: v for k, v in filters.items()
                                                  if v is not None} or None)["actions"]

    def metrics(self, vcdn_id, **params):
        return self.get(f"/im/v1/vcdns/{vcdn_id}/metrics", params=params or None)

    def vcdns(self):
        return self.get("/im/v1/vcdns")["vcdns"]

    def hosts(self):
        return self.get("/im/v1/hosts")
