"""Alembic migrations, one environment per service.

Each service keeps its migration scripts in ``cdnaas/<service>/migrations`` and
its own version table (``alembic_version_<service>``), so services that share
one PostgreSQL database never touch each other's history.
"""
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import pool

from cdnaas.common import config

PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def alembic_config(service, url=None):
    """Alembic configuration of ``service`` against ``url`` (its configured URL by default)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(PACKAGE_ROOT / service / "migrations"))
    cfg.set_main_option("version_table", f"alembic_version_{service}")
    cfg.attributes["url"] = url or config.database_url(service)
    return cfg


def upgrade(service, url=None, revision="head"):
    """Bring ``service``'s tables to ``revision``."""
    command.upgrade(alembic_config(service, url), revision)


def upgrade_all(url=None):
    """Migrate every service that has tables."""
    for service in config.SERVICES:
        if (PACKAGE_ROOT / service / "migrations").is_dir():
            upgrade(service, url)


def run_environment(context, metadata):
    """Body of each service's ``env.py``: run migrations online."""
    from sqlalchemy import create_engine

    cfg = context.config
    engine = create_engine(cfg.attributes["url"], poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=metadata,
                          version_table=cfg.get_main_option("version_table"),
                          render_as_batch=connection.dialect.name == "sqlite")
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()
