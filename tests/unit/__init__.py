"""The unit tier's test modules (see conftest.py)."""
