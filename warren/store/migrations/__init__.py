"""Alembic's environment and migration scripts for the endpoint store (run by ``store/engine.py``)."""
