"""The CLI's settings file and its clients of the customer API and of SIDR.

Settings, first found wins: command-line option, environment (``CDNAAS_TOKEN``,
``CDNAAS_API_URL``), the YAML file ``~/.config/cdnaas/config.yaml`` (keys
``token`` and ``api_url``; path overridable with ``CDNAAS_CONFIG``), the default
URL of :func:`cdnaas.common.config.service_url`.
"""
import os
import time
from pathlib import Path

import click
import yaml

from cdnaas.common import config, errors
from cdnaas.common.http import JsonClient

TERMINAL_STATES = ("COMPLETED", "FAILED", "ROLLED_BACK")


def config_path() -> Path:
    """Where the CLI keeps its token and API URL."""
    explicit = config.setting("CDNAAS_CONFIG")
    return Path(explicit) if explicit else Path.home() / ".config" / "cdnaas" / "config.yaml"


def load_settings() -> dict:
    """The settings file's content ({} when there is none)."""
    path = config_path()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, yaml.YAMLError) as exc:
        raise errors.BadRequest(f"cannot read {path}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def save_settings(**values) -> Path:
    """Merge ``values`` into the settings file (readable by its owner only); return its path."""
    path = config_path()
    data = load_settings()
    data.update({key: value for key, value in values.items() if value is not None})
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        yaml.safe_dump(data, handle, default_flow_style=False)
    tmp.replace(path)
    return path


def api_url(override=None) -> str:
    """URL of the customer API: option, ``CDNAAS_API_URL``, settings file, default."""
    if override:
        return override.rstrip("/")
    if config.env("CDNAAS_API_URL"):
        return config.service_url("api")
    return (load_settings().get("api_url") or config.service_url("api")).rstrip("/")


def token(override=None):
    """Bearer token: option, ``CDNAAS_TOKEN``, settings file; None when there is none."""
    return override or config.setting("CDNAAS_TOKEN") or load_settings().get("token")


class CustomerApi(JsonClient):
    """Typed client of the customer API (``api-spec/api.yaml``): one method per call.

    The ``cdnaas`` CLI (:class:`ApiClient`) and the ``openstack cdn`` plugin
    (:mod:`cdnaas.osc`) both use it; ``base_url`` is the API's root (the paths carry
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


class ApiClient(CustomerApi):
    """:class:`CustomerApi` for the ``cdnaas`` CLI: a bearer token, and errors that say
    how to start the local stack or where to put a token."""

    def __init__(self, base_url=None, token=None, timeout=30.0):  # pylint: disable=redefined-outer-name
        super().__init__(base_url=base_url, token=token, timeout=timeout)
        self.has_token = bool(token)

    def request(self, method, path, **kwargs):
        try:
            return super().request(method, path, **kwargs)
        except errors.UpstreamError as exc:
            if "unreachable" in exc.message:
                exc.message += " (is the stack running? `cdnaas up` or `cdnaas status`)"
            raise
        except errors.Unauthorized as exc:
            if not self.has_token:
                exc.message = ("no token: set CDNAAS_TOKEN, or save one in "
                               f"{config_path()} (cdnaas admin create-token --save)")
            raise


def error_text(exc: errors.CdnaasError) -> str:
    """An error answer for people: its message, then the field and each problem found."""
    lines = [exc.message]
    if exc.field:
        lines.append(f"  field: {exc.field}")
    details = exc.details or []
    for detail in details:
        where = detail.get("field") if isinstance(detail, dict) else None
        problem = detail.get("problem") if isinstance(detail, dict) else detail
        if len(details) == 1 and problem == exc.message:
            continue  # the message already says it
        lines.append(f"  - {where + ': ' if where else ''}{problem}")
    return "\n".join(lines)


def follow_operation(fetch, operation_id, interval=0.5, timeout=600.0):
    """Poll ``fetch(operation_id)`` (e.g. :meth:`CustomerApi.operation`) until the operation
    ends, yielding each state read; the last one yielded is terminal.

    :raises TimeoutError: it is still running after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        operation = fetch(operation_id)
        yield operation
        if operation.get("state") in TERMINAL_STATES:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"operation {operation_id} is still {operation.get('state')} "
                               f"after {timeout:g}s")
        time.sleep(interval)


def api_client(url=None, token_value=None) -> ApiClient:
    """An :class:`ApiClient` with the settings in force (see the module docstring)."""
    return ApiClient(base_url=api_url(url), token=token(token_value))


def bootstrap(tenant, role="operator", description="bootstrap"):
    """:func:`cdnaas.api.tokens.bootstrap_token` on the API's configured database.

    :raises click.ClickException: the database cannot be reached or is not migrated.
    :raises cdnaas.common.errors.Conflict: the tenant exists with another role.
    """
    from sqlalchemy.exc import SQLAlchemyError  # pylint: disable=import-outside-toplevel

    from cdnaas.api import tokens  # pylint: disable=import-outside-toplevel
    from cdnaas.db import engine  # pylint: disable=import-outside-toplevel

    database = engine.for_service("api")
    try:
        return tokens.bootstrap_token(database, tenant, role=role, description=description)
    except SQLAlchemyError as exc:
        raise click.ClickException(f"cannot issue a token in the API database {database.url}: "
                                   f"{getattr(exc, 'orig', None) or exc} "
                                   "(did `cdnaas db upgrade` run?)") from exc
    finally:
        database.dispose()
