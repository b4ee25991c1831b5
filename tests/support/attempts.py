"""Attempt records for the attempt-log tests: made here, published with ``encode_batch`` as a worker would."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import aio_pika

from warren.store.attempt_records import AttemptEntry
from warren.topology import names
from warren.topology.config import WarrenConfig

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


async def publish(config: WarrenConfig, bodies: Sequence[bytes]) -> None:
    """Publish message bodies on the attempts exchange, persistent and confirmed, as a worker does."""
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await channel.get_exchange(names.attempts_exchange(config.broker.prefix))
        for body in bodies:
            message = aio_pika.Message(
                body, content_type="application/json", delivery_mode=aio_pika.DeliveryMode.PERSISTENT
            )
            await exchange.publish(message, routing_key="")
    finally:
        await connection.close()
