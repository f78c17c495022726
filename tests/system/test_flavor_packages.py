"""A flavor added as its own package to a RUNNING stack (local driver): the operator
installs ``examples/cdnaas-small-objects`` with pip while the five services run,
registers its template, and a vCDN of it runs the flavor's own nginx config and serves
as that config says (gzip, browser caching of assets, its header), through the flavor's
origin shield. No service restarts.
The package is uninstalled at the end, so the environment is left as it was found.

Its tests that start no process are in tests/unit/test_flavor_packages_units.py (the unit
tier)."""
import gzip
import http.server
import importlib.metadata
import os
import shutil
import subprocess
import sys
import threading

import pytest

from cdnaas.ro.vim.local import clients
from tests.support.api import populate
from tests.support.flavors import SMALL_OBJECTS
from tests.support.stack import running_stack
from tests.unit.test_flavor_packages_units import TEMPLATE

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local driver needs root")

DISTRIBUTION = "cdnaas-small-objects"
CSS = b"".join(b".c%d{color:#%06x;margin:0 auto;padding:1px}\n" % (i, i) for i in range(600))


class AssetOrigin(http.server.BaseHTTPRequestHandler):
    """A web-assets origin: one style sheet, with a validator and no lifetime of its own."""

    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path.split("?")[0] != "/assets/app.css":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/css")
        self.send_header("Content-Length", str(len(CSS)))
        self.send_header("Last-Modified", "Mon, 01 Jun 2026 10:00:00 GMT")
        self.end_headers()
        self.wfile.write(CSS)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def asset_origin():
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), AssetOrigin)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    extra = {"CDNAAS_VIM_DRIVER": "local", "CDNAAS_ORIGIN_ALLOW": "127.0.0.1"}
    with running_stack(None, tmp_path_factory.mktemp("flavor-package"), extra_env=extra) as running:
        yield populate(running)


def pip(*args):
    """Run this environment's pip (the stack's services run from it too)."""
    result = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


@pytest.fixture
def package_source(tmp_path):
    """A copy of the example package (pip builds in the source tree; ours stays clean)."""
    if DISTRIBUTION in {d.metadata["Name"] for d in importlib.metadata.distributions()}:
        pytest.skip(f"{DISTRIBUTION} is installed here already; this test installs it itself")
    return shutil.copytree(SMALL_OBJECTS, tmp_path / "cdnaas-small-objects",
                           ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))


def test_a_flavor_package_installed_on_a_running_stack_runs_its_own_config(
        stack, asset_origin, package_source):
    operator, acme = stack.operator, stack.acme
    template = TEMPLATE.read_bytes()
    yaml_body = {"data": template, "headers": {"Content-Type": "application/yaml"}}
    refused = operator.call("POST", "/templates", **yaml_body)
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "plugin", \
        refused.text
    try:
        pip("install", "--no-deps", "--no-input", str(package_source))
        stored = operator.ok("POST", "/templates", 201, **yaml_body)
        assert (stored["flavor"], stored["plugin"]) == ("small-objects", "small-objects")
        offered = {f["name"] for f in acme.ok("GET", "/flavors")["flavors"]}
        assert "small-objects" in offered

        body = {"name": "assets", "flavor": "small-objects",
                "origin": f"http://127.0.0.1:{asset_origin}", "lease": {"end": "2099-01-01T00:00:00Z"},
                "regions": [{"name": "eu-west", "demand": 1000,
                             "quality": {"response_time": {"percentile": 95, "max_ms": 100}}}]}
        accepted = acme.ok("POST", "/vcdns", 202, json=body)
        operation = acme.wait(accepted["operation"]["id"], timeout=120)
        assert operation["state"] == "COMPLETED", (operation, stack.log("ro")[-3000:])
        vcdn = acme.ok("GET", f"/vcdns/{accepted['vcdn']['id']}")

        configs = sorted(stack.state_dir.glob(f"local/*/{vcdn['id']}/eu-west-cache-*/nginx.conf"))
        assert configs, "no cache VNF config written"
        text = configs[0].read_text()
        for line in ["# Cache VNF eu-west-cache-0 of the small-objects flavor",
                     "proxy_cache_valid 200 301 302 1m;", "proxy_cache_revalidate on;",
                     "gzip_types text/css text/plain text/javascript application/javascript "
                     "application/json application/xml image/svg+xml;",
                     "keys_zone=eu-west-cache-0:128m", "add_header X-CDN-Flavor small-objects always;",
                     "location = /nginx_status {\n            stub_status;"]:
            assert line in text, line
        assert "proxy_cache_valid 200 206 301 302 10m;" not in text  # the stock config's
        assert "proxy_cache_purge eu-west-cache-0" in text  # the shared purge listener
        # the flavor's origin shield runs the stock cache config; the caches fetch from it
        [shield] = stack.state_dir.glob(f"local/*/{vcdn['id']}/shield-0/nginx.conf")
        assert "add_header X-Shield-Cache-Status" in shield.read_text()
        assert f"server {vcdn['regions'][0]['load_balancer'].rsplit('.', 1)[0]}.4:80;" in text

        entry = vcdn["entry_point"]
        balancer = vcdn["regions"][0]["load_balancer"]
        with clients.client(vcdn["id"], "eu-west", "10.1.0.31") as viewer:
            assert viewer.resolve(entry["dns_servers"][0], entry["hostname"]) == [balancer]
            url = f"http://{entry['hostname']}/assets/app.css?v=3"
            fetched = [viewer.fetch(url, resolve=(entry["hostname"], balancer),
                                    headers=["Accept-Encoding: gzip"]) for _ in range(2)]
            plain = viewer.fetch(url, resolve=(entry["hostname"], balancer))
        for status, headers, payload in fetched:
            assert status == 200 and headers["content-encoding"] == "gzip"
            assert headers["x-cdn-flavor"] == "small-objects"
            assert headers["cache-control"] == "max-age=604800"  # expires 7d, assets only
            assert gzip.decompress(payload) == CSS and len(payload) < len(CSS) / 4
        assert [h["x-cache-status"] for _, h, _ in fetched] == ["MISS", "HIT"]
        # how the cache's copy was filled: through the shield, which had to ask the origin
        assert [h["x-shield-cache-status"] for _, h, _ in fetched] == ["MISS", "MISS"]
        assert plain[0] == 200 and "content-encoding" not in plain[1] and plain[2] == CSS

        in_use = operator.call("DELETE", "/templates/small-objects/1")
        assert in_use.status_code == 409 and vcdn["id"] in in_use.json()["error"]["message"]
        ended = acme.ok("DELETE", f"/vcdns/{vcdn['id']}", 202)
        assert acme.wait(ended["operation"]["id"], timeout=120)["state"] == "COMPLETED"
        operator.ok("DELETE", "/templates/small-objects/1", 204)
    finally:
        pip("uninstall", "-y", DISTRIBUTION)
    assert DISTRIBUTION not in {d.metadata["Name"] for d in importlib.metadata.distributions()}
