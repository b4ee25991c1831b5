"""A transport of the tests' own, to prove the seam: it records each send and answers as it is told."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from warren.topology.config import Endpoint
from warren.transport.base import Delivery, Outcome, SendResult


@dataclass(frozen=True)
class Sent:
    endpoint: str
    event_id: str
    attempts_made: int  # before this attempt, as the runner read it
    body: bytes


Script = Callable[[Endpoint, Delivery], SendResult]


def delivered(_: Endpoint, __: Delivery) -> SendResult:
    return SendResult(Outcome.DELIVERED, "stored", status=0, duration=0.001)


class RecordingTransport:
    """Answers with ``script(endpoint, delivery)``; every send is kept in ``sent``, in order."""

    def __init__(self, script: Script = delivered) -> None:
        self.script = script
        self.sent: list[Sent] = []
        self._changed = asyncio.Event()

    async def send(self, endpoint: Endpoint, delivery: Delivery) -> SendResult:
        self.sent.append(Sent(endpoint.name, delivery.event_id, delivery.attempts_made, delivery.body))
        self._changed.set()
        return self.script(endpoint, delivery)

    def ids(self, endpoint: str) -> list[str]:
        return [s.event_id for s in self.sent if s.endpoint == endpoint]

    async def wait_for(self, predicate: Callable[[RecordingTransport], bool], timeout: float) -> None:
        async def until() -> None:
            while not predicate(self):
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(until(), timeout)
        except TimeoutError:
            raise AssertionError(f"transport condition not met in {timeout}s; {len(self.sent)} sends") from None
