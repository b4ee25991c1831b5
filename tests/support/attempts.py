"""Attempt records for the attempt-log tests: made here, published with ``encode_batch`` as a worker would."""

from __future__ import annotations

import itertools

from warren.broker.attempt_records import AttemptEntry

_ids = itertools.count(1)
T0 = 1_790_000_000.0  # a fixed moment (2026-09-21) the tests count from


def attempt(**changes: object) -> AttemptEntry:
    """One record: a first failed attempt of ``evt_1`` at ``billing``, with ``changes``; a fresh id each call."""
    fields: dict[str, object] = {
        "id": f"att_{next(_ids):06d}",
        "event_id": "evt_1",
        "tenant": "acme",
        "endpoint": "billing",
        "attempt": 1,
        "at": T0,
        "status": 503,
        "duration_ms": 12.5,
        "outcome": "retry",
        "error": "HTTP 503",
        "next_delay_s": 0.8,
        "worker": "host:42",
    }
    fields.update(changes)
    return AttemptEntry(**fields)  # type: ignore[arg-type]


def delivered(**changes: object) -> AttemptEntry:
    """A successful attempt."""
    return attempt(**{"status": 200, "outcome": "delivered", "error": None, "next_delay_s": None, **changes})
