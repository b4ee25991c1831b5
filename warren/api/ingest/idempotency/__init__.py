"""An optional memory of Idempotency-Keys for the ingest API, chosen by URL (``[api] idempotency_store``)."""

from __future__ import annotations

from urllib.parse import urlsplit

from warren.api.ingest.idempotency.base import Claim, Decision, IdempotencyStore, decide, fingerprint
from warren.core.errors import WarrenError

__all__ = ["Claim", "Decision", "IdempotencyStore", "decide", "fingerprint", "open_idempotency_store"]


def open_idempotency_store(url: str) -> IdempotencyStore:
    """The store a URL names (not yet opened): ``sqlite:///PATH`` or ``postgresql://...``."""
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        from warren.api.ingest.idempotency.sqlite import SqliteIdempotencyStore

        path = url.removeprefix("sqlite:///")
        return SqliteIdempotencyStore(path)
    if scheme in ("postgresql", "postgres"):
        try:
            from warren.api.ingest.idempotency.postgres import PostgresIdempotencyStore
        except ImportError as exc:
            raise WarrenError(
                "a postgresql:// idempotency store needs asyncpg: pip install 'warren-webhooks[postgres]'"
            ) from exc
        return PostgresIdempotencyStore(url)
    raise WarrenError(f"unknown idempotency store scheme {scheme!r}: use sqlite:///PATH or postgresql://...")
