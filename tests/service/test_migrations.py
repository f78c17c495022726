"""Each service's Alembic migrations build exactly the tables its models declare, on
SQLite and PostgreSQL."""
import importlib

import pytest
import sqlalchemy
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from cdnaas.db import migrate

SERVICES = ("api", "so", "sidr", "ro", "im")


@pytest.mark.parametrize("service", SERVICES)
def test_migrations_match_the_models(service, database_url):
    migrate.upgrade(service, database_url)
    base = importlib.import_module(f"cdnaas.{service}.models").Base
    engine = sqlalchemy.create_engine(database_url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"version_table": f"alembic_version_{service}"})
            assert compare_metadata(context, base.metadata) == []
    finally:
        engine.dispose()

