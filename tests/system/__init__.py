"""The system tier's test modules (see conftest.py)."""
