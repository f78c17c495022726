"""docker-compose.yml, images/Dockerfile and scripts/compose-images agree with the code (no
Docker engine needed; tests/system/test_compose_run.py runs them)."""
import importlib
import importlib.metadata
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from cdnaas.common.config import DEFAULT_PORTS, SERVICES

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "images" / "Dockerfile"
POSTGRES_DOCKERFILE = REPO / "images" / "postgres" / "Dockerfile"
IMAGES_SCRIPT = REPO / "scripts" / "compose-images"


@pytest.fixture(scope="module")
def compose():
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def console_scripts():
    """Console scripts the installed cdnaas distribution declares: {name: "module:function"}."""
    return {ep.name: ep.value for ep in importlib.metadata.entry_points(group="console_scripts")
            if ep.dist is not None and ep.dist.name == "cdnaas"}


def _argv(command):
    return shlex.split(command) if isinstance(command, str) else list(command)


def _environment(service):
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: str(value) for key, value in env.items()}


def _container_ports(service):
    """Container ports a service publishes or exposes."""
    ports = []
    for spec in service.get("ports") or []:
        if isinstance(spec, dict):
            ports.append(int(spec["target"]))
        else:
            ports.append(int(str(spec).rsplit(":", 1)[-1].split("/")[0]))
    return ports + [int(str(port).split("/")[0]) for port in service.get("expose") or []]


def _host_ports(spec):
    """Host ports of a short ``ports`` entry (``[IP:]HOST[-HOST]:CONTAINER``; HOST may be
    ``${VARIABLE:-default}``, read as its default)."""
    spec = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(spec))
    host = spec.rsplit(":", 1)[0].rsplit(":", 1)[-1]
    first, _, last = host.partition("-")
    return list(range(int(first), int(last or first) + 1))


REPLICAS = 2  # copies of every service (docs/replicas.md)


def test_every_cdnaas_service_is_in_the_compose_file(compose):
    assert set(SERVICES) | {"postgres", "migrate"} == set(compose["services"])


def test_every_command_is_a_console_script_of_the_package(compose, console_scripts):
    assert {f"cdnaas-{svc}" for svc in SERVICES} | {"cdnaas"} <= set(console_scripts)
    for name, service in compose["services"].items():
        if name == "postgres":
            continue
        program = _argv(service["command"])[0]
        assert program in console_scripts, f"{name} runs {program}, not a console script of cdnaas"
        module, function = console_scripts[program].split(":")
        target = importlib.import_module(module)
        assert callable(getattr(target, function)), f"{console_scripts[program]} does not exist"
    for svc in SERVICES:
        assert _argv(compose["services"][svc]["command"]) == [f"cdnaas-{svc}"]


def test_migrate_runs_the_upgrade_once_postgres_is_healthy(compose):
    migrate = compose["services"]["migrate"]
    assert _argv(migrate["command"]) == ["cdnaas", "db", "upgrade"]
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert migrate.get("restart", "no") == "no"
    assert _environment(migrate)["CDNAAS_DATABASE_URL"].startswith("postgresql+psycopg://")


def test_services_wait_for_the_migration(compose):
    for svc in SERVICES:
        depends = compose["services"][svc]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", svc


def _built_by_the_script():
    """{image: Dockerfile} of the ``build IMAGE DOCKERFILE CONTEXT`` lines of compose-images."""
    lines = re.findall(r"^build (\S+) (\S+) \S+$", IMAGES_SCRIPT.read_text(), re.MULTILINE)
    return {image: (REPO / dockerfile).resolve() for image, dockerfile in lines}


