"""The ``service`` tier: real service processes and stacks on the noop driver, HTTP on
loopback, each database backend (SQLite and a real PostgreSQL), the fuzzing of the API."""
from tests.support.tiers import marking

pytest_collection_modifyitems = marking(__file__, "service")
