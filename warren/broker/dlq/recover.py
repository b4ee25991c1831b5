"""Recover: send an endpoint's failures since a moment back for delivery, as Svix's recover does.

What failed for good sits in the endpoint's DLQ with the time it died (``warren-dead-ms``), so recovering is the
client-side replay of the letters dead at or after ``since``: each is published to the endpoint's exchange with
a fresh retry budget, confirmed, and only then removed from the DLQ; older letters stay, in order. It is the
path ``warren dlq replay --since`` takes; the admin API (``POST /v1/endpoints/{name}/recover``) and
``warren endpoint recover`` call it.
"""

from __future__ import annotations

from aio_pika.abc import AbstractConnection

from warren.broker.dlq.browse import MAX_SCAN
from warren.broker.dlq.move import MoveReport, move_selected
from warren.broker.dlq.selection import Selection

__all__ = ["recover", "replay_events"]


async def recover(
    connection: AbstractConnection, prefix: str, endpoint: str, since_ms: int, *, scan: int = MAX_SCAN
) -> MoveReport:
    """Replay the endpoint's dead letters dead at or after ``since_ms`` (epoch ms); ``moved`` says how many."""
    return await move_selected(connection, prefix, endpoint, Selection(since_ms=since_ms), scan=scan)


async def replay_events(
    connection: AbstractConnection, prefix: str, endpoint: str, event_ids: frozenset[str], *, scan: int = MAX_SCAN
) -> MoveReport:
    """Replay the endpoint's dead letters of these events (``warren dlq replay --ids``); ``moved`` says how many."""
    return await move_selected(connection, prefix, endpoint, Selection(ids=event_ids), scan=scan)
