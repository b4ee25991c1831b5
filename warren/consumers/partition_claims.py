"""Spreading single-active-consumer queues across worker processes: an ordered endpoint's partitions, the
routing stage's partitions, the ordered lanes (anything ``Claimable``).

On RabbitMQ 3.10 the first consumer registered on a single-active-consumer queue stays active, so a worker
that starts first would own every partition. Instead each worker claims a fair share, ``ceil(P / W)``:

- W, the number of workers serving the endpoint, is the consumer count of a roster queue that every such
  worker consumes (read exactly with a passive declare);
- a claim on partition p is an exclusive queue ``<partition>.owner`` on a connection of its own, so a worker
  that dies loses its claims with its connection and the others take them over at their next round;
- a worker with more than its share releases partitions, idle ones first: it hands the partition back first
  (its lanes settle what is in flight, then its channel closes and RabbitMQ returns the rest to its head in
  order), then drops the claim, so the next owner never becomes active while a message of it is in flight.

Single active consumer stays on every partition queue as the safety net: two consumers during a hand-over
still deliver one at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import random
from typing import Protocol

import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractConnection

from warren.broker.amqp.connection import Nodes, connect_once
from warren.broker.amqp.uninterrupted import uninterrupted
from warren.consumers.health.fleet import join_roster
from warren.core.errors import describe

__all__ = ["Claimable", "PartitionClaims", "fair_share"]

log = logging.getLogger("warren.partitions")


def fair_share(partitions: int, workers: int) -> int:
    """How many partitions one of ``workers`` workers should own."""
    return math.ceil(partitions / max(1, workers))


class Claimable(Protocol):
    """What claims hand partitions to: an ordered endpoint's runner, the router, the ordered lanes' consumer."""

    queue_names: list[str]

    def connected(self) -> bool: ...

    def busy(self, queue_name: str) -> bool: ...

    async def assign(self, name: str) -> None: ...

    async def unassign(self, name: str) -> None: ...


class PartitionClaims:
    """Claims and releases ``runner``'s partitions for this worker, every ``interval`` seconds.

    ``roster`` is the queue every worker consuming them joins (by default ``<partitions' stem>.roster``, an ordered
    endpoint's); ``label`` names them in logs."""

    def __init__(
        self, nodes: Nodes, runner: Claimable, interval: float, *, roster: str | None = None, label: str | None = None
    ) -> None:
        self.nodes = nodes
        self.runner = runner
        self.interval = interval
        self.roster_name = roster or f"{runner.queue_names[0].rsplit('.', 1)[0]}.roster"
        self.label = label or str(getattr(getattr(runner, "endpoint", None), "name", self.roster_name))
        self.owned: list[str] = []
        self._connection: AbstractConnection | None = None
        self._channel: AbstractChannel | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    async def start(self) -> None:
        await self._connect()
        await self.rebalance()
        self._task = asyncio.create_task(self._loop(), name=f"claims-{self.label}")

    async def halt(self) -> None:
        """Stop rebalancing; the claims stay held until ``close`` (after the runner has drained)."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def close(self) -> None:
        """Release every claim by closing the claims connection."""
        await self.halt()
        if self._connection is not None:
            with contextlib.suppress(Exception):
                await self._connection.close()

    async def _connect(self) -> None:
        self._connection = await connect_once(self.nodes, name=f"warren-claims-{os.getpid()}")
        self._connection.close_callbacks.add(self._on_lost)
        self._channel, _ = await join_roster(self._connection, self.roster_name)
        self.owned = []

    def _on_lost(self, *_: object) -> None:
        if self._stopping:
            return
        # The broker dropped our claims with the connection: stop consuming now; the loop reconnects.
        lost, self.owned = self.owned, []
        if lost:
            log.warning("claims connection lost; releasing %d partition(s)", len(lost))
            asyncio.get_running_loop().create_task(self._unassign_all(lost))

    async def _unassign_all(self, partitions: list[str]) -> None:
        for partition in partitions:
            if partition in self.owned:
                # Claimed again meanwhile (the loop reconnects within a round, while earlier hand-backs are still
                # settling): the claim is ours, so keep consuming. Unassigned now, it would stay claimed and
                # unconsumed for good: no worker else may take it (a node-kill run left 512 events stuck so).
                continue
            await self.runner.unassign(partition)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval * random.uniform(0.8, 1.2))
            if not self.runner.connected():
                continue  # the delivery connection is reconnecting: nothing could be consumed yet
            try:
                if self._connection is None or self._connection.is_closed or self._channel_lost():
                    await self._reset()
                    await self._connect()
                await self.rebalance()
            except Exception as exc:  # the loop must outlive any one failure, or partitions stay unconsumed
                # Start again from a new connection next round: after a broker restart the channel that read
                # the roster is closed and the claims are gone, so half-repairs do not work.
                log.warning("partition rebalance failed (%s); reconnecting", describe(exc))
                await self._reset()

    def _channel_lost(self) -> bool:
        return self._channel is None or self._channel.is_closed

    async def _reset(self) -> None:
        """Drop the claims connection (and with it every claim: ``_on_lost`` stops those partitions)."""
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None and not connection.is_closed:
            with contextlib.suppress(Exception):
                await connection.close()
        if self.owned:
            self._on_lost()

    async def _workers(self) -> int:
        assert self._channel is not None
        queue = await uninterrupted(self._channel.declare_queue(self.roster_name, passive=True))
        result = queue.declaration_result
        return max(1, int(result.consumer_count or 1))

    async def _try_claim(self, partition: str) -> bool:
        """Declare the partition's exclusive owner queue; another worker holding it refuses (and closes the channel).

        The queue belongs to the connection, so the channel that declared it is closed at once either way.
        """
        assert self._connection is not None
        channel = await self._connection.channel()
        try:
            await uninterrupted(channel.declare_queue(f"{partition}.owner", exclusive=True, auto_delete=True))
        except (aiormq.exceptions.ChannelLockedResource, aiormq.exceptions.ChannelClosed):
            return False
        with contextlib.suppress(Exception):
            await channel.close()
        return True

    async def rebalance(self) -> None:
        """Claim up to the fair share, or release idle partitions above it."""
        target = fair_share(len(self.runner.queue_names), await self._workers())
        before = sorted(self.owned)
        if len(self.owned) < target:
            candidates = [q for q in self.runner.queue_names if q not in self.owned]
            random.shuffle(candidates)
            for partition in candidates:
                if len(self.owned) >= target:
                    break
                if await self._try_claim(partition):
                    self.owned.append(partition)
                    await self.runner.assign(partition)
        elif len(self.owned) > target:
            # Idle partitions first. A busy one is handed back whole: its lanes start nothing new, finish the
            # attempts in flight, then its channel closes; unassign returns after that, and only then does the
            # claim go, so the next owner never becomes active while a message of the partition is in flight here.
            for partition in sorted(self.owned, key=self.runner.busy):
                if len(self.owned) <= target:
                    break
                await self.runner.unassign(partition)
                self.owned.remove(partition)
                assert self._channel is not None
                with contextlib.suppress(aiormq.exceptions.AMQPError):
                    await uninterrupted(self._channel.queue_delete(f"{partition}.owner"))
        if sorted(self.owned) != before:
            log.info(
                "partitions owned",
                extra={"endpoint": self.label, "owned": sorted(self.owned), "target": target},
            )
