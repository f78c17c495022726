"""The five services as real processes on free ports, for end-to-end tests.

    with running_stack(database_url, tmp_path) as stack:
        requests.get(stack.urls["api"] + "/api/v1/flavors",
                     headers={"Authorization": f"Bearer {stack.operator_token}"})
"""
import contextlib
import dataclasses
from pathlib import Path

from cdnaas.cli.stack import Stack, database_url_of, free_port_env


@dataclasses.dataclass
class RunningStack:
    """What a test needs of a started stack."""

    env: dict            # the full environment of the services (use it for CLI subprocesses)
    urls: dict           # {service: base URL}
    state_dir: Path      # logs/<service>.log, the pid file, the embedded SQLite files
    operator_token: str  # a token of tenant "admin" with the operator role
    stack: Stack

    def log(self, service):
        """The log of ``service`` so far (handy in assertion messages)."""
        return self.stack.log_path(service).read_text(errors="replace")


@contextlib.contextmanager
def running_stack(database_url, tmp_path, extra_env=None, services=None, timeout=60):
    """Start a stack on ``database_url``; yield a :class:`RunningStack`; stop it.

    :param database_url: ``CDNAAS_DATABASE_URL`` shared by all services, or None for
        the embedded default (one SQLite file per service in the state dir).
    :param tmp_path: the test's temporary directory; the state dir goes under it.
    :param extra_env: more variables (they win over the defaults here:
        ``CDNAAS_VIM_DRIVER=noop``, ``CDNAAS_IM_INTERVAL=0.5``); None unsets one.
    :param services: run only these services (all five by default).
    """
    state_dir = Path(tmp_path) / "state"
    state_dir.mkdir(parents=True, exist_ok=True)
    env = free_port_env(state_dir)
    env.update({
        "CDNAAS_DATABASE_URL": database_url,  # None: embedded default
        "CDNAAS_VIM_DRIVER": "noop",
        "CDNAAS_IM_INTERVAL": "0.5",
        "CDNAAS_CONFIG": str(state_dir / "cli-config.yaml"),  # never the user's settings
        "CDNAAS_TOKEN": None,
        "CDNAAS_LOG_LEVEL": "INFO",
    })
    env.update(extra_env or {})
    kwargs = {"services": tuple(services)} if services else {}
    stack = Stack(env=env, state_dir=state_dir, **kwargs)
    stack.start(timeout=timeout)
    try:
        yield RunningStack(env=stack.env, urls=stack.urls, state_dir=state_dir,
                           operator_token=_operator_token(stack.env) if "api" in stack.services
                           else None, stack=stack)
    finally:
        stack.stop()


def _operator_token(env):
    from cdnaas.api.auth import bootstrap_token  # pylint: disable=import-outside-toplevel
    from cdnaas.db.engine import Database  # pylint: disable=import-outside-toplevel

    database = Database(database_url_of(env, "api"))
    try:
        return bootstrap_token(database, "admin")
    finally:
        database.dispose()
