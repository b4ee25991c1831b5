"""The ingest API's Idempotency-Keys: its line of migrations (``store/engine.py``, ``INGEST_KEYS``)."""
