"""Alembic environment of the Resource Orchestrator's tables."""
from alembic import context

from cdnaas.db.migrate import run_environment
from cdnaas.ro.models import Base

run_environment(context, Base.metadata)
