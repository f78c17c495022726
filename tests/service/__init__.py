"""The service tier's test modules (see conftest.py)."""
