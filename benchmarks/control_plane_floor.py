"""The floor of ``benchmarks/control_plane.py``: one process, the WSGI server our services
run on, answering the customer API's GET one vCDN, list a tenant's vCDNs and quote
straight from the database, with no hop, no validation, no authentication and no policy.

It shares with SO the work every implementation of these answers does: the row read, the
representation (:func:`cdnaas.so.instances.instance_view`), the free capacity of the
regions' hosts, the flavor plugin's placement and the price. What it leaves out is what
the control plane adds around that work, which is what the benchmark's ratio measures.
The caller names the tenant in ``?tenant=`` (the benchmark knows whose token it holds).

    python benchmarks/control_plane_floor.py DATABASE_URL PORT
"""
import sys
from pathlib import Path

from flask import Flask, request
from sqlalchemy import select

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cdnaas.common import clock, config, errors, plugins  # noqa: E402
from cdnaas.common.flavor import PlanRequest, RegionRequest  # noqa: E402
from cdnaas.common.serve import serve_wsgi  # noqa: E402
from cdnaas.common.timeutil import isoformat  # noqa: E402
from cdnaas.common.validation import parse_origin  # noqa: E402
from cdnaas.db.engine import Database  # noqa: E402
from cdnaas.sidr.models import Template  # noqa: E402
from cdnaas.so import capacity, instances, pricing, states  # noqa: E402
from cdnaas.so.changes import parse_time  # noqa: E402
from cdnaas.so.models import Host, Instance, Region  # noqa: E402


def create_app(database):
    """The floor's three routes over ``database`` (a :class:`Database`)."""
    app = Flask("floor")
    app.json.sort_keys = False
    flavors = {}  # plugin name -> plugin, loaded once

    @app.get("/floor/vcdns/<vcdn_id>")
    def get_vcdn(vcdn_id):
        with database.sessions() as session:
            try:
                found = instances.instance_row(session, vcdn_id)  # SO's read of it
            except errors.NotFound:
                found = None
            if found is None or found.tenant != request.args["tenant"]:
                return {"error": "not found"}, 404
            return instances.instance_view(found)

    @app.get("/floor/vcdns")
    def list_vcdns():
        with database.sessions() as session:
            found = session.scalars(
                select(Instance).where(Instance.tenant == request.args["tenant"],
                                       Instance.state != states.DELETED)
                .order_by(Instance.created_at, Instance.id).limit(instances.LIST_LIMIT + 1)).all()
            page = found[:instances.LIST_LIMIT]
            return {"vcdns": [instances.instance_view(i) for i in page],
                    "next": page[-1].id if len(found) > len(page) else None}

    @app.post("/floor/quotes")
    def quote():
        body = request.get_json()
        tenant = request.args["tenant"]
        now = clock.now()
        window = (now, parse_time(body["lease"]["end"], "lease.end"))
        names = [r["name"] for r in body["regions"]]
        with database.sessions() as session:
            template = session.scalars(select(Template.document)
                                       .where(Template.flavor == body["flavor"])
                                       .order_by(Template.version.desc()).limit(1)).one()
            plugin = flavors.get(template["plugin"])
            if plugin is None:
                plugin = flavors[template["plugin"]] = plugins.load(plugins.FLAVORS,
                                                                    template["plugin"])
            rows = {r.name: r for r in session.scalars(select(Region)
                                                       .where(Region.name.in_(names)))}
            hosts = session.scalars(select(Host).where(Host.region_name.in_(names))).all()
            free = capacity.free_capacity(session, hosts, *window)
            default = next((n for n in names if rows[n].is_default), names[0])
        described = plugin.quote(PlanRequest(
            vcdn_id="quote", hostname=f"quote.{tenant}.{config.dns_domain()}",
            origin=parse_origin(body["origin"]), default_region=default,
            template=template, service={},
            regions=[RegionRequest(name=r["name"], demand=r["demand"], quality=r["quality"],
                                   zone=rows[r["name"]].zone,
                                   vim_region=rows[r["name"]].vim_region,
                                   client_prefixes=rows[r["name"]].client_prefixes,
                                   hosts=free.get(r["name"], []))
                     for r in body["regions"]]))
        hours = (window[1] - window[0]).total_seconds() / 3600
        energy_kwh = described["power_watts"] * hours / 1000
        return {**described, "lease": {"start": isoformat(window[0]),
                                       "end": isoformat(window[1]), "hours": round(hours, 3)},
                "energy_kwh": round(energy_kwh, 3),
                "price": pricing.price(template["flavor"], described["vcpus"] * hours,
                                       energy_kwh)}

    app.add_url_rule("/healthz", "healthz", lambda: {"status": "ok"})
    return app


if __name__ == "__main__":
    serve_wsgi(create_app(Database(sys.argv[1])), "127.0.0.1", int(sys.argv[2]), "floor")
