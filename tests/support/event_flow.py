"""Events flowing for tenants while a test changes endpoints: each publish remembered with when it started and
whether RabbitMQ routed it (a tenant's event that no endpoint takes is counted as unrouted, not an error)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass

from warren.broker.amqp.connection import connect
from warren.broker.events import Event
from warren.broker.publisher import Publisher
from warren.topology.config import WarrenConfig


@dataclass(frozen=True)
class Sent:
    id: str
    tenant: str
    type: str
    at: float  # time.monotonic() as the publish started
    routed: bool  # False: no queue took it (counted as the tenant's unrouted event)


class TenantFlow:
    """``async with TenantFlow(config, tenants, types)``: every ``interval`` one event per tenant, its type
    cycling through ``types``; published one at a time, each confirmed before the next (so ``routed`` is exact)."""

    def __init__(
        self,
        config: WarrenConfig,
        tenants: Sequence[str],
        types: Sequence[str] = ("flow.tick",),
        interval: float = 0.05,
    ) -> None:
        self.config, self.tenants, self.types, self.interval = config, list(tenants), list(types), interval
        self.sent: list[Sent] = []
        self.rounds = 0
        self._task: asyncio.Task[None] | None = None
        self._round_done = asyncio.Event()
        self._stopping = asyncio.Event()

    async def _run(self) -> None:
        connection = await connect(self.config.broker.urls, name="test-flow")
        try:
            publisher = await Publisher.open(connection, self.config.broker.prefix)
            while not self._stopping.is_set():
                kind = self.types[self.rounds % len(self.types)]
                for tenant in self.tenants:
                    unrouted = publisher.unrouted_tenant_events
                    at = time.monotonic()
                    event_id = await publisher.publish(Event(type=kind, data={"round": self.rounds}, tenant=tenant))
                    self.sent.append(Sent(event_id, tenant, kind, at, publisher.unrouted_tenant_events == unrouted))
                self.rounds += 1
                self._round_done.set()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self.interval)
        finally:
            await connection.close()

    async def rounds_after(self, count: int, timeout: float = 30.0) -> None:
        """Until ``count`` more rounds were published (fail after ``timeout``)."""
        target = self.rounds + count
        deadline = time.monotonic() + timeout
        while self.rounds < target:
            assert self._task is not None and not self._task.done(), "the flow stopped"
            assert time.monotonic() < deadline, f"the flow published {self.rounds} of {target} rounds"
            self._round_done.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._round_done.wait(), 0.5)

    async def __aenter__(self) -> TenantFlow:
        self._task = asyncio.create_task(self._run(), name="test-flow")
        return self

    async def stop(self) -> None:
        if self._task is None:
            return
        task, self._task = self._task, None
        if task.done():
            task.result()  # a failed flow fails the test
            return
        # Between publishes, not during one: a publish cancelled after it was sent would be delivered without
        # being in ``sent`` (a loaded run saw one such event the test took for an extra delivery).
        self._stopping.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), 15)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
