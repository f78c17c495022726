"""The web portal is served by the customer API without a token; its API calls need one."""
from cdnaas.api.app import create_app
from cdnaas.db import migrate
from cdnaas.db.engine import Database


def client(tmp_path):
    url = f"sqlite:///{tmp_path / 'api.db'}"
    migrate.upgrade("api", url)
    return create_app(Database(url)).test_client()


def test_the_page_and_its_assets_are_public(tmp_path):
    web = client(tmp_path)
    page = web.get("/portal/")
    assert page.status_code == 200 and b"Lease a vCDN" in page.data
    script = web.get("/portal/app.js")
    assert script.status_code == 200 and b"/quotes" in script.data
    assert web.get("/").headers["Location"].endswith("/portal/")


def test_nothing_but_the_portals_files_is_served(tmp_path):
    web = client(tmp_path)
    assert web.get("/portal/..%2Fapp.py").status_code in (400, 404)
    assert web.get("/portal/secrets.txt").status_code in (400, 404)
    assert web.get("/api/v1/vcdns").status_code == 401  # the data still needs a token
