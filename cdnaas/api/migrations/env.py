from alembic import context

from cdnaas.api.models import Base
from cdnaas.db.migrate import run_environment

run_environment(context, Base.metadata)
