"""Alembic's environment and the three lines of migration scripts (``store/engine.py`` runs them): ``versions``
(the endpoint store), ``idempotency`` (the ingest API's keys) and ``receiving`` (the receiving toolkit's tables)."""
