"""``cdnaas admin register-service``: CDNaaS in the Keystone catalog, as service type
``cdn`` (name ``cdnaas``) with public, internal and admin endpoints in one region.

The endpoints are the customer API's **root** URL (``https://cdn.example.net``, not
``.../api/v1``): clients add the versioned path, as Octavia's and Designate's do. Running it
again changes nothing, or moves the endpoints whose URL changed.
"""
from urllib.parse import urlsplit

import click

from cdnaas.cli import client, output

#: the service type of CDNaaS in the Keystone catalog
SERVICE_TYPE = "cdn"
SERVICE_NAME = "cdnaas"
SERVICE_DESCRIPTION = "CDN-as-a-Service: vCDNs on demand"
INTERFACES = ("public", "internal", "admin")


class CatalogError(Exception):
    """The catalog cannot take the registration as asked (e.g. an unknown region)."""


def register(identity, region, urls):
    """Make the ``cdn`` service and its endpoints of ``region`` what ``urls`` says.

    :param identity: an openstacksdk identity proxy (``connection.identity``) with the
        rights to manage services and endpoints (an admin).
    :param region: the Keystone region of the endpoints (it must exist).
    :param urls: ``{interface: url}`` of the interfaces to register.
    :returns: one ``{"kind", "interface", "url", "id", "change"}`` per service and endpoint,
        ``change`` being ``created``, ``updated`` or ``unchanged``; duplicates of an
        endpoint are ``removed``.
    :raises CatalogError: ``region`` is not in Keystone.
    """
    if identity.find_region(region) is None:
        raise CatalogError(f"region {region!r} is not in Keystone (openstack region list); "
                           "create it or give --region")
    service, change = _ensure_service(identity)
    report = [{"kind": "service", "interface": None, "url": None, "id": service.id,
               "change": change}]
    for interface, url in urls.items():
        found = list(identity.endpoints(service_id=service.id, interface=interface,
                                        region_id=region))
        if not found:
            endpoint = identity.create_endpoint(service_id=service.id, interface=interface,
                                                url=url, region_id=region, is_enabled=True)
            change = "created"
        else:
            endpoint = found[0]
            change = "unchanged"
            if endpoint.url != url or not endpoint.is_enabled:
                endpoint = identity.update_endpoint(endpoint, url=url, is_enabled=True)
                change = "updated"
        report.append({"kind": "endpoint", "interface": interface, "url": url,
                       "id": endpoint.id, "change": change})
        for duplicate in found[1:]:
            identity.delete_endpoint(duplicate, ignore_missing=True)
            report.append({"kind": "endpoint", "interface": interface, "url": duplicate.url,
                           "id": duplicate.id, "change": "removed"})
    return report


def _ensure_service(identity):
    """The ``cdn`` service (the one named ``cdnaas`` when there are several), made,
    named, described and enabled as it should be; and what was done."""
    services = [s for s in identity.services() if s.type == SERVICE_TYPE]
    service = next((s for s in services if s.name == SERVICE_NAME), services[0] if services
                   else None)
    if service is None:
        return identity.create_service(type=SERVICE_TYPE, name=SERVICE_NAME,
                                       description=SERVICE_DESCRIPTION,
                                       is_enabled=True), "created"
    wanted = {"name": SERVICE_NAME, "description": SERVICE_DESCRIPTION, "is_enabled": True}
    if any(getattr(service, key) != value for key, value in wanted.items()):
        return identity.update_service(service, **wanted), "updated"
    return service, "unchanged"


def root_url(value, flag):
    """``value`` when it is an http(s) URL of the API's root (no ``/api/v1``), without a
    trailing slash.

    :raises click.BadParameter: anything else.
    """
    parts = urlsplit(value or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise click.BadParameter(f"{value!r} is not an http(s) URL", param_hint=flag)
    if parts.path.rstrip("/").endswith("/api/v1") or parts.query or parts.fragment:
        raise click.BadParameter(f"{value!r}: give the API's root URL (such as "
                                 f"{parts.scheme}://{parts.netloc}); clients add /api/v1",
                                 param_hint=flag)
    return value.rstrip("/")


@click.command("register-service")
@click.option("--os-cloud", "cloud", envvar="OS_CLOUD", metavar="CLOUD",
              help="Cloud of clouds.yaml with Keystone admin rights (default: OS_CLOUD, else "
                   "the OS_* variables).")
@click.option("--region", metavar="REGION", help="Keystone region of the endpoints (default: "
              "the cloud's region_name).")
@click.option("--public-url", metavar="URL", help="The customer API's root URL for clients "
              "(default: --api-url, CDNAAS_API_URL or the settings file's api_url).")
@click.option("--internal-url", metavar="URL", help="Its URL inside the cloud (default: "
              "the public one).")
@click.option("--admin-url", metavar="URL", help="Its URL for operators (default: the "
              "internal one).")
@click.pass_context
def register_service(ctx, cloud, region, public_url, internal_url, admin_url):
    """Register service type `cdn` and its endpoints in Keystone (idempotent).

    A second run changes nothing, or updates the endpoints whose URL moved; then
    `openstack cdn ...` finds the API through the catalog.
    """
    import openstack  # pylint: disable=import-outside-toplevel
    from keystoneauth1 import exceptions as ksa_errors  # pylint: disable=import-outside-toplevel

    public = root_url(public_url or client.api_url(ctx.find_root().obj.get("api_url")),
                      "--public-url")
    internal = root_url(internal_url, "--internal-url") if internal_url else public
    admin = root_url(admin_url, "--admin-url") if admin_url else internal
    try:
        conn = openstack.connect(cloud=cloud) if cloud else openstack.connect()
        region = region or conn.config.get_region_name("identity")
        if not region:
            raise click.UsageError("no region: give --region or the cloud's region_name")
        report = register(conn.identity, region, dict(zip(INTERFACES, (public, internal, admin))))
    except CatalogError as exc:
        raise click.ClickException(str(exc)) from None
    except (openstack.exceptions.SDKException, ksa_errors.ClientException) as exc:
        raise click.ClickException(f"Keystone refused or could not be reached: {exc}") from None
    output.show(report, lambda rows: output.table(rows, [
        ("Kind", "kind"), ("Interface", "interface"), ("URL", "url"), ("Id", "id"),
        ("Change", "change")], title=f"service {SERVICE_TYPE} ({SERVICE_NAME}), region {region}"))
