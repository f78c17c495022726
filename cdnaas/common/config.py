"""Settings, read from the environment at call time (never frozen at import); each is
declared once, with its default and meaning, in :mod:`cdnaas.common.settings`.

Every service finds its peers through ``CDNAAS_<SERVICE>_URL`` and binds to the
host and port of its own URL, so one set of variables describes a deployment
(the CLI, ``docker-compose.yml`` and the tests all use the same names).
"""
import os
from pathlib import Path
from urllib.parse import urlsplit

from cdnaas.common import settings

SERVICES = ("api", "so", "sidr", "ro", "im")
#: services reached only by peers, with a service token (:mod:`cdnaas.common.service_auth`)
INTERNAL_SERVICES = ("so", "sidr", "ro", "im")

DEFAULT_PORTS = {"api": 8700, "so": 8701, "sidr": 8702, "ro": 8703, "im": 8704}

REPO_ROOT = Path(__file__).resolve().parents[2]


def env(name, default=None):
    """The environment variable ``name``, or ``default`` when unset or empty: for the
    families of settings (``CDNAAS_<SVC>_URL``) and outside names (``OS_CLOUD``); every
    other setting is declared in :mod:`cdnaas.common.settings` and read by :func:`setting`."""
    value = os.environ.get(name)
    return default if value in (None, "") else value


def setting(name):
    """The declared setting ``name`` (:mod:`cdnaas.common.settings`), read now."""
    return settings.get(name)


def state_path() -> Path:
    """Where the state dir is (:func:`state_dir`), without creating it."""
    return Path(setting("CDNAAS_STATE_DIR") or Path.home() / ".local/state/cdnaas")


def state_dir() -> Path:
    """Directory for the embedded default's database files, pid files and logs (created)."""
    path = state_path()
    path.mkdir(parents=True, exist_ok=True)
    return path


def service_url(service: str) -> str:
    """Base URL of ``service`` (one of :data:`SERVICES`), without trailing slash."""
    default = f"http://127.0.0.1:{DEFAULT_PORTS[service]}"
    return env(f"CDNAAS_{service.upper()}_URL", default).rstrip("/")


def bind_address(service: str) -> tuple[str, int]:
    """Host and port ``service`` listens on: ``CDNAAS_<SERVICE>_BIND`` or its URL's."""
    explicit = env(f"CDNAAS_{service.upper()}_BIND")
    parts = urlsplit(f"http://{explicit}" if explicit else service_url(service))
    return parts.hostname, parts.port or DEFAULT_PORTS[service]


def database_url(service: str) -> str:
    """SQLAlchemy URL of ``service``'s tables.

    ``CDNAAS_DATABASE_URL`` (e.g. PostgreSQL) is shared by all services, each
    owning its own tables; the embedded default gives every service its own
    SQLite file, so no two processes contend for one SQLite lock.
    """
    shared = setting("CDNAAS_DATABASE_URL")
    if shared:
        return shared
    return f"sqlite:///{state_dir() / f'{service}.db'}"


def vim_driver_name() -> str:
    """Entry-point name of the Resource Orchestrator's VIM driver."""
    return setting("CDNAAS_VIM_DRIVER")


def dns_domain() -> str:
    """Operator domain under which vCDN hostnames are created."""
    return setting("CDNAAS_DNS_DOMAIN")


def local_pool() -> str:
    """CIDR the local driver takes its VNF bridges' subnets from (``CDNAAS_LOCAL_POOL``)."""
    return setting("CDNAAS_LOCAL_POOL")


def origin_deny() -> list[str]:
    """Origins refused (``CDNAAS_ORIGIN_DENY``): CIDRs, addresses, host names, keywords."""
    return setting("CDNAAS_ORIGIN_DENY")


def origin_allow() -> list[str]:
    """Origins allowed before the deny list is read (``CDNAAS_ORIGIN_ALLOW``): CIDRs,
    addresses or host names, each optionally with ``:port``."""
    return setting("CDNAAS_ORIGIN_ALLOW")


def model_dirs() -> list[Path]:
    """Folders of the operator's own model files (``CDNAAS_MODEL_DIRS``, comma-separated),
    searched after a flavor plugin's own folder."""
    return [Path(item) for item in setting("CDNAAS_MODEL_DIRS")]


def api_spec_path(service: str) -> Path:
    """OpenAPI document of ``service`` under ``api-spec/``."""
    return REPO_ROOT / "api-spec" / f"{service}.yaml"
