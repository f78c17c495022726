"""Clients of the internal services, one class per service, and of the customer API."""
from pathlib import Path

from cdnaas.common.answers import (Accepted, CacheResults, Calibration, Deployment, Health,
                                   Host, Instance, Measured, Operation, PowerAction,
                                   PowerDriver, Price, Readings, Reconciliation, Region,
                                   Secret, Template, Traffic, Unread, Usage, from_json, many)
from cdnaas.common.http import JsonClient
from cdnaas.common.timeutil import isoformat


def _if_match(value):
    return {"If-Match": value} if value is not None else None


class SidrClient(JsonClient):
    """Service Instance Descriptor Repository: service templates by flavor."""

    service = "sidr"

    def list_templates(self, flavor=None):
        """Every version of every template (of ``flavor``), as :class:`Template` records."""
        return many(Template, self.get("/sidr/v1/templates",
                                       params={"flavor": flavor} if flavor else None)["templates"])

    def get_template(self, flavor, version=None):
        """The template of ``flavor`` (its latest version offered when ``version`` is None)."""
        path = f"/sidr/v1/templates/{flavor}" + (f"/{version}" if version else "")
        return from_json(Template, self.get(path))

    def register_template(self, document):
        return self.post("/sidr/v1/templates", json=document)

    def register_raw(self, body, content_type):
        """Register a template sent as it was written (YAML or JSON bytes)."""
        return self.post("/sidr/v1/templates", data=body, headers={"Content-Type": content_type})

    def set_deprecated(self, flavor, version, deprecated=True):
        """Deprecate (or offer again) one version; returns the template."""
        return self.patch(f"/sidr/v1/templates/{flavor}/{version}", json={"deprecated": deprecated})

    def delete_template(self, flavor, version):
        """Delete one version (409 while a vCDN not DELETED uses it)."""
        return self.delete(f"/sidr/v1/templates/{flavor}/{version}")


