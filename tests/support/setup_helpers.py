"""Helpers for the setup tests: what the broker holds under a prefix, and collecting messages from queues."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from aio_pika.abc import AbstractChannel, AbstractIncomingMessage

from warren.broker.management import ManagementClient


@dataclass(frozen=True)
class PrefixState:
    """Everything the management API lists whose name starts with the prefix (bindings: either end does)."""

    exchanges: dict[str, dict[str, Any]]
    queues: dict[str, dict[str, Any]]
    bindings: set[tuple[str, str, str, str]]  # (source, destination, destination type, routing key)


async def prefix_state(api: ManagementClient, prefix: str) -> PrefixState:
    head = f"{prefix}."
    exchanges = {e["name"]: e for e in await api.exchanges() if e["name"].startswith(head)}
    queues = {q["name"]: q for q in await api.queues() if q["name"].startswith(head)}
    bindings = {
        (b["source"], b["destination"], b["destination_type"], b["routing_key"])
        for b in await api.bindings()
        if b["source"] and (b["source"].startswith(head) or b["destination"].startswith(head))
    }
    return PrefixState(exchanges, queues, bindings)


@dataclass(frozen=True)
class Arrival:
    queue: str
    at: float  # time.monotonic()
    message: AbstractIncomingMessage


class Collector:
    """Consumes from queues (auto-ack) and records arrivals: ``async with Collector(ch, qs) as c: await c.wait(n)``.

    The consumers are registered when ``__aenter__`` returns, so a message published after it is seen at once.
    """

    def __init__(self, channel: AbstractChannel, queues: Iterable[str]) -> None:
        self.channel = channel
        self.queues = list(queues)
        self.arrivals: list[Arrival] = []
        self._changed = asyncio.Event()
        self._tags: list[tuple[Any, str]] = []

    def _callback(self, name: str) -> Callable[[AbstractIncomingMessage], Any]:
        async def callback(message: AbstractIncomingMessage) -> None:
            self.arrivals.append(Arrival(name, time.monotonic(), message))
            self._changed.set()

        return callback

    async def __aenter__(self) -> Collector:
        for name in self.queues:
            queue = await self.channel.get_queue(name, ensure=False)
            self._tags.append((queue, await queue.consume(self._callback(name), no_ack=True)))
        return self

    async def __aexit__(self, *exc: object) -> None:
        for queue, tag in self._tags:
            await queue.cancel(tag)

    async def wait(self, count: int, timeout: float) -> list[Arrival]:
        """The arrivals once there are ``count`` of them, or all there are after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while len(self.arrivals) < count and (left := deadline - time.monotonic()) > 0:
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                break
        return list(self.arrivals)
