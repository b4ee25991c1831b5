"""Replay of a whole DLQ inside RabbitMQ: a dynamic shovel, created through the management API, watched, removed.

The shovel consumes the DLQ and publishes into the endpoint's exchange (fanout, or consistent hash for an
ordered endpoint, so every message re-hashes into its key's partition). ``ack-mode: on-confirm`` removes a
message from the DLQ only once the destination confirmed it; ``src-delete-after: queue-length`` makes the
shovel move as many messages as the DLQ held when it started, then delete itself. If the command is
interrupted the shovel carries on inside RabbitMQ; the next run finds it (its name is fixed per endpoint)
and watches it instead of starting a second one.

The replay marker: RabbitMQ 3.10.8 refuses ``headers`` in ``dest-publish-properties`` ("Unrecognised
terms"), so the shovel cannot set ``warren-replayed``. ``dest-add-forward-headers`` makes it add
``x-shovelled``, and the worker treats a shovelled message carrying ``warren-dead-reason`` as replayed
(``warren.consumers.delivery.is_replayed``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from aio_pika.abc import AbstractConnection

from warren.broker.management import ManagementClient
from warren.broker.queue_probe import QueueProbe
from warren.topology import names
from warren.topology.errors import ReplayError, TopologyError

__all__ = ["POLL_INTERVAL", "ShovelReport", "replay_by_shovel", "shovel_definition", "shovel_name"]

POLL_INTERVAL = 0.25  # seconds between looks at the shovel and the DLQ
SETTLE_TIME = 2.0  # seconds a finished shovel's last acks may take to show in the DLQ's count


def shovel_name(prefix: str, endpoint: str) -> str:
    """One replay shovel per endpoint at a time: the fixed name is how a later run finds an earlier one."""
    return f"{prefix}.replay.{endpoint}"


def shovel_definition(vhost: str, source_queue: str, destination_exchange: str) -> dict[str, Any]:
    """The shovel's parameter value. ``amqp:///vhost`` (no host) is a direct connection inside the node."""
    uri = "amqp:///" + quote(vhost, safe="")
    return {
        "src-protocol": "amqp091",
        "src-uri": uri,
        "src-queue": source_queue,
        "src-delete-after": "queue-length",
        "dest-protocol": "amqp091",
        "dest-uri": uri,
        "dest-exchange": destination_exchange,
        "dest-add-forward-headers": True,
        "ack-mode": "on-confirm",
    }


@dataclass(frozen=True)
class ShovelReport:
    moved: int  # messages the shovel moved (the DLQ's length when it started)
    remaining: int  # messages in the DLQ afterwards (arrived during the replay, or died again since)
    resumed: bool  # an earlier run's shovel was found still running, and watched to its end
    seconds: float


async def _parameter(api: ManagementClient, name: str) -> dict[str, Any] | None:
    result: dict[str, Any] | None = await api.request(
        "GET", f"parameters/shovel/{quote(api.vhost, safe='')}/{quote(name, safe='')}", allow_404=True
    )
    return result


async def _settled_depth(probe: QueueProbe, dlq: str, expected: int) -> int:
    """The DLQ's depth once the shovel's last acks are applied (a quorum queue applies them a moment later).

    Waits at most SETTLE_TIME for the count to come down to ``expected``; new dead letters may keep it above.
    """
    deadline = time.monotonic() + SETTLE_TIME
    while True:
        depth = await probe.depth(dlq)
        count = depth.ready if depth is not None else 0
        if count <= expected or time.monotonic() > deadline:
            return count
        await asyncio.sleep(0.05)


async def replay_by_shovel(
    connection: AbstractConnection,
    api: ManagementClient,
    prefix: str,
    endpoint: str,
    *,
    timeout: float = 600.0,
    on_progress: Callable[[int, int], None] | None = None,
) -> ShovelReport:
    """Move every message of the endpoint's DLQ back to its exchange; report once the shovel is gone.

    ``on_progress(moved, total)`` is called at each look. On timeout or failure the shovel is deleted (what
    it had not moved stays in the DLQ) and ReplayError says how far it got.
    """
    dlq = names.dlq(prefix, endpoint)
    exchange = names.endpoint_exchange(prefix, endpoint)
    name = shovel_name(prefix, endpoint)
    started = time.monotonic()
    probe = QueueProbe(connection)
    try:
        if not await probe.exchange_exists(exchange):
            raise TopologyError(f"exchange {exchange} does not exist: run `warren setup`")
        before = await probe.depth(dlq)
        if before is None:
            raise TopologyError(f"queue {dlq} does not exist: run `warren setup`")
        resumed = await _parameter(api, name) is not None
        total = before.ready
        if not resumed:
            if total == 0:
                return ShovelReport(0, 0, False, 0.0)
            await api.put_shovel(name, shovel_definition(api.vhost, dlq, exchange))
        moved = 0
        while True:
            parameter = await _parameter(api, name)
            status = await api.shovel_status(name)
            now = await probe.depth(dlq)
            remaining = now.ready if now is not None else 0
            moved = max(moved, total - remaining)
            if parameter is None:
                # src-delete-after: the shovel removed itself after moving the DLQ's length at its start
                # (a resumed shovel started before this run looked, so only the part seen here is known).
                moved = moved if resumed else total
                if on_progress is not None:
                    on_progress(moved, max(total, moved))
                await api.delete_shovel(name)  # already gone; a no-op kept so that nothing is ever left behind
                remaining = await _settled_depth(probe, dlq, total - moved)
                return ShovelReport(moved, remaining, resumed, time.monotonic() - started)
            if on_progress is not None:
                on_progress(min(moved, total), total)
            if status is not None and status.get("state") == "terminated":
                await api.delete_shovel(name)
                raise ReplayError(
                    f"shovel {name} failed: {status.get('reason') or 'terminated'}; "
                    f"{remaining} message(s) still in {dlq}"
                )
            if time.monotonic() - started > timeout:
                await api.delete_shovel(name)
                raise ReplayError(
                    f"replay of {endpoint} timed out after {timeout:g}s; the shovel was removed and "
                    f"{remaining} message(s) are still in {dlq}: run the replay again"
                )
            await asyncio.sleep(POLL_INTERVAL)
    finally:
        await probe.close()
