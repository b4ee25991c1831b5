"""An optional memory of Idempotency-Keys for the ingest API, chosen by URL (``[api] idempotency_store``)."""

from __future__ import annotations

from urllib.parse import urlsplit

from warren.core.errors import WarrenError
from warren.store.idempotency import SqlIdempotencyStore
from warren.store.idempotency_keys import Claim, Decision, IdempotencyStore, decide, fingerprint

__all__ = ["Claim", "Decision", "IdempotencyStore", "decide", "fingerprint", "open_idempotency_store"]


def open_idempotency_store(url: str) -> IdempotencyStore:
    """The store a URL names (not yet opened): ``sqlite:///PATH`` or ``postgresql://...``."""
    scheme = urlsplit(url).scheme
    if scheme not in ("sqlite", "postgresql", "postgres"):
        raise WarrenError(f"unknown idempotency store scheme {scheme!r}: use sqlite:///PATH or postgresql://...")
    return SqlIdempotencyStore(url)
