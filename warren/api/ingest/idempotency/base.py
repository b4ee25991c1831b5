"""The ingest API's idempotency store: the records and the pure decision live in the store home
(``warren/store/idempotency_keys.py``), beside the SQL that keeps them; their names stay importable here."""

from __future__ import annotations

from warren.store.idempotency_keys import TABLE, Claim, Decision, IdempotencyStore, Row, decide, fingerprint

__all__ = ["TABLE", "Claim", "Decision", "IdempotencyStore", "Row", "decide", "fingerprint"]