class SoClient(JsonClient):
    """Service Orchestrator: regions, hosts, vCDN instances and operations
    (``api-spec/so.yaml``); one method per call.

    What a service reads of another comes as records of :mod:`cdnaas.common.answers`;
    the answers the customer API forwards unchanged stay JSON: :meth:`flavors`,
    :meth:`region`, the region and host changes,
    :meth:`instances_page`, :meth:`sig`, :meth:`quote`, :meth:`sign_url`,
    :meth:`operations`, the webhooks and the quotas."""

    service = "so"

    # catalogue, regions and hosts
    def flavors(self):
        return self.get("/so/v1/flavors")

    def template_users(self, flavor, version):
        """vCDNs not DELETED made of ``flavor``'s template ``version``: :class:`Instance`
        records of their ``id``, ``tenant`` and ``state``."""
        return many(Instance, self.get(f"/so/v1/flavors/{flavor}/versions/{version}/vcdns")["vcdns"])

    def regions(self):
        """Every region, as :class:`Region` records."""
        return many(Region, self.get("/so/v1/regions")["regions"])

    def region(self, name):
        return self.get(f"/so/v1/regions/{name}")

    def create_region(self, body):
        return self.post("/so/v1/regions", json=body)

    def update_region(self, name, body):
        return self.patch(f"/so/v1/regions/{name}", json=body)

    def hosts(self, region):
        """The hosts of ``region``, as :class:`Host` records."""
        return many(Host, self.get(f"/so/v1/regions/{region}/hosts")["hosts"])

    def create_host(self, region, body):
        return self.post(f"/so/v1/regions/{region}/hosts", json=body)

    def update_host(self, region, host, body):
        return self.patch(f"/so/v1/regions/{region}/hosts/{host}", json=body)

    # vCDN instances
    def instances(self, state=None, tenant=None, brief=False):
        """Every vCDN (DELETED ones only with that ``state``), only those in ``state``
        and/or of ``tenant`` when given, oldest first: all pages, as :class:`Instance`
        records (``brief``: only the fields the IM reads, ``GET
        /so/v1/instances?brief=true``)."""
        params = {"state": state, "tenant": tenant, "brief": "true" if brief else None}
        return many(Instance, self.every_page("/so/v1/instances", "vcdns",
                                              {k: v for k, v in params.items() if v is not None}))

    def instances_page(self, tenant=None, state=None, name=None, limit=None, marker=None,
                       include_deleted=False):
        """One page of vCDNs: ``{"vcdns": [...], "next": marker or None}``
        (``GET /so/v1/instances``; None filters are left out)."""
        params = {"tenant": tenant, "state": state, "name": name, "limit": limit,
                  "marker": marker, "include_deleted": "true" if include_deleted else None}
        return self.get("/so/v1/instances",
                        params={k: v for k, v in params.items() if v is not None} or None)

    def instance(self, instance_id):
        return from_json(Instance, self.get(f"/so/v1/instances/{instance_id}"))

    def sig(self, instance_id):
        return self.get(f"/so/v1/instances/{instance_id}/sig")

    def create_instance(self, tenant, request):
        """Lease a vCDN for ``tenant``; returns the :class:`Accepted` vCDN and operation."""
        return from_json(Accepted, self.post("/so/v1/instances",
                                             json={"tenant": tenant, "request": request}))

    def quote(self, tenant, request):
        return self.post("/so/v1/quotes", json={"tenant": tenant, "request": request})

    def price(self, flavor, vcpu_hours, kwh, gb, viewer_hours):
        """The price of usage figures of a vCDN of ``flavor`` (the operator's price table):
        a :class:`Price`."""
        return from_json(Price, self.post("/so/v1/prices", json={"flavor": flavor, "vcpu_hours": vcpu_hours,
                                                "kwh": kwh, "gb": gb,
                                                "viewer_hours": viewer_hours}))

    def update_instance(self, instance_id, body, if_match=None):
        """Change a vCDN (``VcdnChange``); ``if_match``: an If-Match header to honour."""
        return from_json(Accepted, self.patch(f"/so/v1/instances/{instance_id}", json=body,
                                              headers=_if_match(if_match)))

    def delete_instance(self, instance_id, reason, if_match=None):
        return from_json(Accepted, self.delete(f"/so/v1/instances/{instance_id}",
                                               params={"reason": reason},
                                               headers=_if_match(if_match)))

    def scale(self, instance_id, region, caches, reason=None):
        """Set ``region``'s number of caches (an UPDATE operation)."""
        body = {"region": region, "caches": caches}
        if reason:
            body["reason"] = reason
        return from_json(Accepted, self.post(f"/so/v1/instances/{instance_id}/scale", json=body))

    def heal(self, instance_id, vnf, reason=None, in_place=False):
        """Heal ``vnf`` (an UPDATE operation): a cache is replaced unless healed
        ``in_place``, as any other VNF is."""
        body = {"vnf": vnf}
        if reason:
            body["reason"] = reason
        if in_place:
            body["in_place"] = True
        return from_json(Accepted, self.post(f"/so/v1/instances/{instance_id}/heal", json=body))

    def invalidate(self, instance_id, body):
        """Purge ``body``'s ``paths`` and ``prefixes`` from every cache of the vCDN; returns
        the :class:`Accepted` vCDN and INVALIDATE operation."""
        return from_json(Accepted, self.post(f"/so/v1/instances/{instance_id}/invalidations",
                                             json=body))

    def prefetch(self, instance_id, body):
        """Have every cache of the vCDN fetch ``body``'s ``paths``; returns the
        :class:`Accepted` vCDN and PREFETCH operation."""
        return from_json(Accepted, self.post(f"/so/v1/instances/{instance_id}/prefetches",
                                             json=body))

    def sign_url(self, instance_id, body):
        """A URL of the vCDN signed as ``body`` asks: ``{url, path, query, expires, key_id}``."""
        return self.post(f"/so/v1/instances/{instance_id}/signed-urls", json=body)

    def operations(self, instance_id, limit=None, marker=None):
        """One page of the vCDN's operations: ``{"operations": [...], "next": marker or None}``."""
        params = {k: v for k, v in (("limit", limit), ("marker", marker)) if v is not None}
        return self.get(f"/so/v1/instances/{instance_id}/operations", params=params or None)

    def operation(self, operation_id):
        return from_json(Operation, self.get(f"/so/v1/operations/{operation_id}"))

    # webhooks (cdnaas.so.webhooks); ``tenant``: only that tenant's (None: any)
    def webhooks(self, tenant=None):
        """The webhooks (secrets masked)."""
        return self.get("/so/v1/webhooks", params={"tenant": tenant} if tenant else None)["webhooks"]

    def create_webhook(self, tenant, body):
        """Register ``body`` (``WebhookCreate``) for ``tenant``; the answer holds the secret,
        this once."""
        return self.post("/so/v1/webhooks", json={"tenant": tenant, "webhook": body})

    def webhook(self, webhook_id, tenant=None):
        return self.get(f"/so/v1/webhooks/{webhook_id}",
                        params={"tenant": tenant} if tenant else None)

    def delete_webhook(self, webhook_id, tenant=None):
        return self.delete(f"/so/v1/webhooks/{webhook_id}",
                           params={"tenant": tenant} if tenant else None)

    def webhook_deliveries(self, webhook_id, tenant=None, limit=None):
        """The webhook's delivery log, newest first, each delivery with its attempts."""
        params = {k: v for k, v in (("tenant", tenant), ("limit", limit)) if v is not None}
        return self.get(f"/so/v1/webhooks/{webhook_id}/deliveries",
                        params=params or None)["deliveries"]

    def emit_event(self, kind, vcdn_id, data, dedupe_key=None):
        """Put an event about ``vcdn_id`` in its tenant's webhook outbox; returns
        ``{"deliveries": n}``."""
        body = {"type": kind, "vcdn_id": vcdn_id, "data": data}
        if dedupe_key:
            body["dedupe_key"] = dedupe_key
        return self.post("/so/v1/events", json=body)


    def quotas(self, tenant):
        """The tenant's limits with what it uses (:func:`cdnaas.so.quotas.view`)."""
        return self.get(f"/so/v1/tenants/{tenant}/quotas")

    def set_quotas(self, tenant, limits):
        """Set the tenant's limits (``{quota: limit or None}``; None: the default)."""
        return self.put(f"/so/v1/tenants/{tenant}/quotas", json=limits)

    def quota_defaults(self):
        return self.get("/so/v1/quotas/defaults")

    def set_quota_defaults(self, limits):
        """Set the operator's default limits (``{quota: limit or None}``)."""
        return self.put("/so/v1/quotas/defaults", json=limits)


