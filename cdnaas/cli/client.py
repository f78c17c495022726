"""The CLI's settings file and its client of the customer API.

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
from cdnaas.common.clients import CustomerApi

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
