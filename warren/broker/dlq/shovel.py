"""Replay of a whole DLQ inside RabbitMQ: a dynamic shovel, created through the management API, watched, removed.

The shovel consumes the DLQ and publishes into the endpoint's exchange (fanout, or consistent hash for an
ordered endpoint, so every message re-hashes into its key's partition). ``ack-mode: on-confirm`` removes a
message from the DLQ only once the destination confirmed it; ``src-delete-after: queue-length`` makes the
shovel move as many messages as the DLQ held when it started, then delete itself. If the command is
interrupted, or its timeout passes, the shovel carries on inside RabbitMQ; the next run finds it (every replay
shovel of an endpoint is named ``{prefix}.replay.<endpoint>.<run id>``) and watches it instead of starting a
second one. Removing a shovel at work would duplicate: the copies it published and got confirmed, but had
not yet acked out of the DLQ, stay in both places (a 100 ms timeout on 3,000 letters left hundreds). Only a
shovel that failed, or never started, is removed.

Why a name per run: a shovel that deleted itself (``src-delete-after``) is still being torn down inside
RabbitMQ for a moment after its parameter is gone. A new shovel declared under the same name in that moment
gets its parameter but never starts [3.10.8]: the next replay waited out its whole timeout, every second time.
A fresh name per run avoids the collision, and the run checks that its shovel really started.

The replay marker: RabbitMQ 3.10.8 refuses ``headers`` in ``dest-publish-properties`` ("Unrecognised
terms"), so the shovel cannot set ``warren-replayed``. ``dest-add-forward-headers`` makes it add
``x-shovelled``, and the worker treats a shovelled message carrying ``warren-dead-reason`` as replayed
(``warren.consumers.delivery.is_replayed``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from aio_pika.abc import AbstractConnection

from warren.broker.amqp.probe import QueueProbe, missing
from warren.broker.management import ManagementClient
from warren.core.errors import ReplayError, TopologyError
from warren.topology import names

__all__ = [
    "POLL_INTERVAL",
    "ShovelReport",
    "replay_by_shovel",
    "shovel_definition",
    "shovel_name",
    "shovel_name_stem",
]

POLL_INTERVAL = 0.25  # seconds between looks at the shovel and the DLQ
SETTLE_TIME = 2.0  # seconds a finished shovel's last acks may take to show in the DLQ's count
START_TIME = 15.0  # seconds a new shovel may take to show as started (or to finish and remove itself)


def shovel_name_stem(prefix: str, endpoint: str) -> str:
    """What every replay shovel of an endpoint is named after: how a later run finds an earlier one."""
    return f"{prefix}.replay.{endpoint}"


def shovel_name(prefix: str, endpoint: str, run_id: str | None = None) -> str:
    """A replay shovel's name: the endpoint's stem and a run id (fresh unless given), never a reused name."""
    return f"{shovel_name_stem(prefix, endpoint)}.{run_id or uuid.uuid4().hex[:12]}"


def _is_replay_shovel(name: str, prefix: str, endpoint: str) -> bool:
    """Whether ``name`` is one of the endpoint's replay shovels (endpoint names hold no dots, run ids neither)."""
    stem = shovel_name_stem(prefix, endpoint) + "."
    return name.startswith(stem) and "." not in name[len(stem) :]


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
    name: str = ""  # the shovel's name ("" when there was nothing to move)


async def _parameter(api: ManagementClient, name: str) -> dict[str, Any] | None:
    result: dict[str, Any] | None = await api.request(
        "GET", f"parameters/shovel/{quote(api.vhost, safe='')}/{quote(name, safe='')}", allow_404=True
    )
    return result


async def _running_shovel(api: ManagementClient, prefix: str, endpoint: str) -> str | None:
    """The name of a replay shovel of this endpoint that an earlier run left at work, if any."""
    found = await api.request("GET", f"parameters/shovel/{quote(api.vhost, safe='')}", allow_404=True) or []
    for parameter in found:
        if _is_replay_shovel(str(parameter.get("name", "")), prefix, endpoint):
            return str(parameter["name"])
    return None


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

    ``on_progress(moved, total)`` is called at each look. On failure the shovel is deleted (what it had not
    moved stays in the DLQ), on timeout it is left to finish; either way ReplayError says how far it got.
    """
    dlq = names.dlq(prefix, endpoint)
    exchange = names.endpoint_exchange(prefix, endpoint)
    probe = QueueProbe(connection)
    try:
        if not await probe.exchange_exists(exchange):
            raise TopologyError(missing("exchange", exchange))
        before = await probe.depth(dlq)
        if before is None:
            raise TopologyError(missing("queue", dlq))
        earlier = await _running_shovel(api, prefix, endpoint)
        if earlier is None and before.ready == 0:
            return ShovelReport(0, 0, False, 0.0)
        name = earlier or shovel_name(prefix, endpoint)
        if earlier is None:
            await api.put_shovel(name, shovel_definition(api.vhost, dlq, exchange))
        watch = _Watch(api, probe, name, dlq, before.ready, resumed=earlier is not None)
        return await watch.run(endpoint, timeout, on_progress)
    finally:
        await probe.close()


@dataclass
class _Watch:
    """One shovel watched from its start (or from when this run found it) until it removed itself."""

    api: ManagementClient
    probe: QueueProbe
    name: str
    dlq: str
    total: int
    resumed: bool

    async def run(self, endpoint: str, timeout: float, on_progress: Callable[[int, int], None] | None) -> ShovelReport:
        started = time.monotonic()
        moved, seen = 0, self.resumed
        while True:
            parameter = await _parameter(self.api, self.name)
            status = await self.api.shovel_status(self.name)
            now = await self.probe.depth(self.dlq)
            remaining = now.ready if now is not None else 0
            moved = max(moved, self.total - remaining)
            seen = seen or status is not None or moved > 0
            if parameter is None:
                # src-delete-after: the shovel removed itself after moving the DLQ's length at its start
                # (a resumed shovel started before this run looked, so only the part seen here is known).
                moved = moved if self.resumed else self.total
                if on_progress is not None:
                    on_progress(moved, max(self.total, moved))
                await self.api.delete_shovel(self.name)  # already gone; a no-op so that nothing is left behind
                remaining = await _settled_depth(self.probe, self.dlq, self.total - moved)
                return ShovelReport(moved, remaining, self.resumed, time.monotonic() - started, self.name)
            if on_progress is not None:
                on_progress(min(moved, self.total), self.total)
            elapsed = time.monotonic() - started
            problem = None
            if status is not None and status.get("state") == "terminated":
                problem = f"shovel {self.name} failed: {status.get('reason') or 'terminated'}"
            elif not seen and elapsed > START_TIME:
                problem = f"shovel {self.name} did not start within {START_TIME:g}s; it was removed"
            elif elapsed > timeout:
                # Left at work: removing a shovel that moves would leave the copies it published, but had not
                # yet acked out of the DLQ, in both places. It removes itself once done.
                raise ReplayError(
                    f"replay of {endpoint} not finished after {timeout:g}s ({min(moved, self.total)} of "
                    f"{self.total} moved); shovel {self.name} carries on inside RabbitMQ and removes itself when "
                    f"done: replay the endpoint again (the same command) to watch it to its end"
                )
            if problem is not None:
                await self.api.delete_shovel(self.name)
                raise ReplayError(f"{problem}; {remaining} message(s) are still in {self.dlq}: run the replay again")
            await asyncio.sleep(POLL_INTERVAL)