class RoClient(JsonClient):
    """Resource Orchestrator: deployments of SIGs through the VIM driver.

    Answers come as records of :mod:`cdnaas.common.answers`, except those the customer
    API forwards unchanged (:meth:`log_streams`, :meth:`check_challenges`) and
    :meth:`placement`, a mapping keyed by host names."""

    service = "ro"

    def deploy(self, deployment_id, sig):
        """Deploy (or update to) ``sig``; returns the :class:`Deployment` as RO took it."""
        return from_json(Deployment, self.put(f"/ro/v1/deployments/{deployment_id}",
                                              json={"sig": sig}))

    def get_deployment(self, deployment_id, wait=0.0):
        """The deployment; with ``wait``, RO answers at its next change (long poll)."""
        params = {"wait": wait} if wait else None
        return from_json(Deployment, self.get(f"/ro/v1/deployments/{deployment_id}",
                                              params=params))

    def undeploy(self, deployment_id):
        return self.delete(f"/ro/v1/deployments/{deployment_id}")

    def health(self, deployment_id):
        """RO's :class:`Health` check of the deployment."""
        return from_json(Health, self.get(f"/ro/v1/deployments/{deployment_id}/health"))

    def reconciliations(self):
        """The :class:`Reconciliation` records after restores of the databases, newest
        first."""
        return many(Reconciliation, self.get("/ro/v1/reconciliations")["reconciliations"])

    def invalidate(self, deployment_id, paths, prefixes):
        """Purge ``paths`` and ``prefixes`` from every cache of the deployment; answers once
        each cache confirmed or failed: :class:`CacheResults`."""
        return from_json(CacheResults, self.post(
            f"/ro/v1/deployments/{deployment_id}/invalidations",
            json={"paths": paths, "prefixes": prefixes}))

    def prefetch(self, deployment_id, paths):
        """Have every cache of the deployment fetch ``paths``; answers as :meth:`invalidate`."""
        return from_json(CacheResults, self.post(
            f"/ro/v1/deployments/{deployment_id}/prefetches", json={"paths": paths}))

    def check_challenges(self, deployment_id, answers):
        """Check that the deployment's caches answer exactly ``answers`` (ACME HTTP-01
        ``[{token, key_authorization}]``; :mod:`cdnaas.common.challenges`)."""
        return self.put(f"/ro/v1/deployments/{deployment_id}/acme-challenges",
                        json={"challenges": answers})

    def traffic(self, deployment_id, cursor=None):
        """The requests the deployment's balancers logged since ``cursor`` (None: all they
        keep), per region and minute, and the cursor to send next: :class:`Traffic`."""
        params = {"cursor": cursor} if cursor else None
        return from_json(Traffic, self.get(f"/ro/v1/deployments/{deployment_id}/traffic",
                                           params=params))

    def readings(self, deployment_id, cursor=None):
        """:meth:`health`, the VNFs' load figures and :meth:`traffic` since ``cursor`` in
        one :class:`Readings` (``traffic`` None with ``traffic_error`` when the logs could
        not be read)."""
        params = {"cursor": cursor} if cursor else None
        return from_json(Readings, self.get(f"/ro/v1/deployments/{deployment_id}/readings",
                                            params=params))

    def readings_many(self, asked):
        """:meth:`readings` of many deployments (``[{"id", "cursor"}]``, at most 500) in
        one call: an answer per entry, in order, :class:`Readings` or, for one that could
        not be read, :class:`Unread`."""
        return [from_json(Unread if "error" in found else Readings, found)
                for found in self.post("/ro/v1/readings", json={"deployments": asked})["readings"]]

    def access_log(self, deployment_id, **params):
        """The deployment's logged requests as NDJSON, streamed: an iterator of byte chunks
        (``since``, ``until``, ``limit``: see ``api-spec/ro.yaml``)."""
        return self.stream(f"/ro/v1/deployments/{deployment_id}/access-log",
                           params={k: v for k, v in params.items() if v is not None} or None)

    def log_streams(self, deployment_id):
        """The counts of the deployment's log shippers: ``{"id", "vnfs": [{"name",
        "region", "shipper"}]}`` (``GET /ro/v1/deployments/{id}/log-streams``)."""
        return self.get(f"/ro/v1/deployments/{deployment_id}/log-streams")

    def deployments(self, live=False):
        """Every deployment (``live``: those not DELETED), oldest first
        (``GET /ro/v1/deployments``)."""
        params = {"live": "true"} if live else None
        return many(Deployment, self.get("/ro/v1/deployments", params=params)["deployments"])

    def placement(self):
        """``{host: ["deployment/VNF", ...]}`` of the deployments not DELETED
        (``GET /ro/v1/placement``)."""
        return self.get("/ro/v1/placement")["hosts"]

    def store_secret(self, owner, certificate, private_key):
        """Have RO keep vCDN ``owner``'s certificate chain and key; returns its
        :class:`Secret` reference (never the key)."""
        return from_json(Secret, self.post("/ro/v1/secrets", json={
            "owner": owner, "certificate": certificate, "private_key": private_key}))

    def secrets(self, owner=None):
        """:class:`Secret` references RO keeps (of vCDN ``owner``), without their material."""
        return many(Secret, self.get("/ro/v1/secrets",
                                     params={"owner": owner} if owner else None)["secrets"])

    def delete_secret(self, ref):
        """Delete a reference and its material (409 while a running deployment uses it)."""
        return self.delete(f"/ro/v1/secrets/{ref}")

    def power_driver(self):
        """:class:`PowerDriver`: RO's host power driver, and whether it only records
        actions (``log``, ``noop``) instead of switching hosts."""
        return from_json(PowerDriver, self.get("/ro/v1/power"))

    def power_host(self, host, action, reason=None):
        """Switch ``host`` ``"off"`` or ``"on"`` through RO's host power driver; returns
        its :class:`PowerAction`. 409: VNFs run on it."""
        body = {"action": action}
        if reason:
            body["reason"] = reason[:500]
        return from_json(PowerAction, self.post(f"/ro/v1/hosts/{host}/power", json=body))


