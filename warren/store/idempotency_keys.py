"""The ingest API's Idempotency-Keys: what is recorded per key, and the pure decision on a claim.

One table, whatever the database (made by the ``idempotency`` line of migrations, ``store/engine.py``):
``warren_api_idempotency (key) -> fingerprint, state, status, body, claimed_at, expires_at``.
``fingerprint`` binds the key to the request it first came with (method, path and body bytes). ``state`` is
``busy`` while a request holds the key, ``done`` once its 202 is stored (then replayed to every retry),
``open`` when it ended without a stored answer (a 207, 409 or 503: a retry with the same body may try again).
A row counts until ``expires_at`` (claim time plus the retention).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

__all__ = ["TABLE", "Claim", "Decision", "IdempotencyStore", "Row", "decide", "fingerprint"]

TABLE = "warren_api_idempotency"


class Decision(Enum):
    CLAIM = "claim"  # this request holds the key now: go on, then complete() or release()
    REPLAY = "replay"  # the same request succeeded before: answer as then, publish nothing
    CONFLICT = "conflict"  # the key was used with another request: 422
    BUSY = "busy"  # the same request is being handled right now by another call: 409, retry later


@dataclass(frozen=True)
class Row:
    fingerprint: str
    state: str
    status: int | None
    body: bytes | None
    claimed_at: float
    expires_at: float


@dataclass(frozen=True)
class Claim:
    decision: Decision
    status: int | None = None
    body: bytes | None = None


def fingerprint(method: str, path: str, body: bytes) -> str:
    """What binds a key to its request: the same method, path and body bytes give the same fingerprint."""
    digest = hashlib.sha256()
    for part in (method.encode(), path.encode(), body):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def decide(row: Row | None, print_: str, now: float, stale_before: float) -> Claim:
    """What a request with fingerprint ``print_`` may do with a key whose record is ``row``.

    A ``busy`` record claimed before ``stale_before`` belongs to a request that died (its process
    crashed): it may be claimed again.
    """
    if row is None or row.expires_at <= now:
        return Claim(Decision.CLAIM)
    if row.fingerprint != print_:
        return Claim(Decision.CONFLICT)
    if row.state == "done":
        return Claim(Decision.REPLAY, row.status, row.body)
    if row.state == "busy" and row.claimed_at > stale_before:
        return Claim(Decision.BUSY)
    return Claim(Decision.CLAIM)


class IdempotencyStore(Protocol):
    """Where keys are remembered: one SQLite file for one host, PostgreSQL for several API processes."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def claim(self, key: str, print_: str, now: float, retention: float, stale_before: float) -> Claim:
        """Decide on the key (``decide``) and, on CLAIM, record it as ``busy`` in the same transaction."""
        ...

    async def complete(self, key: str, status: int, body: bytes) -> None:
        """Store the answer to replay: the key is ``done``."""
        ...

    async def release(self, key: str) -> None:
        """No answer to replay: the key stays bound to its fingerprint, and a retry may claim it again."""
        ...

    async def purge(self, now: float) -> int:
        """Delete expired records; how many."""
        ...
