from alembic import context

from cdnaas.db.migrate import run_environment
from cdnaas.im.models import Base

run_environment(context, Base.metadata)