class ImClient(JsonClient):
    """Instance Manager: reconcile passes and the actions they took.

    :meth:`vcdns` and :meth:`usage`, which the customer API reads, come as records of
    :mod:`cdnaas.common.answers`; the answers it forwards unchanged stay JSON:
    :meth:`reconcile`, :meth:`actions`, :meth:`metrics`, :meth:`traffic`, :meth:`hosts`."""

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
        """Every measured vCDN's figures at the latest pass, as :class:`Measured` records."""
        return many(Measured, self.get("/im/v1/vcdns")["vcdns"])

    def usage(self, vcdn_id, since, until):
        """The vCDN's :class:`Usage` per region and in total within ``[since, until)``
        (times)."""
        return from_json(Usage, self.get(f"/im/v1/vcdns/{vcdn_id}/usage",
                                         params={"from": isoformat(since), "to": isoformat(until)}))

    def traffic(self, vcdn_id, since, until, step=None):
        """The vCDN's traffic per region, a point per ``step`` seconds."""
        params = {"since": isoformat(since), "until": isoformat(until), "step": step}
        return self.get(f"/im/v1/vcdns/{vcdn_id}/traffic",
                        params={k: v for k, v in params.items() if v is not None})

    def hosts(self):
        return self.get("/im/v1/hosts")


