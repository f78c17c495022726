"""The ``unit`` tier: tests that start no process, no database server (SQLite files at
most), open no network socket and need no root; the developer's loop, under a minute
(``pytest tests/unit`` or ``pytest -m unit``)."""
from tests.support.tiers import marking

pytest_collection_modifyitems = marking(__file__, "unit")