def test_postgres_is_debians_15_with_a_healthcheck(compose):
    postgres = compose["services"]["postgres"]
    assert _built_by_the_script()[postgres["image"]] == POSTGRES_DOCKERFILE
    assert "postgresql-15" in POSTGRES_DOCKERFILE.read_text(encoding="utf-8")
    assert "pg_isready" in " ".join(_argv(postgres["healthcheck"]["test"]))
    assert set(_environment(postgres)) == {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"}


def test_one_image_built_from_images_dockerfile(compose):
    """Nothing is pulled or built by compose: every image is one scripts/compose-images builds."""
    images = {compose["services"][name]["image"] for name in (*SERVICES, "migrate")}
    assert len(images) == 1
    assert _built_by_the_script()[images.pop()] == DOCKERFILE
    for name, service in compose["services"].items():
        assert "build" not in service, name
        assert service["image"] in _built_by_the_script(), name


@pytest.mark.parametrize("svc", SERVICES)
def test_each_service_listens_on_its_default_port(compose, svc):
    service = compose["services"][svc]
    port = DEFAULT_PORTS[svc]
    assert _container_ports(service) == [port]
    env = _environment(service)
    assert env[f"CDNAAS_{svc.upper()}_BIND"] == f"0.0.0.0:{port}"
    assert f"127.0.0.1:{port}/healthz" in " ".join(_argv(service["healthcheck"]["test"]))


@pytest.mark.parametrize("name", (*SERVICES, "migrate"))
def test_every_peer_url_names_a_compose_service_on_its_port(compose, name):
    env = _environment(compose["services"][name])
    urls = {key: value for key, value in env.items()
            if re.fullmatch(r"CDNAAS_[A-Z]+_URL", key) and key != "CDNAAS_DATABASE_URL"}
    assert set(urls) == {f"CDNAAS_{svc.upper()}_URL" for svc in SERVICES}
    for key, url in urls.items():
        peer = key.removeprefix("CDNAAS_").removesuffix("_URL").lower()
        parts = urlsplit(url)
        assert parts.hostname == peer and peer in compose["services"], f"{key}={url}"
        assert parts.port == DEFAULT_PORTS[peer], f"{key}={url}"
    assert env["CDNAAS_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert "@postgres:5432/" in env["CDNAAS_DATABASE_URL"]


def test_only_the_api_is_published(compose):
    for svc in SERVICES:
        if svc != "api":
            assert not compose["services"][svc].get("ports"), f"{svc} is published"


@pytest.mark.parametrize("svc", SERVICES)
def test_every_service_runs_as_replicas(compose, svc):
    """Two copies of each service, found by the one service name (compose's DNS answers
    with every replica), each named by its own container's host name."""
    service = compose["services"][svc]
    assert service["deploy"]["replicas"] == REPLICAS
    assert "container_name" not in service and "hostname" not in service, \
        "replicas need distinct containers and host names"
    assert "CDNAAS_REPLICA_NAME" not in _environment(service), "each replica's own name"
    assert service["restart"] == "unless-stopped", "a replica that dies comes back"
    for spec in service.get("ports") or []:  # one host port per replica
        assert len(_host_ports(spec)) == REPLICAS, spec


def test_one_migration_and_one_database(compose):
    for name in ("migrate", "postgres"):
        assert compose["services"][name].get("deploy", {}).get("replicas", 1) == 1


def _instructions(text):
    """Dockerfile instructions as (KEYWORD, arguments), continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    result = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, args = line.partition(" ")
            result.append((keyword.upper(), args.strip()))
    return result


def test_the_dockerfile_installs_the_package_and_runs_a_service(console_scripts):
    assert DOCKERFILE.exists()
    steps = _instructions(DOCKERFILE.read_text(encoding="utf-8"))
    assert steps[:2] == [("ARG", "BASE=cdnaas-base:bookworm"), ("FROM", "${BASE}")]
    assert "BASE=cdnaas-base:$CODENAME" in IMAGES_SCRIPT.read_text(), "the base the script makes"
    copied = " ".join(args for keyword, args in steps if keyword == "COPY")
    for needed in ("setup.py", "cdnaas", "plugins", "api-spec", "templates"):
        assert needed in copied, f"the image lacks {needed}"
    assert any(keyword == "RUN" and "pip install" in args for keyword, args in steps)
    cmd = [args for keyword, args in steps if keyword in ("CMD", "ENTRYPOINT")]
    assert cmd, "no CMD or ENTRYPOINT"
    program = yaml.safe_load(cmd[-1])[0]  # exec form: a JSON list
    assert program in console_scripts
    assert any(keyword == "USER" and args not in ("root", "0") for keyword, args in steps)