class CalibrationClient(JsonClient):
    """Resource Orchestrator: calibration campaigns through the VIM driver."""

    service = "ro"

    def start(self, request):
        """Start a campaign; returns the :class:`Calibration` job (202). 409 while one runs."""
        return from_json(Calibration, self.post("/ro/v1/calibrations", json=request))

    def job(self, job_id):
        return from_json(Calibration, self.get(f"/ro/v1/calibrations/{job_id}"))

    def jobs(self):
        return many(Calibration, self.get("/ro/v1/calibrations")["calibrations"])


class CustomerApi(JsonClient):
    """Typed client of the customer API (``api-spec/api.yaml``): one method per call.

    The ``cdnaas`` CLI (:class:`cdnaas.cli.client.ApiClient`) and the ``openstack cdn``
    plugin (:mod:`cdnaas.osc`) both use it, so each path is written here only; ``base_url`` is the API's root (the paths carry
    ``/api/v1``), as the Keystone catalog's ``cdn`` endpoints give it.
    """

    service = "api"

    # catalogue
    def flavors(self):
        return self.get("/api/v1/flavors")["flavors"]

    # regions and hosts (operator)
    def regions(self):
        return self.get("/api/v1/regions")["regions"]

    def region(self, name):
        return self.get(f"/api/v1/regions/{name}")

    def create_region(self, body):
        return self.post("/api/v1/regions", json=body)

    def update_region(self, name, body):
        return self.patch(f"/api/v1/regions/{name}", json=body)

    def hosts(self, region):
        return self.get(f"/api/v1/regions/{region}/hosts")["hosts"]

    def hosts_power(self):
        """Each registered host's power state and load, as the Instance Manager sees them."""
        return self.get("/api/v1/hosts/power")

    def quality(self):
        """Every vCDN's quality against its target (operator)."""
        return self.get("/api/v1/quality")

    def create_host(self, region, body):
        return self.post(f"/api/v1/regions/{region}/hosts", json=body)

    def update_host(self, region, name, body):
        return self.patch(f"/api/v1/regions/{region}/hosts/{name}", json=body)

    # tenants and tokens
    def tenants(self):
        return self.get("/api/v1/tenants")["tenants"]

    def create_tenant(self, name, role="tenant"):
        return self.post("/api/v1/tenants", json={"name": name, "role": role})

    def quotas(self, tenant=None):
        """The caller's quotas (an operator names ``tenant``)."""
        return self.get("/api/v1/quotas", params={"tenant": tenant} if tenant else None)

    def set_quotas(self, tenant, limits):
        return self.put(f"/api/v1/tenants/{tenant}/quotas", json=limits)

    def quota_defaults(self):
        return self.get("/api/v1/quotas/defaults")

    def set_quota_defaults(self, limits):
        return self.put("/api/v1/quotas/defaults", json=limits)

    def users(self, tenant):
        return self.get(f"/api/v1/tenants/{tenant}/users")["users"]

    def create_user(self, tenant, name):
        return self.post(f"/api/v1/tenants/{tenant}/users", json={"name": name})

    def delete_user(self, tenant, name):
        """Delete a user of ``tenant``, revoking its tokens."""
        return self.delete(f"/api/v1/tenants/{tenant}/users/{name}")

    def tokens(self, tenant, user=None):
        return self.get(f"/api/v1/tenants/{tenant}/tokens",
                        params={"user": user} if user else None)["tokens"]

    def create_token(self, tenant, description=None, **options):
        """Issue a token; ``options``: ``user``, ``scope``, ``expires_in`` (seconds) or
        ``expires_at`` (ISO 8601), None ones left out (the API's defaults)."""
        body = {key: value for key, value in dict(options, description=description).items()
                if value is not None}
        return self.post(f"/api/v1/tenants/{tenant}/tokens", json=body)

    def revoke_token(self, tenant, token_id):
        return self.delete(f"/api/v1/tenants/{tenant}/tokens/{token_id}")

    # webhooks
    def webhooks(self):
        return self.get("/api/v1/webhooks")["webhooks"]

    def create_webhook(self, url, events, description=None):
        """Register a webhook; the answer holds its secret, this once."""
        body = {"url": url, "events": list(events)}
        if description:
            body["description"] = description
        return self.post("/api/v1/webhooks", json=body)

    def delete_webhook(self, webhook_id):
        return self.delete(f"/api/v1/webhooks/{webhook_id}")

    def webhook_deliveries(self, webhook_id, limit=None):
        return self.get(f"/api/v1/webhooks/{webhook_id}/deliveries",
                        params={"limit": limit} if limit else None)["deliveries"]

    # vCDNs and operations
    def vcdns(self, state=None, name=None, include_deleted=False):
        """Every vCDN the filters keep (all pages), oldest first."""
        params = {k: v for k, v in (("state", state), ("name", name)) if v}
        if include_deleted:
            params["include_deleted"] = "true"
        return self.every_page("/api/v1/vcdns", "vcdns", params)

    def vcdn(self, vcdn_id):
        return self.get(f"/api/v1/vcdns/{vcdn_id}")

    def usage(self, vcdn_id, since=None, until=None):
        """What the vCDN used per region and in total, and its price, from ``since`` to
        ``until`` (ISO 8601 texts; default its creation and now)."""
        params = {key: value for key, value in (("from", since), ("to", until)) if value}
        return self.get(f"/api/v1/vcdns/{vcdn_id}/usage", params=params or None)

    def metrics(self, vcdn_id, since=None, until=None, scope=None, step=None):
        """The vCDN's time series within ``since``..``until`` (ISO 8601 texts; None: the
        API's defaults)."""
        return self.get(f"/api/v1/vcdns/{vcdn_id}/metrics", params=_given(
            since=since, until=until, scope=scope, step=step))

    def decisions(self, vcdn_id, since=None, kind=None, region=None):
        """The decisions the Instance Manager took about the vCDN, oldest first."""
        return self.get(f"/api/v1/vcdns/{vcdn_id}/decisions", params=_given(
            since=since, kind=kind, region=region))["decisions"]

    def traffic(self, vcdn_id, since=None, until=None, step=None):
        """The vCDN's traffic per region, a point per ``step`` seconds."""
        return self.get(f"/api/v1/vcdns/{vcdn_id}/traffic", params=_given(
            since=since, until=until, step=step))

    def access_log(self, vcdn_id, since=None, until=None, limit=None):
        """The vCDN's logged requests as NDJSON, streamed: an iterator of byte chunks."""
        return self.stream(f"/api/v1/vcdns/{vcdn_id}/access-log",
                           params=_given(**{"from": since, "to": until, "limit": limit}) or None)

    def log_streams(self, vcdn_id):
        """The vCDN's log streams with each VNF's shipper's counts, and the totals."""
        return self.get(f"/api/v1/vcdns/{vcdn_id}/log-streams")

    def quote(self, body):
        return self.post("/api/v1/quotes", json=body)

    def create_vcdn(self, body):
        return self.post("/api/v1/vcdns", json=body)

    def update_vcdn(self, vcdn_id, body, if_match=None):
        """Change a vCDN; ``if_match``: only if its ETag is still this one (else 412)."""
        return self.patch(f"/api/v1/vcdns/{vcdn_id}", json=body,
                          headers={"If-Match": if_match} if if_match else None)

    def delete_vcdn(self, vcdn_id, if_match=None):
        return self.delete(f"/api/v1/vcdns/{vcdn_id}",
                           headers={"If-Match": if_match} if if_match else None)

    # service templates (operator; the API hands them to SIDR)
    def templates(self, flavor=None):
        return self.get("/api/v1/templates", params={"flavor": flavor} if flavor else None)["templates"]

    def register_template_file(self, path):
        """POST the file at ``path`` as it is (YAML or JSON); return the stored template."""
        path = Path(path)
        is_json = path.suffix.lower() == ".json"
        return self.post("/api/v1/templates", data=path.read_bytes(),
                         headers={"Content-Type": "application/json" if is_json
                                  else "application/yaml"})

    def deprecate_template(self, flavor, version, deprecated=True):
        """Deprecate one template version (or offer it again); return the template."""
        return self.patch(f"/api/v1/templates/{flavor}/{version}", json={"deprecated": deprecated})

    def delete_template(self, flavor, version):
        """Delete one template version (409 while a vCDN uses it)."""
        return self.delete(f"/api/v1/templates/{flavor}/{version}")

    def vcdn_operations(self, vcdn_id):
        return self.every_page(f"/api/v1/vcdns/{vcdn_id}/operations", "operations")

    def invalidate(self, vcdn_id, paths, prefixes):
        """Purge ``paths`` and ``prefixes`` from every cache; ``{vcdn, operation}`` (202)."""
        return self.post(f"/api/v1/vcdns/{vcdn_id}/invalidations",
                         json={"paths": paths, "prefixes": prefixes})

    def sign_url(self, vcdn_id, body):
        """A URL of the vCDN signed as ``body`` asks: ``{url, path, query, expires, key_id}``."""
        return self.post(f"/api/v1/vcdns/{vcdn_id}/signed-urls", json=body)

    def prefetch(self, vcdn_id, paths):
        """Have every cache fetch ``paths``; ``{vcdn, operation}`` (202)."""
        return self.post(f"/api/v1/vcdns/{vcdn_id}/prefetches", json={"paths": paths})

    def operation(self, operation_id):
        return self.get(f"/api/v1/operations/{operation_id}")

    # calibrations (operator)
    def start_calibration(self, body):
        """Start a calibration campaign; returns the job (202)."""
        return self.post("/api/v1/calibrations", json=body)

    def calibration(self, job_id):
        return self.get(f"/api/v1/calibrations/{job_id}")


def _given(**params):
    """``params`` without those None (query parameters the API's defaults fill)."""
    return {key: value for key, value in params.items() if value is not None}
