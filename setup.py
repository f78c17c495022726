"""CDNaaS: CDN-as-a-Service orchestrator for a telco cloud."""
from setuptools import find_packages, setup

SERVICES = ("api", "sidr", "so", "ro", "im")

setup(
    name="cdnaas",
    version="0.1.0",
    description="CDN-as-a-Service orchestrator: vCDNs on demand over OpenStack or one Linux machine",
    python_requires=">=3.11",
    packages=find_packages(include=["cdnaas", "cdnaas.*"])
    + ["cdnaas_plugins", "cdnaas_plugins.static", "cdnaas_plugins.qoe_video"],
    package_dir={"cdnaas_plugins": "plugins"},
    package_data={"cdnaas.so": ["prices.yaml"], "cdnaas.portal": ["static/*"],
                  "cdnaas_plugins.static": ["template.yaml"],
                  "cdnaas_plugins.qoe_video": ["template.yaml", "models/*.yaml"]},
    include_package_data=True,
    install_requires=[
        "Flask>=3.0",
        "Werkzeug>=3.0",  # the sample origin parses Range headers with it
        "waitress>=3.0",
        "SQLAlchemy>=2.0",
        "alembic>=1.13",
        "Jinja2>=3.1",
        "PyYAML>=6.0",
        "jsonschema>=4.20",
        "openapi-core>=0.19",
        "psycopg[binary]>=3.1",
        "requests>=2.31",
        "orjson>=3.9",  # service bodies (cdnaas.common.bodies, cdnaas.common.http)
        "click>=8.1",
        "rich>=13.0",
        "prometheus-client>=0.20",
        "dnspython>=2.6",
        "scipy>=1.11",
        "openstacksdk>=4.0",
        "cryptography>=42",
        # ACME (RFC 8555) client of certbot, for managed certificates (cdnaas.so.acme)
        "acme>=2.0",
        "josepy>=1.13",
        # OpenStack identity of the customer API (cdnaas.api.keystone, cdnaas.api.policy)
        "keystonemiddleware>=10.0",
        "oslo.policy>=4.4",
    ],
    extras_require={
        # pytest 9.2 keeps node ids where pytest-xdist 3.8 cannot suffix them, so
        # --dist loadgroup stops grouping (the mini cloud's tests would run at once
        # on two workers); tests/openstack/fixtures.py fails loudly if that recurs.
        # playwright drives Debian's chromium package (scripts/setup), never a browser of
        # its own: 1.49+ speaks the CDP of Chromium 131 and later (tested with 156).
        "test": ["pytest>=8,<9.2", "pytest-xdist>=3.5", "hypothesis>=6,<7", "schemathesis>=4.30,<5",
                 "playwright>=1.49,<2", "brotli>=1.1,<2",
                 # the layers of .importlinter, checked by tests/test_layers.py
                 "import-linter>=2.1,<3"],
        # the `openstack cdn ...` commands (cdnaas.osc): an OpenStackClient plugin on osc-lib
        "openstack": ["python-openstackclient>=7", "osc-lib>=3"],
        # the documentation site (docs/, Markdown pages; its API reference from api-spec/)
        "docs": ["sphinx>=8,<10", "myst-parser>=4,<6", "sphinxcontrib-openapi>=0.8,<1"],
    },
    entry_points={
        "console_scripts": ["cdnaas = cdnaas.cli.main:cli"]
        + [f"cdnaas-{svc} = cdnaas.common.serve:main_{svc}" for svc in SERVICES],
        "openstack.cli.extension": ["cdn = cdnaas.osc.plugin"],
        "openstack.cdn.v1": [
            "cdn_vcdn_create = cdnaas.osc.v1.vcdn:CreateVcdn",
            "cdn_vcdn_list = cdnaas.osc.v1.vcdn:ListVcdn",
            "cdn_vcdn_show = cdnaas.osc.v1.vcdn:ShowVcdn",
            "cdn_vcdn_set = cdnaas.osc.v1.vcdn:SetVcdn",
            "cdn_vcdn_delete = cdnaas.osc.v1.vcdn:DeleteVcdn",
            "cdn_vcdn_purge = cdnaas.osc.v1.vcdn:PurgeVcdn",
            "cdn_vcdn_usage = cdnaas.osc.v1.vcdn:UsageVcdn",
            "cdn_flavor_list = cdnaas.osc.v1.catalogue:ListFlavor",
            "cdn_region_list = cdnaas.osc.v1.catalogue:ListRegion",
        ],
        # oslopolicy-sample-generator --namespace cdnaas (docs/policy.yaml.sample)
        "oslo.policy.policies": ["cdnaas = cdnaas.api.policy:list_rules"],
        "cdnaas.flavors": [
            "static = cdnaas_plugins.static.plugin:StaticFlavor",
            "qoe-video = cdnaas_plugins.qoe_video.plugin:QoeVideoFlavor",
        ],
        "cdnaas.vim_drivers": [
            "noop = cdnaas.ro.vim.noop:NoopDriver",
            "local = cdnaas.ro.vim.local.driver:LocalDriver",
            "openstack = cdnaas.ro.vim.openstack.driver:OpenStackDriver",
        ],
        "cdnaas.power_drivers": [
            "log = cdnaas.ro.power.log:LogPowerDriver",
            "noop = cdnaas.ro.power.log:NoopPowerDriver",
            "openstack = cdnaas.ro.power.openstack:OpenStackPowerDriver",
            "local = cdnaas.ro.power.local:LocalPowerDriver",
        ],
        "cdnaas.zone_publishers": [
            "noop = cdnaas.ro.zones.noop:NoopZonePublisher",
            "local = cdnaas.ro.zones.local:LocalZonePublisher",
            "designate = cdnaas.ro.zones.designate:DesignateZonePublisher",
        ],
    },
)
