"""Recover: send an endpoint's failures since a moment back for delivery, as Svix's recover does.

What failed for good sits in the endpoint's DLQ with the time it died (``warren-dead-ms``), so recovering is the
client-side replay of the letters dead at or after ``since``: each is published to the endpoint's exchange with
a fresh retry budget, confirmed, and only then removed from the DLQ; older letters stay, in order. It is the
path ``warren dlq replay --since`` takes; the admin API (``POST /v1/endpoints/{name}/recover``) and
``warren endpoint recover`` call it.

A lane endpoint's letters are those naming it (``warren-endpoint``) in its lane's shared DLQ: they go back to
its lane, and its lane-mates' stay where they were, in order (``move_selected`` with ``lanes``). The report's
``depth`` is then the endpoint's own letters among those read, what its own DLQ would have held: the lane-mates'
(perhaps another tenant's) are neither touched nor counted.
"""

from __future__ import annotations

import dataclasses

from aio_pika.abc import AbstractConnection

from warren.broker.dlq.browse import MAX_SCAN
from warren.broker.dlq.move import MoveReport, move_selected
from warren.broker.dlq.selection import Selection
from warren.topology.config import WarrenConfig

__all__ = ["recover", "replay_events", "shared_lanes"]


def shared_lanes(config: WarrenConfig, home: str) -> int:
    """The lane count for an endpoint of ``home`` ``lane`` (its letters are in its lane's shared DLQ), else 0."""
    return config.lanes.count if home == "lane" else 0


async def _move(
    connection: AbstractConnection, prefix: str, endpoint: str, selection: Selection, scan: int, lanes: int
) -> MoveReport:
    report = await move_selected(connection, prefix, endpoint, selection, scan=scan, lanes=lanes)
    return dataclasses.replace(report, depth=report.own) if lanes else report


async def recover(
    connection: AbstractConnection, prefix: str, endpoint: str, since_ms: int, *, scan: int = MAX_SCAN, lanes: int = 0
) -> MoveReport:
    """Replay the endpoint's dead letters dead at or after ``since_ms`` (epoch ms); ``moved`` says how many."""
    return await _move(connection, prefix, endpoint, Selection(since_ms=since_ms), scan, lanes)


async def replay_events(
    connection: AbstractConnection,
    prefix: str,
    endpoint: str,
    event_ids: frozenset[str],
    *,
    scan: int = MAX_SCAN,
    lanes: int = 0,
) -> MoveReport:
    """Replay the endpoint's dead letters of these events (``warren dlq replay --ids``); ``moved`` says how many."""
    return await _move(connection, prefix, endpoint, Selection(ids=event_ids), scan, lanes)
