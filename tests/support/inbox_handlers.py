"""Handlers the inbox tests name in their configuration (``tests.support.inbox_handlers:...``).

They write through the transaction into ``effects`` (the exactly-once evidence) and note every call in
``CALLS`` (the at-least-once evidence: calls whose transaction rolled back are there too).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from warren.receiving.errors import NonRetryable
from warren.receiving.messages import InboundEvent
from warren.receiving.stores.base import Transaction


@dataclass(frozen=True)
class Call:
    handler: str
    event_id: str
    attempt: int
    at: float  # time.monotonic()


CALLS: list[Call] = []


def calls(handler: str, event_id: str) -> list[Call]:
    return [c for c in CALLS if c.handler == handler and c.event_id == event_id]


async def _effect(event: InboundEvent, tx: Transaction, note: str) -> None:
    await tx.execute("INSERT INTO effects (event_id, note) VALUES ($1, $2)", event.id, note)


async def record(event: InboundEvent, tx: Transaction) -> None:
    CALLS.append(Call("record", event.id, event.attempt, time.monotonic()))
    await _effect(event, tx, event.body.decode())


async def flaky(event: InboundEvent, tx: Transaction) -> None:
    """Fails on the first two attempts, after having written its effect (which the rollback undoes)."""
    CALLS.append(Call("flaky", event.id, event.attempt, time.monotonic()))
    await _effect(event, tx, f"attempt {event.attempt}")
    if event.attempt < 2:
        raise RuntimeError(f"temporary failure on attempt {event.attempt}")


async def broken(event: InboundEvent, tx: Transaction) -> None:
    CALLS.append(Call("broken", event.id, event.attempt, time.monotonic()))
    raise RuntimeError("always fails")


def refuses(event: InboundEvent, tx: Transaction) -> None:
    CALLS.append(Call("refuses", event.id, event.attempt, time.monotonic()))
    raise NonRetryable("this event can never be handled")
