"""The receiving toolkit's tables: its line of migrations (``store/engine.py``, ``RECEIVING``), migrated alone in the
toolkit user's own database."""
