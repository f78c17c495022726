"""Regions, hosts and flavors: the operator's offer as the SO knows it."""
import datetime as dt
import logging

from sqlalchemy import select, update

from cdnaas.common import clock, errors, plugins
from cdnaas.common.clients import SidrClient
from cdnaas.common.validation import parse_prefixes
from cdnaas.so import capacity, states
from cdnaas.so.models import Host, Instance, Region

LOG = logging.getLogger(__name__)

FOREVER = dt.datetime(9999, 1, 1, tzinfo=dt.timezone.utc)
HOST_DEFAULTS = {"idle_watts": 115.0, "peak_watts": 269.0, "enabled": True}


def region_view(session, region):
    hosts = session.scalars(select(Host).where(Host.region_name == region.name)).all()
    return {"name": region.name, "description": region.description, "default": region.is_default,
            "client_prefixes": region.client_prefixes, "vim_region": region.vim_region,
            "zone": region.zone, "hosts": len(hosts), "vcpus": sum(h.vcpus for h in hosts)}


def host_view(host, reserved_vcpus=0):
    return {"name": host.name, "region": host.region_name, "vcpus": host.vcpus,
            "ram_mb": host.ram_mb, "idle_watts": host.idle_watts, "peak_watts": host.peak_watts,
            "enabled": host.enabled, "reserved_vcpus": reserved_vcpus}


def get_region(session, name):
    region = session.get(Region, name)
    if region is None:
        raise errors.NotFound(f"no region {name}; GET /regions lists them", field="region")
    return region


def create_region(session, body):
    if session.get(Region, body["name"]) is not None:
        raise errors.Conflict(f"region {body['name']} exists; PATCH it or pick another name",
                              field="name")
    region = Region(name=body["name"], description=body.get("description", ""),
                    client_prefixes=parse_prefixes(body["client_prefixes"]),
                    vim_region=body.get("vim_region"), zone=body.get("zone"), is_default=False)
    session.add(region)
    session.flush()
    _set_default(session, region, body.get("default", False))
    return region_view(session, region)


def update_region(session, name, body):
    region = get_region(session, name)
    if "client_prefixes" in body:
        region.client_prefixes = parse_prefixes(body["client_prefixes"])
    for field in ("description", "vim_region", "zone"):
        if field in body:
            setattr(region, field, body[field])
    if "default" in body:
        _set_default(session, region, body["default"])
    return region_view(session, region)


def _set_default(session, region, is_default):
    if is_default:
        session.execute(update(Region).where(Region.name != region.name).values(is_default=False))
    region.is_default = bool(is_default)


def list_regions(session):
    return [region_view(session, r) for r in session.scalars(select(Region).order_by(Region.name))]


def create_host(session, region_name, body):
    get_region(session, region_name)
    if session.get(Host, body["name"]) is not None:
        raise errors.Conflict(f"host {body['name']} exists; host names are unique across regions",
                              field="name")
    host = Host(region_name=region_name, **{**HOST_DEFAULTS, **body})
    _check_watts(host)
    session.add(host)
    return host_view(host)


def update_host(session, region_name, name, body):
    host = session.get(Host, name)
    if host is None or host.region_name != region_name:
        raise errors.NotFound(f"no host {name} in region {region_name}", field="host")
    held = capacity.reserved(session, [name], clock.now(), FOREVER)
    cpu, ram = held.get(name, (0, 0))
    if body.get("vcpus", host.vcpus) < cpu or body.get("ram_mb", host.ram_mb) < ram:
        raise errors.Conflict(f"host {name} has {cpu} vCPUs and {ram} MB reserved now or later; "
                              "capacity cannot drop below that", field="vcpus")
    for field, value in body.items():
        setattr(host, field, value)
    _check_watts(host)
    return host_view(host, cpu)


def _check_watts(host):
    if host.peak_watts < host.idle_watts:
        raise errors.BadRequest(f"peak_watts ({host.peak_watts}) is below idle_watts "
                                f"({host.idle_watts}); peak is the power at full load",
                                field="peak_watts")


def list_hosts(session, region_name):
    get_region(session, region_name)
    hosts = session.scalars(select(Host).where(Host.region_name == region_name)
                            .order_by(Host.name)).all()
    now = clock.now()
    held = capacity.reserved(session, [h.name for h in hosts], now, now + dt.timedelta(seconds=1))
    return [host_view(h, held.get(h.name, (0, 0))[0]) for h in hosts]


def template_users(session, flavor, version):
    """vCDNs made of ``flavor``'s template ``version`` that are not DELETED (SIDR asks
    before it deletes that version): ``[{"id", "tenant", "state"}]``, oldest first."""
    query = (select(Instance).where(Instance.flavor == flavor,
                                    Instance.template_version == version,
                                    Instance.state != states.DELETED)
             .order_by(Instance.created_at))
    return [{"id": i.id, "tenant": i.tenant, "state": i.state} for i in session.scalars(query)]


def flavors():
    """Flavors offered: the latest version not deprecated of each flavor whose plugin is
    installed."""
    installed = set(plugins.names(plugins.FLAVORS))
    latest = {}
    for template in SidrClient().list_templates():
        document = template.document
        if template.deprecated:
            continue
        if document["plugin"] not in installed:
            LOG.warning("flavor %s names plugin %s, which is not installed; not offered",
                        template.flavor, document["plugin"])
            continue
        if template.version >= getattr(latest.get(template.flavor), "version", 0):
            latest[template.flavor] = template
    return [{"name": t.flavor, "version": t.version, "description": t.description,
             "technology": t.document["technology"],
             "quality_targets": t.document.get("quality_targets", ["min_mos", "response_time"])}
            for t in sorted(latest.values(), key=lambda t: t.flavor)]
